# nmtbench: pre-trained BERT models in NMT, reproduced on equal terms.
# The embedded default (config/config.yaml) runs on the generated toy world; see README.md.
import os
import shlex
import sys

from snakemake.utils import min_version

min_version("9.0")

# Snakemake formats the paths of rules' conda environments, which lie in this checkout, as
# patterns: a brace in the checkout's path would be taken for a wildcard.
if "{" in workflow.basedir or "}" in workflow.basedir:
    print(f"error: the workflow's path {workflow.basedir} holds a brace, which Snakemake takes "
          "for a wildcard; clone it to a path without { or }", file=sys.stderr)
    sys.exit(1)

# Every job imports nmtbench from this checkout, also inside a --use-conda environment (which
# pins the dependencies but cannot install the project from a path relative to itself).
# (Braces doubled twice: once for this f-string, once for snakemake's own formatting.)
shell.prefix(
    "set -euo pipefail; "
    f"export PYTHONPATH={shlex.quote(workflow.basedir)}${{{{PYTHONPATH:+:$PYTHONPATH}}}}; "
)


DEFAULT_CONFIGFILE = os.path.abspath(f"{workflow.basedir}/config/config.yaml")

# The workflow runs on its config files as nmtbench reads them (workflow_config: YAML 1.2,
# a key written twice refused), not as Snakemake's YAML 1.1 reader does (010 is 8, `no` is
# false, 1e-3 is text), and reads them before Snakemake reads the default one, whose errors
# there name neither the file nor the line. (Snakemake reads --configfile files before this
# Snakefile: one it cannot read stops it in its own words.) A --configfile or --config flag
# given twice, of which Snakemake reads the last alone, is refused (check_command_line).
from nmtbench.errors import InputError
from nmtbench.workflow.config import check_command_line, workflow_config

try:
    if sys.argv[0].endswith(("snakemake", os.path.join("snakemake", "__main__.py"))):
        check_command_line(sys.argv[1:])  # Snakemake's, not a program calling its API
    NMTBENCH_CONFIG = workflow_config(
        DEFAULT_CONFIGFILE, workflow.config_settings.configfiles, workflow.config_settings.config,
        workflow.config_settings.replace_workflow_config)
except InputError as err:
    print(f"config error: {err}", file=sys.stderr)
    sys.exit(1)


configfile: DEFAULT_CONFIGFILE


config.clear()
config.update(NMTBENCH_CONFIG)


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
