#!/usr/bin/env bash
# Build the fairseq 0.12.2 reference environment as a venv (default .venv-fairseq), isolated from
# the harness's own, for benchmarks/parity. Where conda is available, envs/fairseq.yaml (Python
# 3.10, which fairseq 0.12.2 supports as released) is the simpler route.
#
# On Python 3.11 with CPU torch 2.13.0 fairseq 0.12.2 needs these fixes, and nothing else:
# - built from its PyPI sdist in pip's isolated build environment, which has no torch, so the
#   torch C++ extensions are skipped (the sdist lacks libbase's source; the Transformer and
#   CMLM need none of them);
# - installed without its torchaudio requirement (only the speech tasks import it);
# - numpy<2 (fairseq uses np.float and friends, removed in numpy 2);
# - jsonschema, which the harness's modules that check_batching.py and check_equivalence.py
#   import there need (nmtbench reads its methods from config/schema.yaml);
# - and two run-time fixes that benchmarks/parity/run.py applies to every fairseq command (so
#   they serve envs/fairseq.yaml too): fairseq_site/sitecustomize.py on PYTHONPATH (Python
#   3.11 rejects the dataclass-instance defaults of fairseq's and hydra-core 1.0's configs;
#   fairseq-generate calls torch's fused encoder kernel with an outdated signature), and
#   TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 (torch.load's weights_only default, True since torch
#   2.6, refuses fairseq's pickled checkpoints).
set -euo pipefail
venv="${1:-.venv-fairseq}"
here="$(cd "$(dirname "$0")" && pwd)"
python3 -m venv "$venv"
pip="$venv/bin/python -m pip"
$pip install -q 'pip<24.1'  # omegaconf 2.0.6's metadata (PyYAML>=5.1.*) is refused by pip>=24.1
$pip install -q torch==2.13.0 'numpy<2' cffi cython 'hydra-core>=1.0.7,<1.1' 'omegaconf<2.1' \
    regex 'sacrebleu>=1.4.12' tqdm bitarray 'jsonschema>=4.20'
$pip install -q --no-deps fairseq==0.12.2
PYTHONPATH="$here/fairseq_site" "$venv/bin/python" -c "import fairseq.models.transformer, \
fairseq.models.nat.cmlm_transformer; print('fairseq', fairseq.__version__, 'ready in $venv')"
