"""Reading a plan's run outputs back from a results directory (results/ or a copy of it)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

from nmtbench import layout, provenance
from nmtbench.errors import InputError
from nmtbench.records import POSITIVE, SHARE, checked_number, read_result
from nmtbench.workflow.config import as_json, pretrain_settings
from nmtbench.workflow.metric_registry import METRICS, Metric, verdict
from nmtbench.workflow.plan import Cell, Plan, bootstrap_file
from nmtbench.workflow.pretrain_settings import PretrainConfig

BETTER, WORSE = "▲", "▼"


class Results:
    """Reads the run outputs of a plan's cells from a results directory: only those still
    made from what is there now (`nmtbench.provenance`) and described by the config: from the
    training in the run's directory, trained with the settings and on the files the plan gives
    the run now, on inputs (data, tokenizers, pre-trained checkpoints, other runs' outputs)
    unchanged since, from runs it loads or learns from that are current themselves and files
    they made from their current training, and, for scores, the hypotheses in the run's
    directory. The others are left out and listed in `stale`."""

    def __init__(self, plan: Plan, results_dir: Path,
                 pretrained_dir: Path = Path(layout.PRETRAINED_ROOT)) -> None:
        self.plan = plan
        self.results_dir = results_dir
        self.pretrained_dir = pretrained_dir  # the checkpoints pre-trained in the DAG
        self.stale: set[Path] = set()
        self._digests: dict[Path, str] = {}  # each file or directory digested once
        self._inputs_current: dict[Path, bool] = {}  # per run directory
        self._runs_current: dict[tuple[str, str, int], bool] = {}

    def path(self, planned: str) -> Path:
        """Where a planned file ("results/runs/...") is in this results directory."""
        return self.results_dir / Path(planned).relative_to(Path(layout.RUNS).parent)

    def measure(self, cell: Cell, split: str, metric: str, seed: int,
                baseline: Cell | None) -> float | None:
        """Our value of one cell for one seed; None when its file is not there yet."""
        path = self.path(Plan.cell_files(cell, split, metric, seed, baseline)[0])
        data = read_result(path)
        if data is None:
            return None
        made_from = [(data, cell)]
        if METRICS[metric].source == "latency" and "baseline" in data:
            made_from.append((data["baseline"], baseline))
        scores = split if METRICS[metric].source == "metrics" else None
        timed = METRICS[metric].source != "latency" or timed_as_configured(self.plan.config, data)
        if not timed or not all(self.current(record, c, seed, scores) for record, c in made_from):
            self.stale.add(path)
            return None
        if metric == "speedup" and "baseline" not in data:
            return 1.0  # the baseline row itself
        value = _get(data, METRICS[metric], path)
        _check_consistent(data, metric, value, path)
        return value

    def significance(self, cell: Cell, baseline: Cell, split: str, metric: str) -> str:
        """▲/▼ when every seed's paired bootstrap of the metric's score says better/worse at
        p < 0.05."""
        verdicts = []
        for seed in self.plan.seeds:
            path = self.path(bootstrap_file(cell, baseline, split, metric, seed))
            data = read_result(path, numbers={"p_better": SHARE, "p_worse": SHARE})
            if data is None:
                return ""
            if data.get("significance") != verdict(data["p_better"], data["p_worse"]):
                raise InputError(f"{path}: key 'significance' is {data.get('significance')!r}, "
                                 f"but its p-values make it "
                                 f"{verdict(data['p_better'], data['p_worse'])!r}")
            scored = [(read_result(self.path(c.file(layout.METRICS, seed, split=split))), c)
                      for c in (cell, baseline)]
            if (not all(s is not None and self.current(s, c, seed, split) for s, c in scored)
                    or data.get("hyps") != [s.get("hyp") for s, _ in scored]
                    or data.get("score") != METRICS[metric].significance
                    or data.get("ref", scored[0][0].get("ref")) != scored[0][0].get("ref")
                    or not analysed_as_configured(self.plan.config, data, cell.dataset)):
                self.stale.add(path)  # it compared hypotheses the table does not show, on
                return ""  # another score or reference (a record made by hand under the
                # file's name; one made before records named it: the metrics' own), or
                # resampled or scored otherwise than the config asks now
            verdicts.append(data.get("significance"))
        if all(v == "better" for v in verdicts):
            return BETTER
        if all(v == "worse" for v in verdicts):
            return WORSE
        return ""

    def current(self, record: dict, cell: Cell, seed: int, split: str | None = None) -> bool:
        """Is `record` (an output of the cell's run) made from what is there now: the training
        in the run's directory, inputs unchanged since it trained, and for a `split`'s scores
        the decoding settings, hypotheses, reference and source they record (`decode`, `hyp`,
        `ref`, `decode.src`: the files where they are there to compare; a record that does not
        say is not current)?"""
        run_dir = self.path(cell.run_dir(seed))
        if not provenance.current(record, run_dir):
            return False
        if split is not None:
            decoding = record.get("decode")
            if not self._decoded_as_tagged(decoding, cell) or not self._unchanged(
                    cell, seed, split, record.get("hyp"), record.get("ref"), decoding.get("src")):
                return False  # decoded, scored or prepared again since, or it does not say
            if not scored_as_configured(self.plan.config, record.get("bleu"), cell.dataset):
                return False  # scored with another case, compound splitting or detokenizer
        return self.run_current(cell, seed)

    def made_from_hypotheses(self, record: dict, cell: Cell, seed: int, split: str) -> bool:
        """Is `record`, made from a split's hypotheses and reference and naming them (`hyp`,
        `ref`: length buckets), made from the cell's hypotheses there now, decoded (their
        `decode` record) by the training there now with the settings of the cell's tag,
        from the source and against the reference prepared now?"""
        decoding = read_result(self.path(cell.file(layout.DECODE_INFO, seed, split=split)))
        return (decoding is not None and self._decoded_as_tagged(decoding, cell)
                and self._unchanged(cell, seed, split, record.get("hyp"), record.get("ref"),
                                    decoding.get("src"))
                and self.current(decoding, cell, seed))

    def _decoded_as_tagged(self, decoding: Any, cell: Cell) -> bool:
        """A decoding record with the settings the cell's tag stands for (not one made by
        hand under the cell's file name with others)."""
        made_by = self.plan.decode_for_tag(cell.tag).record()
        return isinstance(decoding, dict) and all(decoding.get(k) == v
                                                  for k, v in made_by.items())

    def _unchanged(self, cell: Cell, seed: int, split: str, hyp: Any, ref: Any,
                   src: Any) -> bool:
        """The hypotheses, reference and source digests a record names are those of the
        files there now (where they are there to compare; a record that does not say is not
        current)."""
        prepared = {side: self.results_dir.parent / layout.PREPARED.format(
            dataset=cell.dataset, file=f"{split}.{side}") for side in ("src", "tgt")}
        return all(not path.is_file() or recorded == self._digest(path) for path, recorded in (
            (self.path(cell.file(layout.HYP, seed, split=split)), hyp),
            (prepared["tgt"], ref), (prepared["src"], src)))

    def run_current(self, cell: Cell, seed: int) -> bool:
        """Is the training in the cell's run directory the one the config describes now?"""
        key = (cell.dataset, str(cell.run), seed)
        if key not in self._runs_current:
            self._runs_current[key] = False  # while checked (the config refuses cycles)
            self._runs_current[key] = self._run_current(cell, seed)
        return self._runs_current[key]

    def _run_current(self, cell: Cell, seed: int) -> bool:
        run_dir = self.path(cell.run_dir(seed))
        config = read_result(run_dir / Path(layout.RUN_CONFIG).name)
        planned = json.loads(as_json(self.plan.run_settings(cell.dataset, str(cell.run), seed)))
        if config is None or config.get("experiment") != planned:
            return False  # trained with other settings than the config's now
        if config.get("paths") != self.plan.run_paths(cell.dataset, str(cell.run), seed):
            return False  # trained on other files than the workflow gives it (by hand)
        if not self._inputs_unchanged(run_dir):
            return False
        for given in self.plan.run_inputs(cell.dataset, str(cell.run)).values():
            if given.cell is None:
                continue  # data: its digest is among the inputs'
            provider_seed = seed + given.seed_offset
            if not self.run_current(given.cell, provider_seed):
                return False
            if given.record is not None:  # made by the provider: from its current training?
                record = read_result(self.path(given.cell.file(given.record, provider_seed,
                                                                **given.values)))
                provider = self.path(given.cell.run_dir(provider_seed))
                if record is None or not provenance.current(record, provider):
                    return False
        return True

    def _inputs_unchanged(self, run_dir: Path) -> bool:
        """The run's inputs are what its finished training recorded (those still there: a
        results directory copied without the data cannot tell). Paths as the run was given
        them (relative to the workflow's directory); other runs' outputs in this results
        directory."""
        if run_dir not in self._inputs_current:
            summary = read_result(run_dir / Path(layout.TRAIN_SUMMARY).name)
            config = read_result(run_dir / Path(layout.RUN_CONFIG).name)
            recorded = summary.get("inputs") if summary is not None else None
            paths = config.get("paths") if config is not None else None
            self._inputs_current[run_dir] = not (
                isinstance(recorded, dict) and isinstance(paths, dict)
                and provenance.changed_inputs(recorded, self._localised(paths), missing_ok=True,
                                              digest=self._digest))
        return self._inputs_current[run_dir]

    def _localised(self, paths: dict[str, Any]) -> dict[str, Any]:
        """A run's input paths, those under results/runs/ (other runs' outputs) moved into
        this results directory, those under data/pretrained/ (checkpoints, their tokenizers)
        into the pre-trained directory, whose summaries the report shows, and the other data
        into the directory holding this results directory, where the test sets the scores
        are checked against are read (`_unchanged`): a run on data or a checkpoint made
        again there is not current."""
        runs, pretrained = Path(layout.RUNS), Path(layout.PRETRAINED_ROOT)

        def local(value: str) -> str | Path:
            parts = Path(value).parts
            if parts[:len(runs.parts)] == runs.parts:
                return self.path(value)
            if parts[:len(pretrained.parts)] == pretrained.parts:
                return self.pretrained_dir / Path(value).relative_to(pretrained)
            return self.results_dir.parent / value  # an absolute path stays itself

        return {name: self._localised(value) if isinstance(value, dict) else local(value)
                for name, value in paths.items() if isinstance(value, dict | str)}

    def _digest(self, path: Path) -> str:
        if path not in self._digests:
            self._digests[path] = provenance.path_digest(path)
        return self._digests[path]


def check_prepared(plan: Plan, root: Path, datasets: list[str]) -> None:
    """A toy world under `root`'s data/ (where the report reads the test sets) made with other
    settings than the config gives it now (its manifest records those it was made with) is
    refused with one line: the scores are checked against those test sets, which the
    workflow makes again from the config before its own report, and has not yet. A world
    without a manifest (not there: results copied without the data; or made before toy worlds
    wrote one, which the workflow makes again) cannot be compared."""
    for dataset in datasets:
        spec = plan.config["datasets"][dataset]
        path = root / layout.PREPARED_MANIFEST.format(dataset=dataset)
        if spec["kind"] != "toyworld" or (record := read_result(path, ("world",))) is None:
            continue
        made, wanted = record["world"], json.loads(as_json(spec.get("world", {})))
        if made == wanted:
            continue
        raise InputError(f"{path.parent}: the toy world there was made with other settings than "
                         f"config key 'datasets.{dataset}.world' gives it now "
                         f"({_changes(made, wanted)}); run the workflow, which makes it again, "
                         f"or delete {path.parent}")


def check_vocabularies(plan: Plan, root: Path) -> None:
    """A vocabulary under `root`'s data/ that the report's runs read, trained for another size
    than the config's `vocab_size` gives it now (its summary records the size it was asked
    for), is refused with one line, as `check_prepared` refuses a toy world: its runs are
    current on the vocabulary there, which the workflow trains again before its own report.
    One without a summary (made before vocabularies wrote one) cannot be compared."""
    read = {plan.vocabulary(dataset, run, side) + (dataset,)
            for dataset, run in plan.trained_runs() for side in ("src", "tgt")}
    for name, side, dataset in sorted(read, key=str):
        directory = root / layout.TOKENIZER_DIR.format(dataset=dataset, side=side)
        path = directory / layout.VOCABULARY_SUMMARY_NAME
        if name is not None or (summary := read_result(path, ("vocab_size",))) is None:
            continue  # a checkpoint's vocabulary: its pre-training's
        wanted = plan.config["datasets"][dataset]["vocab_size"][side]
        if summary["vocab_size"] != wanted:
            raise InputError(f"{directory}: trained for {summary['vocab_size']} pieces, but "
                             f"config key 'datasets.{dataset}.vocab_size.{side}' asks for "
                             f"{wanted} now; run the workflow, which trains it again, or "
                             f"delete {directory}")


def check_pretrained(plan: Plan, name: str, summary: dict[str, Any], path: Path) -> None:
    """A checkpoint pre-trained in the DAG whose summary (`path`, where the report reads it and
    compares the runs' checkpoints) records other settings than the config's `pretraining`
    entry gives it now is refused with one line, as `check_prepared` refuses a toy world: its
    runs are current on the checkpoint there, which the workflow pre-trains again before its
    own report. A setting an older summary does not record is taken as its default."""
    wanted = asdict(PretrainConfig.from_dict(json.loads(as_json(
        pretrain_settings(plan.config["pretraining"][name])))))
    made = summary["settings"]
    if not isinstance(made, dict) or {**wanted, **made} != wanted:
        raise InputError(f"{path.parent}: pre-trained with other settings than config key "
                         f"'pretraining.{name}' gives it now ({_changes(made, wanted)}); run "
                         f"the workflow, which pre-trains it again, or delete {path.parent}")


def _changes(made: Any, wanted: dict[str, Any]) -> str:
    """The settings a record and the config disagree on, as `key RECORDED there, WANTED in
    the config`; a setting the record leaves out is the config's."""
    made = {**wanted, **made} if isinstance(made, dict) else {}
    return ", ".join(f"{key} {_shown(made, key)} there, {_shown(wanted, key)} in the config"
                     for key in sorted(made.keys() | wanted.keys())
                     if made.get(key) != wanted.get(key))


def _shown(settings: dict[str, Any], key: str) -> str:
    return json.dumps(settings[key]) if key in settings else "unset"


def scoring(config: dict[str, Any], dataset: str) -> dict[str, Any]:
    """How the config scores a dataset: case, compound splitting, the language of the
    detokenizer before sacreBLEU (rules/evaluate.smk passes them)."""
    spec = config["datasets"][dataset]
    return {"lowercase": bool(spec["lowercase"]),
            "compound_split": bool(spec.get("compound_split")),
            "detok_lang": spec["detok_lang"]}


def scored_as_configured(config: dict[str, Any], bleu: Any, dataset: str) -> bool:
    """A metrics record's BLEU (`bleu`: its case is in the signature; compound splitting and
    the detokenizer's language beside it, the latter since scores record it) was scored as
    the config scores the dataset now."""
    wanted = scoring(config, dataset)
    if not isinstance(bleu, dict) or not isinstance(bleu.get("tokenized_signature"), str):
        return False
    case = "case:lc" in bleu["tokenized_signature"].split("|")
    return (case == wanted["lowercase"]
            and bleu.get("compound_split") == wanted["compound_split"]
            and bleu.get("detok_lang", wanted["detok_lang"]) == wanted["detok_lang"])


def analysed_as_configured(config: dict[str, Any], record: dict, dataset: str) -> bool:
    """A bootstrap record resampled as many times, and scored as, the config says now."""
    wanted = scoring(config, dataset)
    return (record.get("samples") == config["analysis"]["bootstrap_samples"]
            and record.get("lowercase") == wanted["lowercase"]
            and record.get("compound_split") == wanted["compound_split"]
            and record.get("detok_lang", wanted["detok_lang"]) == wanted["detok_lang"])


def timed_as_configured(config: dict[str, Any], record: dict) -> bool:
    """A latency record timed on as many sentences, and its throughput measured at the batch
    size, as `analysis` says now."""
    analysis = config["analysis"]
    batch = analysis.get("throughput_batch", 64)
    return (record.get("sentences") == analysis["latency_sentences"]
            and record.get("throughput_batch_size", batch) == batch)


def _get(data: dict, metric: Metric, path: Path) -> float:
    """The metric's number, within the values its job writes; missing from a metrics file,
    it is a score an older `evaluate` did not write yet (chrF): the error says how to score
    the run again."""
    value: Any = data
    for key in metric.keys:
        if not isinstance(value, dict) or key not in value:
            again = ("; an older evaluate wrote this file: delete it, or run snakemake with "
                     "--forcerun evaluate, to score the run again"
                     ) if metric.source == "metrics" else ""
            raise InputError(f"{path}: missing key '{'.'.join(metric.keys)}'{again}")
        value = value[key]
    return float(checked_number(path, ".".join(metric.keys), value, metric.bounds))


def _check_consistent(data: dict, metric: str, value: float, path: Path) -> None:
    """A number shown that its record derives from others there (a speedup from the two
    medians) or bounds by one (trained parameters by all of them) agrees with them: one
    edited by hand alone would read as a result no run gave."""
    if metric == "speedup":
        medians = [checked_number(path, key, value_at(data, key), POSITIVE)
                   for key in ("baseline.latency_ms.median", "latency_ms.median")]
        if not math.isclose(value, medians[0] / medians[1], rel_tol=1e-9):
            raise InputError(f"{path}: key 'speedup' is {value:g}, but the baseline's and the "
                             f"run's median latencies make it {medians[0] / medians[1]:g}")
    if metric == "params_trained":
        total = checked_number(path, "params.total", value_at(data, "params.total"),
                               METRICS["params_total"].bounds)
        if value > total:
            raise InputError(f"{path}: key 'params.trained' is {value:.0f}, more than "
                             f"'params.total' ({total:.0f})")


def value_at(record: Any, key: str) -> Any:
    """The value at a dotted key of a record, None where it has none."""
    for part in key.split("."):
        record = record.get(part) if isinstance(record, dict) else None
    return record
