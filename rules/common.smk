# Config checking and every input function; the other rule files stay declarative.
import os
import sys

from nmtbench import config as nmtconfig
from nmtbench.errors import InputError

try:
    PLAN = nmtconfig.check(
        config, f"{workflow.basedir}/config/schema.yaml", f"{workflow.basedir}/papers"
    )
except InputError as err:
    print(f"config error: {err}", file=sys.stderr)
    sys.exit(1)


wildcard_constraints:
    dataset=r"[A-Za-z0-9_.-]+",
    experiment=r"[A-Za-z0-9_-]+",
    seed=r"\d+",
    side=r"src|tgt",
    split=r"valid|test",
    tag=r"[A-Za-z0-9-]+",
    baseline=r"[A-Za-z0-9_-]+",
    btag=r"[A-Za-z0-9-]+",
    cutoffs=r"[0-9-]+",


RUN = "results/runs/{dataset}/{experiment}/seed{seed}"
SPLITS = ["train", "valid", "test"]


def toy_datasets():
    return [d for d, spec in config["datasets"].items() if spec["kind"] == "toyworld"]


def real_datasets():
    return [d for d, spec in config["datasets"].items() if spec["kind"] != "toyworld"]


def tokenizer_corpora(wildcards):
    """The training side, plus the monolingual corpus where the dataset has one (toy world)."""
    corpora = [prepared(wildcards.dataset, f"train.{wildcards.side}")]
    if dataset_spec(wildcards)["kind"] == "toyworld":
        corpora.insert(0, prepared(wildcards.dataset, f"mono.{wildcards.side}"))
    return corpora


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


def final_outputs():
    return PLAN.targets() + ["results/tables.md"] + PLAN.figure_outputs()


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
        PLAN.train_settings(wildcards.dataset, wildcards.experiment, int(wildcards.seed))
    )


def decode_settings(wildcards):
    return PLAN.decode_for_tag(wildcards.tag)


def resource(rule, key):
    return config["resources"][rule][key]
