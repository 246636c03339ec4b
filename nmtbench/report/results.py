"""Reading a plan's run outputs back from a results directory (results/ or a copy of it)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from nmtbench import layout, provenance
from nmtbench.errors import InputError
from nmtbench.records import POSITIVE, SHARE, checked_number, read_result
from nmtbench.workflow.config import as_json
from nmtbench.workflow.metric_registry import METRICS, Metric, verdict
from nmtbench.workflow.plan import Cell, Plan, bootstrap_file

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
                    or not analysed_as_configured(self.plan.config, data, cell.dataset)):
                self.stale.add(path)  # it compared hypotheses the table does not show, or
                return ""  # resampled or scored otherwise than the config asks now
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
