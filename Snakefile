# nmtbench: pre-trained BERT models in NMT, reproduced on equal terms.
# The embedded default (config/config.yaml) runs on the generated toy world; see README.md.
import os
import shlex

from snakemake.utils import min_version

min_version("9.0")

# Every job imports nmtbench from this checkout, also inside a --use-conda environment (which
# pins the dependencies but cannot install the project from a path relative to itself).
# (Braces doubled twice: once for this f-string, once for snakemake's own formatting.)
shell.prefix(
    "set -euo pipefail; "
    f"export PYTHONPATH={shlex.quote(workflow.basedir)}${{{{PYTHONPATH:+:$PYTHONPATH}}}}; "
)


DEFAULT_CONFIGFILE = os.path.abspath(f"{workflow.basedir}/config/config.yaml")


configfile: DEFAULT_CONFIGFILE


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/pretrained.smk"
include: "rules/train.smk"
include: "rules/decode.smk"
include: "rules/evaluate.smk"
include: "rules/analyze.smk"
include: "rules/report.smk"


rule all:
    input:
        final_outputs(),
    default_target: True
