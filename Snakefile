# nmtbench: pre-trained BERT models in NMT, reproduced on equal terms.
# The embedded default (config/config.yaml) runs on the generated toy world; see README.md.
from snakemake.utils import min_version

min_version("9.0")


configfile: f"{workflow.basedir}/config/config.yaml"


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
