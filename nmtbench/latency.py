"""Per-sentence decoding latency, as AB-Net's Table 1 reports it: batch size 1 on the test set.

The first sentences warm the device up and are not counted; the median and 90th percentile of
the rest are reported with the hardware they were measured on. Absolute times are only
comparable on the same machine; the report's speedup column divides two runs' medians.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import torch

from nmtbench.devices import hardware_name
from nmtbench.errors import InputError
from nmtbench.fileio import read_lines, write_json
from nmtbench.translate import load_run_model, translate_lines

WARMUP = 5


def measure_latency(run_dir: str | Path, src_path: str | Path, out_path: str | Path, *,
                    sentences: int, checkpoint: str = "best", average_last: int = 0,
                    device: str = "auto", **decode: Any) -> dict[str, Any]:
    """Decode the first `sentences` test sentences one at a time; write latency.json."""
    model, src_tok, tgt_tok, _ = load_run_model(run_dir, checkpoint, average_last, device)
    lines = read_lines(src_path)
    if len(lines) < WARMUP + 1:
        raise InputError(f"{src_path}: {len(lines)} lines; latency needs more than {WARMUP}")
    lines = lines[: WARMUP + sentences]
    cuda = next(model.parameters()).device.type == "cuda"
    times = []
    for i, line in enumerate(lines):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        translate_lines(model, src_tok, tgt_tok, [line], batch_size=1, **decode)
        if cuda:
            torch.cuda.synchronize()
        if i >= WARMUP:
            times.append((time.perf_counter() - start) * 1000)
    result = {
        "median_ms": statistics.median(times),
        "p90_ms": statistics.quantiles(times, n=10)[-1] if len(times) > 1 else times[0],
        "sentences": len(times),
        "warmup_sentences": WARMUP,
        "batch_size": 1,
        "device": hardware_name(next(model.parameters()).device),
        "threads": torch.get_num_threads(),
        "decode": decode,
    }
    write_json(out_path, result)
    return result
