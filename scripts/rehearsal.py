"""Rehearse config/paper.yaml on this machine's CPUs (docs/rehearsal.md): every experiment of
every table, a handful of updates each, to a filled report marked as a rehearsal.

    python scripts/rehearsal.py --workdir /tmp/rehearsal [snakemake arguments...]

Started again on the same workdir, it goes on where it stopped (Snakemake's own resumption)."""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "helpers"))

from rehearsal import rehearse  # noqa: E402 - after the helpers' directory is on the path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True,
                        help="where the mirror, the stand-ins and the workflow's outputs go")
    args, snakemake_args = parser.parse_known_args()
    record = rehearse(args.workdir.resolve(), "--keep-going", *snakemake_args)
    print(json.dumps(record))
    return record["returncode"]


if __name__ == "__main__":
    sys.exit(main())
