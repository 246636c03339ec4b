#!/usr/bin/env bash
# A GPU session's checks as one command: what the device machine runs, with .whl/ carried
# (benchmarks/gpu_wheels.sh). Writes to OUT (default gpu-out/): gpu.md and gpu.json (the
# harness compiled and eager, its loss curves, fairseq 0.12.2 beside it), gpu-profile.txt, the
# CUDA tests' log, and gpu-host-overhead.md and .json, all within BUDGET seconds (default 560:
# one device call; on an H200 the benchmark took about 200 s, the tests 145, three host-overhead
# variants 115). Each part is cut to what is left, so a run cut short keeps what it measured.
# PARTS picks the parts (default: "benchmark tests host-overhead"); PARTS=host-overhead gives
# the whole budget to the host-overhead variants (all of them: benchmarks/gpu_host_overhead.py).
# Copy the .md, .json and profile files into results/ when the run is the one to keep. Name the
# commit, which the device's copy of .git does not know:
#     NMTBENCH_COMMIT=<git rev-parse --short HEAD, here> bash benchmarks/gpu_run.sh
set -uo pipefail
out="${OUT:-gpu-out}"
parts=" ${PARTS:-benchmark tests host-overhead} "
end=$((SECONDS + ${BUDGET:-560}))
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv
# the seconds a part may take: what is left, less what the parts after it in PARTS need
left() {
    local reserve=0
    [[ $1 == benchmark && $parts == *" tests "* ]] && reserve=$((reserve + 150))
    [[ $1 != host-overhead && $parts == *" host-overhead "* ]] && reserve=$((reserve + 110))
    echo $((end - SECONDS - reserve))
}
if [[ $parts == *" benchmark "* ]]; then
    timeout "$(left benchmark)" python3 benchmarks/gpu.py --out "$out/gpu" --both \
        --loss-curve 100 --profile --sentences 20 --batches 2 --fairseq python3 2>&1 \
        | grep -v " INFO \| warn" | tee "$out/gpu.log"
fi
if [[ $parts == *" tests "* ]]; then
    timeout "$(left tests)" python3 -m pytest -q -p no:cacheprovider -p no:hydra_pytest \
        -n 4 -m "slow or not slow" tests/parts/test_cuda.py tests/parts/test_compiling.py \
        2>&1 | tail -30 | tee "$out/cuda-tests.log"
fi
if [[ $parts == *" host-overhead "* ]]; then
    # alone, every variant; after the others, the three measured before
    if [[ $parts == " host-overhead " ]]; then variants=(); else
        variants=(--variants eager compiled cuda-graphs); fi
    timeout "$(left host-overhead)" python3 benchmarks/gpu_host_overhead.py "${variants[@]}" \
        --out "$out/gpu-host-overhead" 2>&1 | grep -v " INFO \| warn" \
        | tee "$out/host-overhead.log"
fi
