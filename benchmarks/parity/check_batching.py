"""Run with fairseq's Python: do `nmtbench.parts.batches.token_batches` and fairseq's
`batch_by_size` make the same batches? Random lengths, budgets and batch-size multiples; prints a
JSON summary.

    .venv-fairseq/bin/python benchmarks/parity/check_batching.py
"""

import json
import random
import sys
from pathlib import Path

import numpy as np
from fairseq.data import data_utils

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from nmtbench.parts.batches import token_batches  # noqa: E402

CASES = 500
rng = random.Random(0)
mismatches = []
for case in range(CASES):
    lengths = [rng.randint(1, rng.choice([5, 20, 60, 200])) for _ in range(rng.randint(1, 600))]
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    max_tokens = rng.choice([256, 1024, 4096])
    multiple = rng.choice([1, 2, 8])
    ours = token_batches(order, lengths, max_tokens, multiple=multiple)
    theirs = data_utils.batch_by_size(np.array(order, dtype=np.int64), lengths.__getitem__,
                                      max_tokens=max_tokens,
                                      required_batch_size_multiple=multiple)
    if ours != [b.tolist() for b in theirs]:
        mismatches.append(case)
print(json.dumps({"cases": CASES, "mismatches": len(mismatches), "first": mismatches[:5]}))
