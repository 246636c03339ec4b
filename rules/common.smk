# Config checking and every input function; the other rule files stay declarative.
import os
import re
import sys

from nmtbench.workflow import config as nmtconfig
from nmtbench import layout
from nmtbench.workflow.pretrained_names import checkpoint_dir
from nmtbench.errors import InputError
from nmtbench.workflow.metric_registry import BOOTSTRAP_SCORES
from nmtbench.workflow.plan import generated
from nmtbench.workflow import workdir_lock
from nmtbench.workflow.run_inputs import back_translation
from nmtbench.data.download import source_url
from nmtbench.data.recipes import DOWNLOADS_DIR, OPTIONAL_SPLITS, download_paths, optional_splits

try:
    PLAN = nmtconfig.check(
        config, f"{workflow.basedir}/config/schema.yaml", f"{workflow.basedir}/papers"
    )
except InputError as err:
    print(f"config error: {err}", file=sys.stderr)
    sys.exit(1)

# A finished run whose best.pt or last.pt (or a checksum file) was deleted by hand: its
# results were made from it, and no job makes it again (training is declared by its summary,
# and Snakemake deletes a job's declared outputs before the job, which a resume reads), so
# the workflow stops before planning, in -n too, with the advice that trains it again.
# So does a checkpoint a snapshot or trim made whose weights were deleted (its rule declares
# its config.json alone): the runs on it would be left out of the report for good; and one
# pre-trained here whose pretrain_summary.json was (the report's row of it reads it). Checked
# by the invocation that plans, not by each cluster job's own parse, which may run while
# another job writes or prunes a run's checkpoints.
from nmtbench.provenance import lost_checkpoint_line, lost_summary_line, lost_weights_line
from nmtbench.workflow.train_settings import kept_by_run


def kept_numbered(run_dir):
    """The epoch and update checkpoints a finished run keeps, by its records (an average
    reads them); none where a record cannot be read (the job that reads it names it)."""
    try:
        return [name for names in kept_by_run(run_dir).values() for name in names]
    except InputError:
        return []


if workflow.is_main_process:
    _snapshots_and_trims = sorted({name for dataset, run in PLAN.trained_runs()
                                for name in PLAN.checkpoints(dataset, run).values()
                                if name not in config.get("pretraining", {})})
    for _lost in (*(lost_checkpoint_line(os.path.dirname(summary),
                                         kept_numbered(os.path.dirname(summary)))
                    for summary in PLAN.trained_summaries()),
                  *(lost_weights_line(checkpoint_dir(name)) for name in _snapshots_and_trims
                    if checkpoint_dir(name).startswith(f"{layout.PRETRAINED_ROOT}/")),
                  *(lost_summary_line(layout.PRETRAINED_DIR.format(pretrained=name))
                    for name in PLAN.pretrained_targets())):
        if _lost:
            print(f"error: {_lost}", file=sys.stderr)
            sys.exit(1)

# logging.wandb_project reaches the train and pretrain jobs through their environment, not
# their commands: bookkeeping, naming a project reruns no job (nmtbench.training.curves)
from nmtbench.training.curves import WANDB_PROJECT_ENV

if (config.get("logging") or {}).get("wandb_project"):
    os.environ[WANDB_PROJECT_ENV] = config["logging"]["wandb_project"]
else:
    os.environ.pop(WANDB_PROJECT_ENV, None)



workdir_lock.lock_before_executing(workflow)  # --no-hooks skips onstart, not this


onstart:
    workdir_lock.hold()  # held already where Snakemake executes through the wrapper
    check_hub_at_start()  # a few requests; building every run's model takes longer
    check_builds_at_start()


def check_builds_at_start():
    """The model of every run this invocation trains, built from configs alone before the
    first job, so that a setting no model can take stops the workflow now, not when its job
    starts after the jobs before it (nmtbench.evaluation.params.check_builds). Torch is
    imported here, when the workflow starts; never while Snakemake plans it (snakemake -n).
    A run the DAG does not train is left to the invocation that does (a target of data
    alone builds no model)."""
    try:
        from nmtbench.evaluation.params import check_builds
    except ImportError as err:  # jobs may run in --use-conda environments the host lacks
        print(f"start-up check skipped ({err}); each run checks its settings when its job "
              "starts", file=sys.stderr)
        return
    try:
        built, left = check_builds(PLAN, trained_here())
    except InputError as err:
        print(f"config error: {err}", file=sys.stderr)
        sys.exit(1)
    if left:
        print(f"checked the models of {built} runs; {len(left)} are checked when their "
              f"checkpoints are there: {', '.join(left)}", file=sys.stderr)


def check_hub_at_start():
    """Every hub checkpoint this invocation snapshots is there with what a snapshot needs
    (its config.json, safetensors weights), asked of the hub before the first job, so that a
    missing one stops the workflow now, not after the jobs before its snapshot
    (nmtbench.parts.pretrained.check_on_hub)."""
    try:
        from nmtbench.parts.pretrained import check_on_hub
    except ImportError as err:  # jobs may run in --use-conda environments the host lacks
        print(f"hub check skipped ({err}); each snapshot job checks its checkpoint",
              file=sys.stderr)
        return
    try:
        jobs = workflow.dag.needrun_jobs()
    except AttributeError:
        return
    try:
        check_on_hub(sorted({job.wildcards_dict["pretrained"] for job in jobs
                             if job.rule.name == "snapshot"}))
    except InputError as err:
        print(f"config error: {err}", file=sys.stderr)
        sys.exit(1)


def trained_here():
    """The (dataset, run) pairs whose train jobs this invocation runs, from the DAG Snakemake
    has built when `onstart` is called; None (every run the plan trains) where it is not
    there to read."""
    try:
        jobs = workflow.dag.needrun_jobs()
    except AttributeError:
        return None
    return {(job.wildcards_dict["dataset"], job.wildcards_dict["run"]) for job in jobs
            if job.rule.name == "train"}


# The config's names (datasets, experiments = runs, pre-training names) match the schema's
# $defs.name, checked above; the wildcards take exactly that pattern, so no path a rule makes
# or reads holds "..", "/" or a shell character where a name goes. A rule that narrows one
# (to the datasets of a kind) lists checked names.
NAME = nmtconfig.name_pattern(f"{workflow.basedir}/config/schema.yaml")


wildcard_constraints:
    dataset=NAME,
    run=NAME,
    seed=r"\d+",
    side=r"src|tgt",
    split=r"valid|test|test-official",
    tag=r"[A-Za-z0-9-]+",
    baseline=NAME,
    btag=r"[A-Za-z0-9-]+",
    cutoffs=r"[0-9-]+",
    score="|".join(BOOTSTRAP_SCORES),
    forward=NAME,
    pretrained=rf"{NAME}(?:/{NAME})?",  # a hub name may start with its organisation


SPLITS = ["train", "valid", "test"]


def datasets_of_kind(*kinds):
    return [d for d, spec in config["datasets"].items() if spec["kind"] in kinds]


def real_datasets():
    return [d for d, spec in config["datasets"].items()
            if spec["kind"] not in ("toyworld", "reversed")]


# Every set of optional splits a dataset may make (none, or one of them); rules/data.smk has a
# generating rule per set
OPTIONAL_SPLIT_SETS = [[], *([split] for split in OPTIONAL_SPLITS)]


def with_optional_splits(names, splits):
    """Those of the datasets `names` that make exactly the optional `splits` (a rule per set
    of splits declares their files)."""
    return [d for d in names if optional_splits(d, config["datasets"]) == list(splits)]


def datasets_either(names):
    """A wildcard constraint matching exactly these dataset names (or nothing): configured
    names, so each matches NAME too."""
    return "|".join(re.escape(d) for d in names) or "^$"


def monolingual_corpora(dataset, side):
    """The text a checkpoint pre-trained here reads: a toy world's monolingual corpus of a
    side, or of both (joint); real data has none of its own, so its training side(s)."""
    sides = ("src", "tgt") if side == "joint" else (side,)
    part = "mono" if generated(config["datasets"], dataset) else "train"
    return [prepared(dataset, f"{part}.{s}") for s in sides]


def extra_corpora(spec):
    """The extra text a `pretraining` entry reads for training (its `extra_corpora`), each
    corpus in the language of each of its sides."""
    sides = ("src", "tgt") if spec["side"] == "joint" else (spec["side"],)
    return [layout.EXTRA_CORPUS.format(dataset=spec["dataset"], corpus=corpus, side=side)
            for corpus in spec.get("extra_corpora", []) for side in sides]


def side_corpora(dataset, side):
    """The training side, plus the monolingual corpus where the dataset has one (toy world)."""
    corpora = [prepared(dataset, f"train.{side}")]
    if generated(config["datasets"], dataset):
        corpora.insert(0, prepared(dataset, f"mono.{side}"))
    return corpora


def tokenizer_corpora(wildcards):
    """A side's corpora; a joint vocabulary's are both sides'."""
    sides = ("src", "tgt") if wildcards.side == "joint" else (wildcards.side,)
    return [corpus for side in sides for corpus in side_corpora(wildcards.dataset, side)]


def reversed_input(wildcards):
    """The file of the reversed dataset's original that holds this side."""
    other = {"src": "tgt", "tgt": "src"}[wildcards.side]
    return prepared(dataset_spec(wildcards)["of"], f"{wildcards.part}.{other}")


def monolingual_datasets():
    """Real datasets whose back-translation reads a prepared monolingual corpus."""
    return [d for d in real_datasets() if "corpus" in config["datasets"][d].get(
        "back_translation", {})]


def monolingual_inputs(wildcards):
    from nmtbench.data.monolingual import download_paths

    spec = dataset_spec(wildcards)
    return download_paths(spec["back_translation"]["corpus"], spec["tgt_lang"])


def extra_corpus_inputs(wildcards):
    from nmtbench.data.monolingual import download_paths

    return download_paths(wildcards.corpus, dataset_spec(wildcards)[f"{wildcards.side}_lang"])


# Functions giving a job's options return them as a list of arguments: the rule's shell
# quotes each one (`{params.x:q}`), as it quotes every other value.


def download_checksum_arguments(source, file):
    """`--sha256 X` / `--md5 Y` for the file's pinned checksums (none: the download logs it)."""
    entry = config["sources"][source]["files"][file]
    return [arg for kind in ("sha256", "md5") if entry.get(kind)
            for arg in (f"--{kind}", entry[kind])]


def flag(option, on):
    """[option] when `on`, else no argument."""
    return [option] if on else []


def prepare_inputs(wildcards):
    """The downloaded files the dataset's recipe reads."""
    return download_paths(wildcards.dataset, config["datasets"][wildcards.dataset])


def dataset_spec(wildcards):
    return config["datasets"][wildcards.dataset]


def prepared(dataset, file):
    return layout.PREPARED.format(dataset=dataset, file=file)


def run_tokenizer(dataset, run, side):
    """A run's tokenizer of a side (Plan.vocabulary): a checkpoint's, or one trained on the
    data (the side's, or both sides' for `vocabulary: joint`)."""
    name, tokenizer_side = PLAN.vocabulary(dataset, run, side)
    if name is None:
        return layout.TOKENIZER.format(dataset=dataset, side=tokenizer_side)
    return checkpoint_marker(name)


def checkpoint_marker(name):
    """The file that marks a pre-trained checkpoint's directory as complete."""
    return layout.CHECKPOINT_CONFIG.format(
        directory=checkpoint_dir(name, config.get("pretraining"))
    )


def pretraining_spec(wildcards):
    return config["pretraining"][wildcards.pretrained]


def trimmed_spec(wildcards):
    return config["trimmed"][wildcards.pretrained]


def pretrained_outputs():
    """Every file of the checkpoints pre-trained in the DAG (the rule declares them all)."""
    return [path.format(pretrained=name) for name in PLAN.pretrained_targets()
            for path in layout.PRETRAINED_OUTPUTS]


def final_outputs():
    """The final targets: the report and what it reads, and every run's training and
    vocabularies (a summary or tokenizer deleted by hand is made again)."""
    vocabularies = [(dataset, PLAN.vocabulary(dataset, run, side))
                    for dataset, run in PLAN.trained_runs() for side in ("src", "tgt")]
    tokenizers = {(dataset, side) for dataset, (checkpoint, side) in vocabularies
                  if checkpoint is None}  # trained on the data (run_tokenizer)
    summaries = PLAN.trained_summaries()
    return [*PLAN.targets(), *pretrained_outputs(), *summaries,
            *[os.path.join(os.path.dirname(s), layout.RUN_CONFIG_NAME) for s in summaries],
            *[path.format(dataset=dataset, side=side) for dataset, side in sorted(tokenizers)
              for path in layout.TOKENIZER_OUTPUTS],
            layout.TABLES, layout.CLAIMS, layout.TABLES_JSON, *PLAN.figure_outputs()]


def train_inputs(wildcards):
    """Data, tokenizers and checkpoints (a BERT reads its side in its own vocabulary), and
    the run inputs: other runs' outputs the run trains with (Plan.run_inputs), each named
    `input_<name>`, on the file the DAG waits for."""
    d = wildcards.dataset
    checkpoints = PLAN.checkpoints(d, wildcards.run)
    inputs = {
        **{f"{split}_{side}": prepared(d, f"{split}.{side}")
           for split in ("train", "valid") for side in ("src", "tgt")},
        **{f"{side}_tokenizer": run_tokenizer(d, wildcards.run, side)
           for side in ("src", "tgt")},
        **{f"pretrained_{role}": checkpoint_marker(name) for role, name in checkpoints.items()},
    }
    for name, run_input in PLAN.run_inputs(d, wildcards.run).items():
        inputs[f"input_{name}"] = run_input.needs(wildcards.seed)
    return inputs


def run_paths(wildcards):
    """Every file the run reads (Plan.run_paths): what its command passes, and what its
    config.json will record."""
    return PLAN.run_paths(wildcards.dataset, wildcards.run, wildcards.seed)


def run_input_arguments(wildcards):
    """`--input NAME=PATH` for every run input."""
    return [arg for name, path in run_paths(wildcards)["inputs"].items()
            for arg in ("--input", f"{name}={path}")]


def pretrained_arguments(wildcards, input):
    """`--pretrained role=DIR` for every checkpoint the run loads."""
    return [arg for role, path in run_paths(wildcards)["pretrained"].items()
            for arg in ("--pretrained", f"{role}={path}")]


def train_launcher(wildcards, resources):
    """`torchrun` with one process per GPU when the job has more than one, else one process."""
    gpus = int(resources.gpu)
    if gpus > 1:
        return ["torchrun", "--standalone", "--nproc-per-node", str(gpus), "-m", "nmtbench"]
    return ["python", "-m", "nmtbench"]


def experiment_json(wildcards):
    return nmtconfig.as_json(
        PLAN.run_settings(wildcards.dataset, wildcards.run, int(wildcards.seed))
    )


def search_arguments(wildcards):
    """The decode/latency command's options for the decoding settings `tag` stands for."""
    return PLAN.decode_for_tag(wildcards.tag).arguments()


def baseline_latency_arguments(wildcards, input):
    """The baseline run timed in the same job, with its own decoding settings."""
    settings = nmtconfig.as_json(PLAN.decode_for_tag(wildcards.btag).as_dict())
    return ["--baseline-run-dir", os.path.dirname(input.baseline), "--baseline-decode", settings]


def resource(rule, key):
    return config["resources"][rule][key]
