#!/usr/bin/env bash
# A GPU session's checks as one command: what the device machine runs, with .whl/ carried
# (benchmarks/gpu_wheels.sh). Writes to OUT (default gpu-out/): gpu.md and gpu.json (the
# harness compiled and eager, its loss curves, fairseq 0.12.2 beside it), gpu-profile.txt, the
# CUDA tests' log, and gpu-host-overhead.md and .json, all within BUDGET seconds (default 560:
# one device call; on an H200 the benchmark took about 200 s, the tests 145, the host-overhead
# variants 115). Each part is cut to what is left, so a run cut short keeps what it measured.
# Copy the .md, .json and profile files into results/ when the run is the one to keep. Name the
# commit, which the device's copy of .git does not know:
#     NMTBENCH_COMMIT=<git rev-parse --short HEAD, here> bash benchmarks/gpu_run.sh
set -uo pipefail
out="${OUT:-gpu-out}"
end=$((SECONDS + ${BUDGET:-560}))
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv
timeout $((end - SECONDS - 260)) python3 benchmarks/gpu.py --out "$out/gpu" --both \
    --loss-curve 100 --profile --sentences 20 --batches 2 --fairseq python3 2>&1 \
    | grep -v " INFO \| warn" | tee "$out/gpu.log"
timeout $((end - SECONDS - 110)) python3 -m pytest -q -p no:cacheprovider -p no:hydra_pytest \
    -n 4 -m "slow or not slow" tests/models/test_cuda.py tests/models/test_compiling.py 2>&1 \
    | tail -30 | tee "$out/cuda-tests.log"
timeout $((end - SECONDS)) python3 benchmarks/gpu_host_overhead.py \
    --variants eager compiled cuda-graphs --out "$out/gpu-host-overhead" 2>&1 \
    | grep -v " INFO \| warn" | tee "$out/host-overhead.log"
