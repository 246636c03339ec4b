"""Every file name of the workflow, once: path templates in `str.format` style.

The rules use them as their input/output patterns (a template's fields are the rule's
wildcards) and the Python code formats the same constants, so a name is spelled in one place
and no path is ever parsed back into its fields. `fill` formats some fields and keeps the
others as wildcards.
"""

from __future__ import annotations

from string import Formatter

# --- data ------------------------------------------------------------------------------------
PREPARED_DIR = "data/{dataset}/prepared"
PREPARED = PREPARED_DIR + "/{file}"  # {split}.{side}, mono.{side}, manifest.json
# what made a prepared dataset: a recipe's downloads and splits, or a toy world's settings
PREPARED_MANIFEST = PREPARED.format(dataset="{dataset}", file="manifest.json")
MONOLINGUAL = "data/{dataset}/monolingual/mono.tgt"  # a real dataset's, to back-translate
MONOLINGUAL_MANIFEST = MONOLINGUAL + ".manifest.json"
# a monolingual corpus's text in a side's language, that a checkpoint pre-trained here reads too
EXTRA_CORPUS = "data/{dataset}/extra_corpora/{corpus}.{side}"
EXTRA_CORPUS_MANIFEST = EXTRA_CORPUS + ".manifest.json"
TOKENIZER_DIR = "data/{dataset}/tokenizer/{side}"
TOKENIZER = TOKENIZER_DIR + "/tokenizer_config.json"  # marks a trained WordPiece
# beside a trained WordPiece: what it was asked for (its vocabulary may come out smaller)
VOCABULARY_SUMMARY_NAME = "vocabulary_summary.json"
HF_CONFIG_NAME = "config.json"  # a Hugging Face checkpoint's: marks a complete one
CHECKPOINT_CONFIG = "{directory}/" + HF_CONFIG_NAME
PRETRAINED_ROOT = "data/pretrained"  # hub snapshots and the checkpoints pre-trained here
PRETRAINED_DIR = PRETRAINED_ROOT + "/{pretrained}"
PRETRAINED = CHECKPOINT_CONFIG.format(directory=PRETRAINED_DIR)
PRETRAIN_SUMMARY_NAME = "pretrain_summary.json"
PRETRAIN_SUMMARY = PRETRAINED_DIR + "/" + PRETRAIN_SUMMARY_NAME
TRIM_SUMMARY_NAME = "trim_summary.json"  # beside a trimmed checkpoint
# Every file a pre-training's and a WordPiece's rule declares, its marker first: a file of them
# deleted by hand is made again. Not the pre-training's summary: the command replaces a
# directory that holds it (an earlier output of its own), and Snakemake deletes a job's
# declared outputs before it runs (a GPT-2's generation_config.json would be left alone)
PRETRAINED_OUTPUTS = [PRETRAINED, *(f"{PRETRAINED_DIR}/{name}" for name in (
    "model.safetensors", "tokenizer.json", "tokenizer_config.json"))]
TOKENIZER_OUTPUTS = [TOKENIZER, TOKENIZER_DIR + "/tokenizer.json"]

# --- one training run ------------------------------------------------------------------------
RUNS = "results/runs"
RUN_SEEDS = RUNS + "/{dataset}/{run}"  # one directory per seed
RUN = RUN_SEEDS + "/seed{seed}"
# The names inside a run directory: code holding a run's directory joins these
RUN_CONFIG_NAME = "config.json"
TRAIN_SUMMARY_NAME = "train_summary.json"  # written last: the run is done
TRAIN_LOG_NAME = "train_log.jsonl"
CHECKPOINTS_NAME = "checkpoints"
TENSORBOARD_NAME = "tensorboard"  # the curves' event files (nmtbench.training.curves)
WANDB_NAME = "wandb"  # a W&B run's files, where the config's logging.wandb_project names one
CHECKPOINT_NAME = "{checkpoint}.pt"  # best, last
EPOCH_CHECKPOINT_NAME = "epoch{epoch}.pt"  # after each epoch, for averaging
# every save_interval_updates updates, where keep_interval_updates keeps any, for averaging
UPDATE_CHECKPOINT_NAME = "update{update}.pt"
RUN_CONFIG = RUN + "/" + RUN_CONFIG_NAME
TRAIN_SUMMARY = RUN + "/" + TRAIN_SUMMARY_NAME
TRAIN_LOG = RUN + "/" + TRAIN_LOG_NAME
CHECKPOINTS = RUN + "/" + CHECKPOINTS_NAME
CHECKPOINT = CHECKPOINTS + "/" + CHECKPOINT_NAME
TENSORBOARD = RUN + "/" + TENSORBOARD_NAME
WANDB = RUN + "/" + WANDB_NAME

# --- what is made of a run, per decoding setting {tag} ---------------------------------------
HYP = RUN + "/hyp.{split}.{tag}.txt"
DECODE_INFO = RUN + "/decode.{split}.{tag}.json"
METRICS = RUN + "/metrics.{split}.{tag}.json"
# a teacher's translations of the training set (sequence distillation), and their record
DISTILLED_TARGETS = RUN + "/distilled_targets.{tag}.txt"
DISTILLED_TARGETS_INFO = RUN + "/distilled_targets.{tag}.json"
# a teacher's (bert-kd-teacher run's) top-K soft targets of the training set, and their summary
SOFT_TARGETS = RUN + "/soft_targets.top{top_k}.safetensors"
SOFT_TARGETS_INFO = RUN + "/soft_targets.top{top_k}.json"
BACKTRANSLATE = RUN + "/backtranslate.{forward}.{sentences}.{tag}.txt"
BACKTRANSLATE_INFO = RUN + "/backtranslate.{forward}.{sentences}.{tag}.json"
LATENCY = RUN + "/latency.{tag}.json"
LATENCY_VS = RUN + "/latency.{tag}.vs.{baseline}.{btag}.json"  # with the baseline's run, tag
# the paired bootstrap of one score (metric_registry.BOOTSTRAP_SCORES) against another run
BOOTSTRAP = RUN + "/bootstrap.{split}.{tag}.{score}.vs.{baseline}.{btag}.json"
BUCKETS = RUN + "/buckets.{split}.{tag}.{cutoffs}.json"  # cutoffs joined by "-"

# --- the report ------------------------------------------------------------------------------
TABLES = "results/tables.md"
CLAIMS = "results/claims.md"  # every transcribed claim; tables.md shows the checked ones
TABLES_JSON = "results/tables.json"  # tables.md for programs (report/tables.schema.json)
FIGURE = "results/figures/{name}.{ext}"  # png, pdf
CURVES_FIGURE = "{table}.curves"  # the figure name of a requested table's validation curves


def fields(template: str) -> list[str]:
    """The template's field names, in order."""
    return [name for _, name, _, _ in Formatter().parse(template) if name]


def fill(template: str, **values: object) -> str:
    """The template with `values` formatted in and every other field left as a wildcard."""
    return template.format(**{name: f"{{{name}}}" for name in fields(template)} | values)


def run_file_pattern(template: str) -> str:
    """The glob pattern of a run file template's name in its run directory (a field
    matches anything): HYP's is `hyp.*.*.txt`."""
    return "".join(text + ("*" if name else "") for text, name, _, _
                   in Formatter().parse(template[len(RUN) + 1:]))


def run_entries() -> list[str]:
    """Glob patterns of what a run directory holds: the first name of every run file template
    here (a field matches anything). Anything else there is not a run's."""
    firsts = {value[len(RUN) + 1:].split("/")[0] for value in globals().values()
              if isinstance(value, str) and value.startswith(RUN + "/")}
    return sorted("".join(text + ("*" if name else "") for text, name, _, _
                          in Formatter().parse(first)) for first in firsts)
