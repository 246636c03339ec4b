# Config checking and every input function; the other rule files stay declarative.
import os
import sys

from nmtbench import config as nmtconfig
from nmtbench.errors import InputError

try:
    nmtconfig.check(config, workflow.source_path("../config/schema.yaml"))
except InputError as err:
    print(f"config error: {err}", file=sys.stderr)
    sys.exit(1)


wildcard_constraints:
    dataset=r"[A-Za-z0-9_.-]+",
    experiment=r"[A-Za-z0-9_.-]+",
    seed=r"\d+",
    side=r"src|tgt",


RUN = "results/runs/{dataset}/{experiment}/seed{seed}"
SPLITS = ["train", "valid", "test"]


def toy_datasets():
    return [d for d, spec in config["datasets"].items() if spec["kind"] == "toyworld"]


def dataset_spec(wildcards):
    return config["datasets"][wildcards.dataset]


def prepared(dataset, name):
    return f"data/{dataset}/prepared/{name}"


def tokenizer_dir(dataset, side):
    return f"data/{dataset}/tokenizer/{side}"


def tokenizer_file(dataset, side):
    """The file that marks a saved tokenizer; rules pass its directory on."""
    return f"{tokenizer_dir(dataset, side)}/tokenizer_config.json"


def run_file(name):
    return f"{RUN}/{name}"


def run_dirs():
    return [
        RUN.format(dataset=d, experiment=e, seed=s)
        for d, e, s in nmtconfig.requested_runs(config)
    ]


def final_outputs():
    # The runs are targets themselves: a clone ships the default's tables.md, which must not
    # make Snakemake think there is nothing to do.
    return run_metrics() + ["results/tables.md"]


def run_metrics():
    return [f"{run}/metrics.json" for run in run_dirs()]


def train_inputs(wildcards):
    d = wildcards.dataset
    return {
        **{f"{split}_{side}": prepared(d, f"{split}.{side}")
           for split in ("train", "valid") for side in ("src", "tgt")},
        **{f"{side}_tokenizer": tokenizer_file(d, side)
           for side in ("src", "tgt")},
    }


def experiment_json(wildcards):
    return nmtconfig.as_json(
        nmtconfig.experiment_config(config, wildcards.experiment, int(wildcards.seed))
    )


def decode_settings(wildcards):
    return nmtconfig.decode_config(config, wildcards.experiment)


def resource(rule, key):
    return config["resources"][rule][key]
