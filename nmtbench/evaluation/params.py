"""Parameter counts from configs alone: the model an experiment builds on a dataset, with
random weights and no download (checkpoint architectures come from `nmtbench.parts.pretrained`)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path

import torch
from transformers import PretrainedConfig

from nmtbench import layout
from nmtbench.data.tokenization import Vocab, load_tokenizer, vocab_of
from nmtbench.errors import InputError
from nmtbench.methods import get_method
from nmtbench.parts.contract import Model
from nmtbench.parts.pretrained import UnknownArchitecture, architecture, model_config
from nmtbench.workflow.config import pretrain_settings
from nmtbench.workflow.plan import Plan
from nmtbench.workflow.pretrain_settings import PretrainConfig
from nmtbench.workflow.pretrained_names import checkpoint_dir
from nmtbench.workflow.run_inputs.parent_weights import ParentWeights


def side_vocab(plan: Plan, dataset: str, side: str,
               checkpoint: str | PretrainedConfig | None = None) -> Vocab:
    """A side's vocabulary ("src", "tgt", or "joint", both sides'): the checkpoint's (given, or
    the dataset's for that side), else the WordPiece trained for the dataset when it is on
    disk whole, else its configured size."""
    spec = plan.config["datasets"][dataset]
    checkpoint = checkpoint or spec.get("checkpoints", {}).get(side)  # "joint" has none
    if checkpoint is not None:
        return Vocab(size=model_config(checkpoint).vocab_size, pad=0, bos=1, eos=2, unk=3,
                     mask=4)
    if all(Path(path.format(dataset=dataset, side=side)).is_file()
           for path in layout.TOKENIZER_OUTPUTS):  # whole: else the workflow makes it again
        return vocab_of(load_tokenizer(layout.TOKENIZER_DIR.format(dataset=dataset, side=side)))
    return Vocab(size=spec["vocab_size"][side], pad=0, bos=1, eos=2, unk=3, mask=4)


def checkpoint_architecture(plan: Plan, name: str) -> str | PretrainedConfig:
    """A checkpoint's directory when it exists, else the name (hub architectures are known),
    else, for one the config pre-trains or trims, the architecture that will build."""
    pretraining = plan.config.get("pretraining", {})
    directory = checkpoint_dir(name, pretraining)
    trimmed = plan.config.get("trimmed", {})
    if name in trimmed and not (Path(directory) / layout.HF_CONFIG_NAME).is_file():
        original = model_config(checkpoint_architecture(plan, trimmed[name]["checkpoint"]))
        return original.__class__(**{**original.to_dict(), "vocab_size": trimmed[name]["size"]})
    if (Path(directory) / layout.HF_CONFIG_NAME).is_file() or name not in pretraining:
        return directory if Path(directory).is_dir() else name
    spec = pretraining[name]
    return architecture(PretrainConfig.from_dict(pretrain_settings(spec)),
                        side_vocab(plan, spec["dataset"], spec["side"]))


def build_model(plan: Plan, dataset: str, experiment: str) -> Model:
    """`experiment`'s model as the plan resolves it on `dataset` (a configured dataset, or a
    paper dataset the config maps onto one), with random weights throughout."""
    dataset = plan.dataset(dataset, "--dataset")
    settings = plan.train_settings(dataset, experiment)
    pretrained = {role: checkpoint_architecture(plan, name)
                  for role, name in plan.checkpoints(dataset, experiment).items()}
    def vocab(side: str) -> Vocab:  # as the workflow's train inputs choose it
        name, tokenizer_side = plan.vocabulary(dataset, experiment, side)
        return side_vocab(plan, dataset, tokenizer_side,
                          None if name is None else checkpoint_architecture(plan, name))

    src_vocab, tgt_vocab = vocab("src"), vocab("tgt")
    return get_method(settings["method"]).build(settings, src_vocab, tgt_vocab, pretrained,
                                                weights=False)


def count_parameters(plan: Plan, dataset: str, experiment: str) -> dict[str, int]:
    """{"total": N, "trained": N} of `experiment` on `dataset` (see `build_model`). Built on
    torch's meta device: shapes without storage, so counting AB-Net's 284M parameters takes
    a tenth of a second and no memory (9 s and 1 GB with real tensors; the counts are the
    same)."""
    with torch.device("meta"):
        return build_model(plan, dataset, experiment).num_params()


def check_builds(plan: Plan, only: Collection[tuple[str, str]] | None = None,
                 ) -> tuple[int, list[str]]:
    """Build every run the plan trains (those of `only`, (dataset, run) pairs, where given)
    from configs alone (random weights on the meta device: no storage, no download), so that
    a setting no model can be built with (a shape, a group size that does not divide the
    pre-trained model's layers, a rate schedule out of order...) is one line naming the run
    before any job starts, not when its job does; and warm-start each from the runs whose
    weights it loads (`check_warm_start`), and check the decodings of each against its
    sizes (`DecodeSettings.refusal`). A run on a checkpoint whose architecture is
    unknown until it is downloaded is left to its job. Returns how many runs built, and the
    runs left."""
    models: dict[tuple[str, str], Model] = {}

    def model(dataset: str, run: str) -> Model:
        if (dataset, run) not in models:
            try:
                models[dataset, run] = build_model(plan, dataset, run)
            except InputError as err:
                if isinstance(err, UnknownArchitecture):
                    raise
                raise InputError(f"run {dataset}/{run}: {err}") from None
        return models[dataset, run]

    built, left = 0, []
    with torch.device("meta"):
        for dataset, run in plan.trained_runs():
            if only is not None and (dataset, run) not in only:
                continue
            try:
                check_warm_start(plan, dataset, run, model)
            except UnknownArchitecture:
                left.append(f"{dataset}/{run}")
                continue
            built += 1
        for cell in dict.fromkeys(c for c in plan.cells() if (c.dataset, c.run) in models
                                  and c.tag is not None):
            built_model = models[cell.dataset, cell.run]
            if refusal := plan.decode_for_tag(cell.tag).refusal(
                    built_model.tgt_vocab.size, getattr(built_model, "max_length", None)):
                raise InputError(f"run {cell.dataset}/{cell.run} ({cell.experiment}): {refusal}")
    return built, left


def check_warm_start(plan: Plan, dataset: str, run: str,
                     model: Callable[[str, str], Model]) -> None:
    """The run's model (`model(dataset, run)`, on the meta device) loads the weights each run
    it warm-starts from (`init_from`, `features_from`) would save, as training will: every
    key it takes has the child's shape and some key fits, and each side whose weights it
    takes reads the parent's vocabulary (where the plan can tell: a vocabulary trained on the
    data or pre-trained from it; two hub checkpoints of different names are compared by the
    trainer, once downloaded). One line naming both runs."""
    child = model(dataset, run)
    method = get_method(plan.train_settings(dataset, run)["method"])
    for given in ParentWeights().resolve(plan, dataset, run):
        parent_name = f"{given.cell.dataset}/{given.cell.run}"
        where = f"run {dataset}/{run}, {given.name} {parent_name}"
        parent = model(given.cell.dataset, str(given.cell.run))
        take, into = method.parent_runs[given.name]
        try:
            loaded = child.warm_start(parent.checkpoint_state(), given.name, take, into)
        except InputError as err:
            raise InputError(f"{where}: {str(err).removeprefix(given.name + ': ')}") from None
        for side in sorted(loaded.sides):
            ours = vocabulary_identity(plan, dataset, run, side)
            theirs = vocabulary_identity(plan, given.cell.dataset, str(given.cell.run), side)
            if ours != theirs and not (ours[0] == theirs[0] == "checkpoint"):
                raise InputError(f"{where}: the {side} side reads {ours[1]}'s vocabulary, "
                                 f"{parent_name} read {theirs[1]}'s; warm-start from a run "
                                 "of the same vocabulary")


def vocabulary_identity(plan: Plan, dataset: str, run: str, side: str) -> tuple[str, str]:
    """What a run's vocabulary of `side` is made from: ("data", the dataset's tokenizer)
    for one trained on a dataset, the pre-trainings in the DAG included (they keep the
    tokenizer of the text they read), else ("checkpoint", its name)."""
    name, tokenizer_side = plan.vocabulary(dataset, run, side)
    spec = plan.config.get("pretraining", {}).get(name) if name else None
    if spec is not None:
        dataset, tokenizer_side, name = spec["dataset"], spec["side"], None
    if name is None:
        return "data", layout.TOKENIZER_DIR.format(dataset=dataset, side=tokenizer_side)
    return "checkpoint", name
