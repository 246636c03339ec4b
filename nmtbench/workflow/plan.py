"""From the requested tables and figures to the files that fill them: the workflow's plan.

A table cell names (paper dataset, experiment, split, metric). The config maps the paper's
dataset onto a prepared one (`dataset_map`; the embedded default maps every paper dataset onto
the toy world) and may adapt experiments per dataset (`datasets.<d>.overrides`, keyed by
method: the toy world shrinks every Transformer to `tiny`). Two consequences keep the plan small:

- A training run is identified by what it trains. Experiments whose resolved training settings
  are equal on a dataset share one run directory, named after the plainest experiment (fewest
  settings of its own) that asks for those settings itself, i.e. the dataset's overrides change
  none of the settings it names (`transformer-base`, not `bertkd-transformer-base`); the report
  says which cells share a run.
- Decoding is identified by its settings (`DecodeSettings.tag`), so experiments that differ
  only in beam or length penalty decode the same trained model twice instead of training it
  twice.

A run may train with other runs' outputs (`RunInput`): a teacher's translations (`seq_kd`),
a reverse model's back-translations (`bt_sentences`), another run's checkpoint (`init_from`,
`features_from`).

Cells whose method is not implemented (or is `external`, quoted by the paper from other work)
need no files; the report shows them as such.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from nmtbench import layout
from nmtbench.data.recipes import OPTIONAL_SPLITS, optional_splits
from nmtbench.data.toyworld import size_key
from nmtbench.errors import InputError
from nmtbench.workflow.decode_settings import DecodeSettings
from nmtbench.workflow.method_registry import MethodInfo
from nmtbench.workflow.metric_registry import METRICS
from nmtbench.workflow.papers import Catalogue, Claim, Column, Figure, Table

EXTERNAL = "external"
NOT_IMPLEMENTED = "not implemented"
# Settings that describe an experiment but do not change its training.
NOT_TRAINING = {"description", "decode"}
# Setting values the papers use that no code serves yet (None: any value but false/null): an
# experiment using one is not implemented. `back_translation: true`: trained with a published
# back-translated corpus, e.g. Caswell et al.'s 24M WMT14 pairs (back-translating in the DAG is
# `bt_sentences`).
SETTINGS_NOT_BUILT: dict[str, set[Any] | None] = {
    "back_translation": None,
    # deep fusion's GPT (Table 5): the authors' own, pre-trained on 216M WMT sentences
    "decoder_init": {"gpt"},
}


def not_built(spec: dict[str, Any]) -> bool:
    """Whether an experiment uses a setting value no code serves yet."""
    return any(spec.get(key) and (values is None or spec[key] in values)
               for key, values in SETTINGS_NOT_BUILT.items())


@dataclass(frozen=True)
class Cell:
    """Where one (row, column) of a table or one point/series of a figure comes from."""

    dataset: str  # the configured dataset the paper's dataset maps to
    experiment: str  # as the paper names it
    status: str  # "ok", NOT_IMPLEMENTED or EXTERNAL
    run: str | None = None  # the training run's name (shared between identical experiments)
    tag: str | None = None  # the decoding settings

    def file(self, template: str, seed: int | str, **values: Any) -> str:
        """A layout template of this cell's run and decoding, for one seed."""
        return template.format(dataset=self.dataset, run=self.run, seed=seed, tag=self.tag,
                               **values)

    def run_dir(self, seed: int | str) -> str:
        return self.file(layout.RUN, seed)


@dataclass(frozen=True)
class BackTranslation:
    """Where a run's back-translated pairs come from (Sennrich et al. 2016): the reverse-
    direction model `reverse` translates the first `sentences` lines of the dataset's
    target-side monolingual corpus (`mono.tgt`) into synthetic sources. One translation per
    dataset, as long as its largest `bt_sentences`: every run takes its own first lines."""

    reverse: Cell
    sentences: int

    def file(self, dataset: str, seed: int | str) -> str:
        return self.reverse.file(layout.BACKTRANSLATE, seed, forward=dataset,
                                 sentences=self.sentences)


@dataclass(frozen=True)
class RunInput:
    """A file a run trains with that another run (or the data) provides, passed to the
    trainer as `--input NAME=PATH` (nmtbench/training/trainer.py says what it does with each name).

    `template` is formatted with the providing run's cell, the seed and `values`; the DAG
    waits for `dependency` (same formatting), or for the file itself when a rule makes it (a
    checkpoint is no rule's output: its run's train_summary.json is). A new input (e.g. a
    teacher's soft targets) is one more RunInput in `Plan.run_inputs` plus the rule that
    writes its file."""

    name: str
    cell: Cell | None  # the run providing it; None: data (`template` is then a plain path)
    template: str
    dependency: str | None = None
    values: dict[str, Any] = field(default_factory=dict)
    seed_offset: int = 0  # the providing run's seed is the run's own plus this

    def path(self, seed: int | str) -> str:
        return self._format(self.template, seed)

    def needs(self, seed: int | str) -> str:
        """The file the DAG waits for before the run trains."""
        return self._format(self.dependency or self.template, seed)

    def _format(self, template: str, seed: int | str) -> str:
        if self.cell is None:
            return template
        return self.cell.file(template, int(seed) + self.seed_offset if self.seed_offset
                              else seed, **self.values)


def generated(datasets: dict[str, Any], name: str) -> bool:
    """Is the dataset a toy world, or one read the other way round? (It then has monolingual
    text of its own on both sides.)"""
    spec = datasets[name]
    return "toyworld" in (spec["kind"], datasets.get(spec.get("of"), {}).get("kind"))


class Plan:
    """The requested tables/figures of one config, resolved against the paper catalogue."""

    def __init__(self, config: dict[str, Any], catalogue: Catalogue,
                 implemented: dict[str, MethodInfo]) -> None:
        """`implemented`: each implemented method, as config/schema.yaml describes it."""
        self.config = config
        self.catalogue = catalogue
        self.implemented = implemented
        self.experiments = _merge_experiments(catalogue.experiments,
                                              config.get("experiments", {}))
        self.seeds: list[int] = [int(s) for s in config["seeds"]]

    # --- what was asked ----------------------------------------------------------------------
    @cached_property
    def names(self) -> list[str]:
        asked = self.config["tables"]
        known = self.catalogue.names()
        if asked == ["all"]:
            return known
        for name in asked:
            if name not in known:
                raise InputError(f"config key 'tables': unknown table or figure {name!r}; "
                                 f"known: {', '.join(known)}")
        return list(dict.fromkeys(asked))

    @property
    def tables(self) -> list[Table]:
        return [self.catalogue.tables[n] for n in self.names if n in self.catalogue.tables]

    @property
    def claims(self) -> list[Claim]:
        """The claims about the requested tables."""
        requested = {table.name for table in self.tables}
        return [c for c in self.catalogue.claims if c.table in requested]

    @property
    def figures(self) -> list[Figure]:
        return [self.catalogue.figures[n] for n in self.names if n in self.catalogue.figures]

    # --- resolution --------------------------------------------------------------------------
    def dataset(self, paper_dataset: str, where: str) -> str:
        """The configured dataset that stands for the paper's one."""
        name = self.config.get("dataset_map", {}).get(paper_dataset, paper_dataset)
        if name not in self.config["datasets"]:
            raise InputError(f"{where}: dataset {paper_dataset!r} is not configured (add it "
                             "under 'datasets' or map it under 'dataset_map')")
        return name

    def comparable(self, paper_dataset: str, dataset: str) -> bool:
        """Is our number measured on the paper's data (so a difference means something)?"""
        return (dataset == paper_dataset
                and self.config["datasets"][dataset]["kind"] != "toyworld")

    def status(self, experiment: str, dataset: str | None = None) -> str:
        """"ok", NOT_IMPLEMENTED or EXTERNAL; on a dataset, as its overrides leave the
        experiment (the toy world's GPT-2 stands in for a GPT no code can build), and a
        dataset made with a published back-translated corpus (`backtranslation: true`) gives
        `back_translation: true` what it asks for."""
        spec = self.experiments[experiment]
        if spec["method"] == EXTERNAL:
            return EXTERNAL
        if dataset is not None:
            spec = {**spec, **self.overrides(dataset, experiment)}
            if self.config["datasets"][dataset].get("backtranslation"):
                spec["back_translation"] = False  # the dataset holds the published corpus
        if spec["method"] not in self.implemented or not_built(spec):
            return NOT_IMPLEMENTED
        return "ok"

    def overrides(self, dataset: str, experiment: str) -> dict[str, Any]:
        """The dataset's overrides for the experiment: those for its method, then those for
        the experiment by name (`decode` merged key by key)."""
        table = self.config["datasets"][dataset].get("overrides", {})
        method, named = table.get(self.experiments[experiment]["method"], {}), \
            table.get(experiment, {})
        decode = {**method.get("decode", {}), **named.get("decode", {})}
        return {**method, **named, **({"decode": decode} if decode else {})}

    def checkpoint_roles(self, experiment: str) -> dict[str, str]:
        """The settings of the experiment's method naming a pre-trained checkpoint (`src_bert`)
        -> the side whose dataset checkpoint fills them."""
        info = self.implemented.get(self.experiments[experiment]["method"])
        return info.checkpoint_roles if info is not None else {}

    def train_settings(self, dataset: str, experiment: str, seed: int | None = None,
                       with_overrides: bool = True) -> dict[str, Any]:
        """defaults <- the dataset's checkpoints <- experiment <- the dataset's overrides for
        its method and for it (<- seed). The dataset's checkpoint of a side fills a checkpoint
        role of the method (`src_bert`, `tgt_bert`) that the experiment leaves open."""
        spec = self.experiments[experiment]
        settings = dict(self.config["defaults"])
        roles = self.checkpoint_roles(experiment)
        checkpoints = self.config["datasets"][dataset].get("checkpoints", {})
        settings.update({role: checkpoints[side] for role, side in roles.items()
                         if side in checkpoints})
        settings.update({k: v for k, v in spec.items() if k not in NOT_TRAINING})
        if with_overrides:  # `decode` is decode_settings' part
            settings.update({k: v for k, v in self.overrides(dataset, experiment).items()
                             if k not in NOT_TRAINING})
            settings.update(self._mapped_size(dataset, experiment, settings))
            # an experiment's `tgt_bert: null` means no such checkpoint: nothing fills it
            settings.update({role: None for role in roles if role in spec and spec[role] is None})
        if seed is not None:
            settings["seed"] = seed
        return settings

    def _mapped_size(self, dataset: str, experiment: str,
                     settings: dict[str, Any]) -> dict[str, str]:
        """The dataset's `sizes` counterpart of the experiment's model size (`base` when it
        names none), for a method with sizes: the toy world's sizes keep the papers' order."""
        sizes = self.config["datasets"][dataset].get("sizes", {})
        info = self.implemented.get(self.experiments[experiment]["method"])
        if not sizes or info is None or "size" not in info.keys:
            return {}
        size = settings.get("size", "base")
        return {"size": sizes[size]} if size in sizes else {}

    def run_settings(self, dataset: str, run: str, seed: int) -> dict[str, Any]:
        """What the run `run` trains with: its settings, logging valid BLEU when the config
        asks for it everywhere or a curve figure of any paper draws an experiment it trains
        (fixed by the catalogue, so asking for another table never retrains a run)."""
        settings = self.train_settings(dataset, run, seed)
        drawn = {e for f in self.catalogue.figures.values() if f.kind == "curve"
                 for e in f.experiments()}
        settings["valid_bleu"] = bool(settings.get("valid_bleu")) or any(
            e in drawn for e in self.sharing(dataset, run))
        return settings

    def vocabulary(self, dataset: str, experiment: str, side: str) -> tuple[str | None, str]:
        """Where the experiment's vocabulary of `side` (src, tgt) comes from: (a checkpoint
        whose WordPiece it reads, or None for the dataset's trained one; the tokenizer's
        side: src, tgt or joint). A checkpoint the method loads reads its side in its own
        vocabulary; `vocabulary: joint` reads both sides in the dataset's joint one (its
        `checkpoints.joint`, else trained on both sides), `vocabulary: NAME` in the
        checkpoint NAME's (a BERT-KD student in its teacher's)."""
        settings = self.train_settings(dataset, experiment)
        chosen = settings.get("vocabulary", "sides")
        if chosen not in ("sides", "joint"):
            return chosen, "joint"
        for role, role_side in self.checkpoint_roles(experiment).items():
            if settings.get(role) and role_side in (side, "joint"):
                return settings[role], role_side
        dataset_side = "joint" if chosen == "joint" else side
        return (self.config["datasets"][dataset].get("checkpoints", {}).get(dataset_side),
                dataset_side)

    def checkpoints(self, dataset: str, run: str) -> dict[str, str]:
        """The pre-trained checkpoints a run loads: role (`src_bert`) -> name."""
        settings = self.train_settings(dataset, run)
        return {role: settings[role] for role in self.checkpoint_roles(run) if settings.get(role)}

    def _cells(self) -> list[Cell]:
        return ([cell for table in self.tables for _, _, cell in self.table_cells(table)]
                + [cell for figure in self.figures for cell in self.figure_cells(figure)])

    def runs(self) -> list[tuple[str, str]]:
        """The (dataset, run) pairs the requested tables and figures train."""
        return sorted({(c.dataset, c.run) for c in self._cells() if c.run is not None})

    def pretrained_targets(self) -> list[str]:
        """The names of the checkpoints pre-trained in the DAG that the requested items' runs
        load (the report shows how well they learned)."""
        pretraining = self.config.get("pretraining", {})
        runs = set(self.runs())
        todo = list(runs)
        while todo:  # and the runs they train with (a teacher, a warm start's parent)
            dataset, run = todo.pop()
            for run_input in self.run_inputs(dataset, run).values():
                cell = run_input.cell
                if cell is not None and (cell.dataset, cell.run) not in runs:
                    runs.add((cell.dataset, cell.run))
                    todo.append((cell.dataset, cell.run))
        return sorted({name for dataset, run in runs
                       for name in [*self.checkpoints(dataset, run).values(),
                                    *(self.vocabulary(dataset, run, side)[0]
                                      for side in ("src", "tgt"))]
                       if name in pretraining})

    def decode_settings(self, dataset: str, experiment: str) -> DecodeSettings:
        """The config's `decode`, then the experiment's, then the dataset's overrides'."""
        spec = self.experiments[experiment]
        return DecodeSettings.from_dict({
            **self.config.get("decode", {}), **spec.get("decode", {}),
            **self.overrides(dataset, experiment).get("decode", {}),
            "decoding": self.decoding(dataset, experiment)})

    def decoding(self, dataset: str, experiment: str) -> str:
        """`nat` (mask-predict) or `at` (beam search), as the experiment trains its model
        (unset: its method's first decoding)."""
        info = self.implemented.get(self.experiments[experiment]["method"])
        default = info.decodings[0] if info is not None else "at"
        return self.train_settings(dataset, experiment).get("decoding", default)

    def distillation(self, dataset: str, experiment: str) -> Cell | None:
        """The teacher whose translations of the training set replace its targets, for a
        non-autoregressive experiment on a dataset with `seq_kd` (sequence-level KD)."""
        teacher = self.config["datasets"][dataset].get("seq_kd")
        if teacher is None or self.decoding(dataset, experiment) != "nat":
            return None
        return self.run_cell(dataset, teacher, f"config key 'datasets.{dataset}.seq_kd'")

    def back_translation(self, dataset: str, experiment: str) -> BackTranslation | None:
        """The back-translated pairs an experiment with `bt_sentences` adds to its training
        data, from the dataset's `back_translation` (reverse dataset and model)."""
        wanted = self.train_settings(dataset, experiment).get("bt_sentences", 0)
        if not wanted:
            return None
        spec = self.config["datasets"][dataset].get("back_translation")
        if spec is None:
            raise InputError(f"experiment {experiment!r} on dataset {dataset!r} adds {wanted} "
                             "back-translated sentences (bt_sentences), but config key "
                             f"'datasets.{dataset}.back_translation' is not set")
        reverse = self.run_cell(spec["reverse"], spec["model"],
                                f"config key 'datasets.{dataset}.back_translation'")
        return BackTranslation(reverse, self.back_translated_sentences(dataset))

    def target_monolingual(self, dataset: str) -> str:
        """The target-side monolingual text a dataset back-translates: a toy world's own (also
        read backwards), or the corpus prepared for a real dataset (beside `prepared/`, which
        `prepare` replaces as a whole)."""
        if generated(self.config["datasets"], dataset):
            return layout.PREPARED.format(dataset=dataset, file="mono.tgt")
        return layout.MONOLINGUAL.format(dataset=dataset)

    def parent_runs(self, dataset: str, experiment: str) -> dict[str, tuple[Cell, dict]]:
        """The runs whose checkpoints the experiment loads (`init_from`, and the method's other
        settings marked `x-parent-run`), by setting: each that experiment's run on the same
        dataset, and its spec (checkpoint best or last, seed_offset)."""
        settings = self.train_settings(dataset, experiment)
        info = self.implemented[self.experiments[experiment]["method"]]
        return {key: (self.run_cell(dataset, settings[key]["experiment"],
                                    f"experiment {experiment!r}, setting {key!r}"), settings[key])
                for key in info.parent_runs if settings.get(key)}

    def run_inputs(self, dataset: str, experiment: str) -> dict[str, RunInput]:
        """What the experiment's run trains with from other runs (and their data), by the
        name the trainer knows it by."""
        inputs = []
        teacher = self.distillation(dataset, experiment)
        if teacher is not None:  # its translations replace the training targets
            inputs.append(RunInput("train_tgt", teacher, layout.DISTILL))
        back_translation = self.back_translation(dataset, experiment)
        if back_translation is not None:
            inputs += [RunInput("bt_src", back_translation.reverse, layout.BACKTRANSLATE,
                                values={"forward": dataset,
                                        "sentences": back_translation.sentences}),
                       RunInput("bt_tgt", None, self.target_monolingual(dataset))]
        settings = self.train_settings(dataset, experiment)
        for key in self.implemented[self.experiments[experiment]["method"]].teachers:
            if settings.get(key):  # the teacher's top-K soft targets of the training set
                teacher = self.run_cell(dataset, settings[key]["experiment"],
                                        f"experiment {experiment!r}, setting {key!r}")
                inputs.append(RunInput("soft_targets", teacher, layout.SOFT_TARGETS,
                                       values={"top_k": settings.get("top_k", 8)}))
        for key, (cell, spec) in self.parent_runs(dataset, experiment).items():
            inputs.append(RunInput(key, cell, layout.CHECKPOINT, layout.TRAIN_SUMMARY,
                                   {"checkpoint": spec.get("checkpoint", "best")},
                                   spec.get("seed_offset", 0)))
        return {i.name: i for i in inputs}

    def back_translated_sentences(self, dataset: str) -> int:
        """The largest `bt_sentences` of any implemented experiment on the dataset (fixed by
        the catalogue, so asking for another table never re-translates)."""
        return max(self.train_settings(dataset, e).get("bt_sentences", 0)
                   for e in self.experiments if self.status(e, dataset) == "ok")

    @cached_property
    def _run_names(self) -> dict[tuple[str, str], str]:
        """(dataset, experiment) -> the run directory name, for every implemented experiment."""
        names = {}
        for dataset in self.config["datasets"]:
            groups: dict[str, list[str]] = {}
            for experiment in self.experiments:
                if self.status(experiment, dataset) == "ok":
                    key = _canonical(self.train_settings(dataset, experiment))
                    groups.setdefault(key, []).append(experiment)
            for members in groups.values():
                literal = [e for e in members if self._asks_for_itself(dataset, e)]
                # the plainest experiment (fewest settings of its own) names the run
                run = min(literal or members, key=lambda e: (len(self.experiments[e]), e))
                names.update({(dataset, e): run for e in members})
        return names

    def _asks_for_itself(self, dataset: str, experiment: str) -> bool:
        """Do the dataset's overrides keep every training setting the experiment names itself?

        (They may fill in settings it leaves to the defaults: the smoke config's one-layer
        `tiny` Transformer is still named `transformer-tiny`, not after whichever member
        sorts first.)"""
        resolved = self.train_settings(dataset, experiment)
        return all(resolved.get(k) == v for k, v in self.experiments[experiment].items()
                   if k not in NOT_TRAINING)

    def cell(self, paper_dataset: str, experiment: str, where: str) -> Cell:
        """The cell of a paper's dataset (mapped onto a configured one) and experiment."""
        cell = self.run_cell(self.dataset(paper_dataset, where), experiment, where)
        if cell.status == "ok" and self.decoding(cell.dataset, experiment) == "none":
            raise InputError(f"{where}: experiment {experiment!r} is a teacher, never decoded "
                             "(decoding: none); show its students instead")
        return cell

    def run_cell(self, dataset: str, experiment: str, where: str) -> Cell:
        """The cell of a configured dataset and experiment."""
        status = self.status(experiment, dataset)
        if status != "ok":
            return Cell(dataset, experiment, status)
        settings = self.train_settings(dataset, experiment)
        for role, side in self.checkpoint_roles(experiment).items():
            if role not in settings:
                raise InputError(f"{where}: experiment {experiment!r} on dataset {dataset!r} "
                                 f"names no {role} checkpoint (set it in the experiment, or "
                                 f"'datasets.{dataset}.checkpoints.{side}')")
        spec = self.config["datasets"][dataset]
        if (settings.get("vocabulary") == "joint" and "joint" not in spec["vocab_size"]
                and "joint" not in spec.get("checkpoints", {})):
            raise InputError(f"{where}: experiment {experiment!r} reads a joint vocabulary; set "
                             f"config key 'datasets.{dataset}.vocab_size.joint' (or "
                             f"'datasets.{dataset}.checkpoints.joint')")
        return Cell(dataset, experiment, status, self._run_names[(dataset, experiment)],
                    self.decode_settings(dataset, experiment).tag)

    @cached_property
    def _decodes(self) -> dict[str, DecodeSettings]:
        return {settings.tag: settings
                for dataset in self.config["datasets"] for experiment in self.experiments
                if self.status(experiment, dataset) == "ok"
                for settings in [self.decode_settings(dataset, experiment)]}

    def decode_for_tag(self, tag: str) -> DecodeSettings:
        """The decoding settings a tag stands for (the rules only see the tag)."""
        return self._decodes[tag]

    def sharing(self, dataset: str, run: str) -> list[str]:
        """The experiments trained by the run `run` on `dataset`."""
        return sorted(e for (d, e), r in self._run_names.items() if d == dataset and r == run)

    # --- the files the requested items need --------------------------------------------------
    def table_cells(self, table: Table) -> list[tuple[int, int, Cell]]:
        return [(i, j, self.cell(row.dataset(col), row.experiment,
                                 f"{table.name} column {col.key!r}"))
                for i, row in enumerate(table.rows) for j, col in enumerate(table.columns)]

    def column_groups(self, table: Table, experiments: list[str | None] | None = None,
                      ) -> list[list[int]]:
        """The table's column indices, those that are one measurement on this data together
        (e.g. three language pairs all mapped onto the toy world): the same split and metric,
        and in every row (or the rows of `experiments`) the same cell."""
        rows = [r for r in table.rows if experiments is None or r.experiment in experiments]
        groups: dict[tuple, list[int]] = {}
        for j, col in enumerate(table.columns):
            cells = (self.cell(row.dataset(col), row.experiment, f"{table.name} column "
                               f"{col.key!r}") for row in rows)
            groups.setdefault((col.split, col.metric, *cells), []).append(j)
        return list(groups.values())

    def claim_cells(self, claim: Claim) -> list[tuple[list[Column], Cell, Cell | None]]:
        """The columns a claim is about, those that are one measurement on this data
        together, each with the claimed row's cell and the cell it is compared with (None for
        a claim against a number)."""
        table = self.catalogue.tables[claim.table]
        rows = {row.experiment: row for row in table.rows}
        compared = []
        for group in self.column_groups(table, [claim.row, claim.than]):
            columns = [table.columns[j] for j in group if table.columns[j].key in claim.columns]
            if columns:
                compared.append((columns, *(None if name is None else self.cell(
                    rows[name].dataset(columns[0]), name, claim.table)
                    for name in (claim.row, claim.than))))
        return compared

    def figure_cells(self, figure: Figure) -> list[Cell]:
        return [self.cell(figure.dataset, e, figure.name) for e in figure.experiments()]

    def _check_split(self, dataset: str, split: str, where: str) -> None:
        """Every dataset makes valid and test; an optional split only some (a toy world with
        its size set, a recipe with parts for it)."""
        if split in OPTIONAL_SPLITS and split not in optional_splits(dataset,
                                                                     self.config["datasets"]):
            raise InputError(f"{where}: dataset {dataset!r} makes no split {split!r} (a toy "
                             f"world makes it with world.{size_key(split)}; a real "
                             "dataset, where its recipe has it)")

    def targets(self) -> list[str]:
        """Every run output the requested tables and figures read (rule all's inputs)."""
        files: set[str] = set()
        for table in self.tables:
            baseline = self._baseline_cells(table)
            for _, j, cell in self.table_cells(table):
                if cell.status != "ok":
                    continue
                col = table.columns[j]
                self._check_split(cell.dataset, col.split, f"{table.name} column {col.key!r}")
                for seed in self.seeds:
                    base = baseline.get(j)
                    files.update(self.cell_files(cell, col.split, col.metric, seed, base))
                    if METRICS[col.metric].significance and tested_against(cell, base):
                        files.add(bootstrap_file(cell, base, col.split, col.metric, seed))
        for claim in self.claims:  # a claim between two rows: their own significance test
            for (col, *_), cell, other in self.claim_cells(claim):
                if (other is not None and METRICS[col.metric].significance
                        and cell.status == other.status == "ok" and tested_against(cell, other)):
                    files.update(bootstrap_file(cell, other, col.split, col.metric, seed)
                                 for seed in self.seeds)
        for figure in self.figures:
            for cell in self.figure_cells(figure):
                if cell.status != "ok":
                    continue
                self._check_split(cell.dataset, figure.split, figure.name)
                for seed in self.seeds:
                    files.update(self.figure_files(figure, cell, seed))
        for dataset, run in self.runs():  # the report names each reverse model's test BLEU
            back_translation = self.back_translation(dataset, run)
            for seed in self.seeds if back_translation is not None else []:
                files.update(self.cell_files(back_translation.reverse, "test", "bleu_tokenized",
                                             seed))
        for teacher, top_k in self.teachers():  # and each teacher's accuracy and dump
            files.update(teacher.file(layout.SOFT_TARGETS_INFO, seed, top_k=top_k)
                         for seed in self.seeds)
        return sorted(files)

    def teachers(self) -> list[tuple[Cell, int]]:
        """The teacher runs whose soft targets the requested runs train on, with the K of the
        dump (the report shows how well each teacher learned)."""
        found = {(i.cell, i.values["top_k"]) for dataset, run in self.runs()
                 for i in self.run_inputs(dataset, run).values() if i.name == "soft_targets"}
        return sorted(found, key=lambda pair: (pair[0].dataset, pair[0].run or "", pair[1]))

    def _baseline_cells(self, table: Table) -> dict[int, Cell]:
        if table.baseline is None:
            return {}
        cells = {j: self.cell(col.dataset, table.baseline, table.name)
                 for j, col in enumerate(table.columns)}
        return {j: cell for j, cell in cells.items() if cell.status == "ok"}

    def baseline_cell(self, table: Table, column: int) -> Cell | None:
        return self._baseline_cells(table).get(column)

    @staticmethod
    def cell_files(cell: Cell, split: str, metric: str, seed: int,
                   baseline: Cell | None = None) -> list[str]:
        if METRICS[metric].source == "latency":
            return [latency_file(cell, baseline, seed)]
        return [cell.file(layout.METRICS, seed, split=split)]

    @staticmethod
    def figure_files(figure: Figure, cell: Cell, seed: int) -> list[str]:
        if figure.kind == "curve":
            return [cell.file(layout.TRAIN_SUMMARY, seed)]
        if figure.kind == "buckets":
            return [buckets_file(cell, figure.split, figure.spec["bucket_cutoffs"], seed)]
        files = [cell.file(layout.METRICS, seed, split=figure.split)]
        for metric in filter(None, (figure.spec["y"], figure.spec.get("y2"))):
            files += Plan.cell_files(cell, figure.split, metric, seed)
        return files

    def figure_outputs(self) -> list[str]:
        return [layout.FIGURE.format(name=f.name, ext=ext)
                for f in self.figures for ext in ("png", "pdf")]


def tested_against(cell: Cell, baseline: Cell | None) -> bool:
    """Is a significance test of the cell against the baseline's meaningful? Not for the
    baseline's own run, nor across datasets (their test sets may differ in content or order)."""
    return baseline is not None and baseline.dataset == cell.dataset and (
        (baseline.run, baseline.tag) != (cell.run, cell.tag))


def latency_file(cell: Cell, baseline: Cell | None, seed: int) -> str:
    """The run's latency record: measured with its table's baseline in one job (the speedup),
    or alone when it is the baseline or the table has none."""
    if baseline is None or (baseline.run, baseline.tag) == (cell.run, cell.tag):
        return cell.file(layout.LATENCY, seed)
    return cell.file(layout.LATENCY_VS, seed, baseline=baseline.run, btag=baseline.tag)


def bootstrap_file(cell: Cell, baseline: Cell, split: str, metric: str, seed: int) -> str:
    """The paired bootstrap that marks the cell's `metric` against the baseline's."""
    return cell.file(layout.BOOTSTRAP, seed, split=split, score=METRICS[metric].significance,
                     baseline=baseline.run,
                     btag=baseline.tag)


def buckets_file(cell: Cell, split: str, cutoffs: list[int], seed: int) -> str:
    return cell.file(layout.BUCKETS, seed, split=split,
                     cutoffs="-".join(str(c) for c in cutoffs))


def _canonical(settings: dict[str, Any]) -> str:
    return json.dumps(settings, sort_keys=True)


def _merge_experiments(papers: dict[str, dict], config: dict[str, dict]) -> dict[str, dict]:
    """The papers' experiments, extended and overridden key by key by the config's."""
    merged = {name: dict(spec) for name, spec in papers.items()}
    for name, spec in config.items():
        base = merged.get(name, {})
        decode = {**base.get("decode", {}), **spec.get("decode", {})}
        merged[name] = {**base, **spec, **({"decode": decode} if decode else {})}
        if "method" not in merged[name]:
            raise InputError(f"config key 'experiments.{name}.method' is missing (the name is "
                             "not an experiment of any paper, so it needs a method)")
    return merged
