#!/usr/bin/env bash
# The wheels a bare GPU machine lacks for benchmarks/gpu.py (with --fairseq) and the CUDA tests,
# for its Python 3.12, into OUT (default .whl/, which git ignores locally: add `/.whl/` to
# .git/info/exclude). The harness's own needs are pinned as in requirements.lock; fairseq 0.12.2
# and the ANTLR 4.8 runtime publish sources only, so they are built here with a Python 3.12
# (PYTHON312, default python3.12): fairseq's torch extensions are skipped (its Transformer needs
# none), its Cython ones built. benchmarks/gpu_run.sh installs them there.
set -euo pipefail
out="${1:-.whl}"
py312="${PYTHON312:-python3.12}"
here="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$out"
pinned() {  # NAME==VERSION as requirements.lock pins it
    grep -i "^$1==" "$here/requirements.lock"
}
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$out" \
    "$(pinned jsonschema)" "$(pinned jsonschema-specifications)" "$(pinned referencing)" \
    "$(pinned rpds-py)" "$(pinned sacremoses)" "$(pinned sentence-splitter)" \
    hydra-core==1.0.7 omegaconf==2.0.6 bitarray
"$py312" -m pip wheel -q --no-deps -w "$out" fairseq==0.12.2 antlr4-python3-runtime==4.8
ls "$out"
