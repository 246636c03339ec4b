"""The source papers' tables and figures as data (`papers/*.yaml`), loaded and cross-checked.

Every file is validated against `papers/schema.yaml`, then its references are checked (rows and
series name the paper's experiments, `reported` keys name columns, a sweep has one experiment
per x value), so a typo stops the workflow at DAG-build time with the file and key named.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from nmtbench.errors import InputError, schema_key
from nmtbench.workflow.method_registry import registered_methods
from nmtbench.workflow.metric_registry import METRICS
from nmtbench.workflow.schema import Validator
from nmtbench.workflow.yaml_reader import read_yaml

PAPERS_DIR = Path(__file__).resolve().parents[2] / "papers"
SCHEMA = "schema.yaml"
EXTERNAL = "external"  # the method of rows a paper quotes from other work
# The scores a claim is about where it names no columns: the quality scores the papers report
# and the paired bootstrap tests (BLEU, ROUGE); chrF, which no paper reports, only where named
CLAIMED = {name for name, metric in METRICS.items() if metric.quality and metric.significance}
# The metrics a table's `bleu` record is about, and the kinds of BLEU each compares with
BLEU = {"bleu_tokenized": ("tokenized", "unknown"), "sacrebleu": ("sacrebleu", "unknown")}
TOY = "toy"  # the paper dataset of the generated toy world (papers/toyworld.yaml)


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    dataset: str
    split: str
    metric: str


@dataclass(frozen=True)
class Row:
    experiment: str
    label: str
    reported: dict[str, float | None]
    note: str = ""
    # a dataset of its own in place of each column's, or of some columns' (column key -> it)
    trained_on: str | dict[str, str] | None = None

    def dataset(self, column: Column) -> str:
        """The paper dataset this row's cell in `column` trains and is tested on."""
        if isinstance(self.trained_on, dict):
            return self.trained_on.get(column.key, column.dataset)
        return self.trained_on or column.dataset


@dataclass(frozen=True)
class Table:
    """One paper table (or a config-defined one: `paper` is then "config")."""

    name: str  # "<paper>.<table>", what `tables:` in the config lists
    paper: str
    caption: str
    columns: list[Column]
    rows: list[Row]
    baseline: str | None = None
    # how the paper scored the BLEU it reports (papers/schema.yaml $defs.bleu), or None
    bleu: dict[str, Any] | None = None

    def bleu_scoring(self, column: str) -> dict[str, Any] | None:
        """The paper's `bleu` record as it holds for a column (its `columns` entry over the
        table's), without the `columns` map."""
        if self.bleu is None:
            return None
        record = {k: v for k, v in self.bleu.items() if k != "columns"}
        return {**record, **self.bleu.get("columns", {}).get(column, {})}


@dataclass(frozen=True)
class Claim:
    """A paper's own finding in checkable form: on its table's `columns`, `row` is better
    than `than` (higher for scores and speedups, lower for latency and parameter counts),
    or its values exceed `above`."""

    paper: str
    claim: str
    source: str
    table: str  # "<paper>.<table>"
    columns: list[str]  # column keys
    row: str
    than: str | None = None
    above: float | None = None


@dataclass(frozen=True)
class Figure:
    name: str
    paper: str
    kind: str  # sweep | curve | buckets
    caption: str
    dataset: str
    split: str
    spec: dict[str, Any] = field(default_factory=dict)

    def experiments(self) -> list[str]:
        if self.kind == "sweep":
            return list(self.spec["experiments"])
        return list(self.spec["series"])


@dataclass
class Recipe:
    """How a paper trained and decoded one experiment on one of its datasets: key -> fact
    ({value, source, how, form}), the keys its sources leave open, and notes on them."""

    paper: str
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)
    not_stated: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)


@dataclass
class Catalogue:
    """Every paper's tables, figures and experiments; `sources` says which file defined what."""

    tables: dict[str, Table] = field(default_factory=dict)
    figures: dict[str, Figure] = field(default_factory=dict)
    experiments: dict[str, dict[str, Any]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    papers: dict[str, dict[str, str]] = field(default_factory=dict)  # title, citation, source
    claims: list[Claim] = field(default_factory=list)
    planned: set[str] = field(default_factory=set)  # methods papers need, not written yet
    recipes: dict[tuple[str, str], Recipe] = field(default_factory=dict)  # (experiment, dataset)

    def names(self) -> list[str]:
        return sorted(self.tables) + sorted(self.figures)


def _schema_error(path: Path, error: jsonschema.ValidationError) -> InputError:
    return InputError(f"{path}: key '{schema_key(error)}': {error.message}")


def load_paper(path: Path, validator: Validator) -> dict[str, Any]:
    data = read_yaml(path)
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        raise _schema_error(path, error)
    if data["paper"] != path.stem:
        raise InputError(f"{path}: key 'paper' is {data['paper']!r} but must equal the file "
                         f"name {path.stem!r}")
    _check_references(path, data)
    return data


def _check_references(path: Path, data: dict[str, Any]) -> None:
    experiments = data["experiments"]

    def known(name: str, key: str) -> None:
        if name not in experiments:
            raise InputError(f"{path}: key '{key}': unknown experiment {name!r} (not under "
                             "'experiments')")

    for tname, table in data["tables"].items():
        rows = [row["experiment"] for row in table["rows"]]
        for i, row in enumerate(table["rows"]):
            known(row["experiment"], f"tables.{tname}.rows.{i}.experiment")
            trained_on = row.get("trained_on")
            for key, cols in (("reported", row["reported"]),
                              ("trained_on", trained_on if isinstance(trained_on, dict) else {})):
                for col in cols:
                    if col not in table["columns"]:
                        raise InputError(f"{path}: key 'tables.{tname}.rows.{i}.{key}.{col}': "
                                         "no such column; columns: "
                                         f"{', '.join(table['columns'])}")
        if len(set(rows)) != len(rows):
            dup = next(r for r in rows if rows.count(r) > 1)
            raise InputError(f"{path}: key 'tables.{tname}.rows': experiment {dup!r} appears "
                             "twice (give the variant its own experiment)")
        if "baseline" in table and table["baseline"] not in rows:
            raise InputError(f"{path}: key 'tables.{tname}.baseline': {table['baseline']!r} "
                             "is not one of the table's rows")
        _check_bleu_record(f"{path}: key 'tables.{tname}", table)
    _check_claims(path, data)
    for fname, figure in data.get("figures", {}).items():
        if figure["kind"] == "sweep":
            names = figure["experiments"]
            if len(names) != len(figure["x"]["values"]):
                raise InputError(f"{path}: key 'figures.{fname}.experiments': "
                                 f"{len(names)} experiments for {len(figure['x']['values'])} "
                                 "x values")
            for i, name in enumerate(names):
                known(name, f"figures.{fname}.experiments.{i}")
        else:
            names = list(figure["series"])
            for name in names:
                known(name, f"figures.{fname}.series.{name}")
        _check_reported(f"{path}: key 'figures.{fname}.reported", figure, names)


def _check_bleu_record(where: str, table: dict[str, Any]) -> None:
    """A table that reports BLEU on real data says how the paper scored it (`bleu`): the
    kind of BLEU its columns compare with (tokenized, sacreBLEU); `columns` names BLEU
    columns. The toy world's published nothing."""
    columns = {key: c for key, c in table["columns"].items() if c["metric"] in BLEU}
    reported = list(dict.fromkeys(
        key for row in table["rows"] for key, value in row["reported"].items()
        if value is not None and key in columns and columns[key]["dataset"] != TOY))
    record = table.get("bleu")
    if record is None:
        if reported:
            raise InputError(f"{where}': column {reported[0]!r} reports BLEU but the table has "
                             "no `bleu` record of how the paper scored it (papers/schema.yaml "
                             "$defs.bleu; unknown where the paper does not say)")
        return
    for key in record.get("columns", {}):
        if key not in columns:
            raise InputError(f"{where}.bleu.columns.{key}': not a BLEU column of the table; "
                             f"those are {', '.join(columns) or 'none'}")
    for key in reported:
        kind = record.get("columns", {}).get(key, {}).get("kind", record["kind"])
        if kind not in BLEU[columns[key]["metric"]]:
            raise InputError(f"{where}.bleu': the paper's BLEU in column {key!r} is {kind}, but "
                             f"the column compares it with {columns[key]['metric']}; change "
                             f"one (a column's own kind: bleu.columns.{key}.kind)")


def _check_reported(where: str, figure: dict[str, Any], names: list[str]) -> None:
    """A figure's `reported` values: a sweep's per y axis, one per x value; curves' and
    buckets' per series, buckets' one per bucket (a curve's are its 1st, 2nd... epoch or step,
    as the paper counts them)."""
    if figure["kind"] == "sweep":
        allowed = ["y", *(["y2"] if "y2" in figure else [])]
        points, unit = len(figure["x"]["values"]), "x values"
    else:
        allowed = names
        points, unit = len(figure.get("bucket_cutoffs", [])) + 1, "buckets"
    for name, values in figure.get("reported", {}).items():
        if name not in allowed:
            raise InputError(f"{where}.{name}': not one of {', '.join(allowed)}")
        if values is not None and figure["kind"] != "curve" and len(values) != points:
            raise InputError(f"{where}.{name}': {len(values)} values for {points} {unit}")


def _check_claims(path: Path, data: dict[str, Any]) -> None:
    """Each claim names a table of the file, rows and columns of it, and a column to judge
    (named, or the table's BLEU or ROUGE)."""
    for i, claim in enumerate(data.get("claims", [])):
        where = f"{path}: key 'claims.{i}"
        table = data["tables"].get(claim["table"])
        if table is None:
            raise InputError(f"{where}.table': no table {claim['table']!r} in this file")
        rows = [row["experiment"] for row in table["rows"]]
        for key in ("row", "than"):
            if key in claim and claim[key] not in rows:
                raise InputError(f"{where}.{key}': {claim[key]!r} is not a row of "
                                 f"{claim['table']}")
        for column in claim.get("columns", []):
            if column not in table["columns"]:
                raise InputError(f"{where}.columns': no column {column!r} in "
                                 f"{claim['table']}; columns: {', '.join(table['columns'])}")
        if not claim.get("columns") and not any(c["metric"] in CLAIMED
                                                for c in table["columns"].values()):
            raise InputError(f"{where}.columns': {claim['table']} has no BLEU or ROUGE "
                             "column; name the columns the claim is about")


def _settings(experiment: dict[str, Any]) -> dict[str, Any]:
    """What makes an experiment the same one in two files: all but its description."""
    return {k: v for k, v in experiment.items() if k != "description"}


def load_catalogue(papers_dir: str | Path = PAPERS_DIR) -> Catalogue:
    """Load every `papers/*.yaml`; an experiment defined twice must have the same settings.
    (Read again only when a file there changed: a process that checks several configs, as
    the tests do, loads the same files once; each call has a copy of its own.)"""
    papers_dir = Path(papers_dir)
    files = tuple((p.name, (stat := p.stat()).st_mtime_ns, stat.st_size)
                  for p in sorted(papers_dir.glob("*.yaml")))
    return copy.deepcopy(_load_catalogue(papers_dir, files))


@functools.lru_cache(maxsize=4)
def _load_catalogue(papers_dir: Path, files: tuple[tuple[str, int, int], ...]) -> Catalogue:
    """`load_catalogue` of a directory whose *.yaml files are `files` (name, mtime, size)."""
    schema_path = papers_dir / SCHEMA
    if not schema_path.is_file():
        raise InputError(f"{schema_path}: missing (the schema of the paper files)")
    schema = read_yaml(schema_path)
    validator = Validator(schema)
    catalogue = Catalogue(planned=set(schema["$defs"]["method"].get("x-planned", [])))
    methods = {*registered_methods(), EXTERNAL, *catalogue.planned}
    for path in sorted(papers_dir.glob("*.yaml")):
        if path.name == SCHEMA:
            continue
        data = load_paper(path, validator)
        paper = data["paper"]
        catalogue.papers[paper] = {k: data[k] for k in ("title", "citation", "source")
                                   if k in data}
        for name, spec in data["experiments"].items():
            if spec["method"] not in methods:
                raise InputError(f"{path}: key 'experiments.{name}.method': unknown method "
                                 f"{spec['method']!r}; known: {', '.join(sorted(methods))}")
            if (name in catalogue.experiments
                    and _settings(catalogue.experiments[name]) != _settings(spec)):
                raise InputError(f"{path}: key 'experiments.{name}': defined differently in "
                                 f"{catalogue.sources[name]}; use another name or the same "
                                 "settings")
            catalogue.experiments.setdefault(name, spec)
            catalogue.sources.setdefault(name, str(path))
        for tname, table in data["tables"].items():
            catalogue.tables[f"{paper}.{tname}"] = table_from_spec(f"{paper}.{tname}", paper,
                                                                   table)
        catalogue.claims += [claim_from_spec(paper, c, catalogue.tables)
                             for c in data.get("claims", [])]
        _add_recipes(path, data, catalogue.recipes)
        for fname, figure in data.get("figures", {}).items():
            spec = {k: v for k, v in figure.items()
                    if k not in ("kind", "caption", "dataset", "split")}
            catalogue.figures[f"{paper}.{fname}"] = Figure(
                f"{paper}.{fname}", paper, figure["kind"], figure["caption"],
                figure["dataset"], figure["split"], spec)
    return catalogue


def _add_recipes(path: Path, data: dict[str, Any],
                 recipes: dict[tuple[str, str], Recipe]) -> None:
    """A file's `recipes` by (experiment, dataset): entries may share a run but not a key,
    and a run's recipe comes from one paper (the one that ran it)."""
    for i, entry in enumerate(data.get("recipes", [])):
        where = f"{path}: key 'recipes.{i}"
        facts = {k: v for k, v in entry.items()
                 if k not in ("experiments", "datasets", "not_stated", "note")}
        keys = {*facts, *entry.get("not_stated", [])}
        if both := set(facts) & set(entry.get("not_stated", [])):
            raise InputError(f"{where}.not_stated': {', '.join(sorted(both))} given too")
        for name in entry["experiments"]:
            if name not in data["experiments"]:
                raise InputError(f"{where}.experiments': unknown experiment {name!r} (not "
                                 "under 'experiments')")
            for dataset in entry["datasets"]:
                recipe = recipes.setdefault((name, dataset), Recipe(data["paper"]))
                if recipe.paper != data["paper"]:
                    raise InputError(f"{where}': {name} on {dataset} has a recipe in "
                                     f"papers/{recipe.paper}.yaml already")
                if twice := keys & {*recipe.facts, *recipe.not_stated}:
                    raise InputError(f"{where}': {name} on {dataset} is given "
                                     f"{', '.join(sorted(twice))} twice")
                recipe.facts.update(facts)
                recipe.not_stated.update(entry.get("not_stated", []))
                recipe.notes += [entry["note"]] if "note" in entry else []


def claim_from_spec(paper: str, spec: dict[str, Any], tables: dict[str, Table]) -> Claim:
    """A claim, its columns defaulting to the table's BLEU and ROUGE columns (CLAIMED)."""
    table = tables[f"{paper}.{spec['table']}"]
    columns = spec.get("columns") or [c.key for c in table.columns if c.metric in CLAIMED]
    return Claim(paper, spec["claim"], spec["source"], table.name, columns, spec["row"],
                 spec.get("than"), spec.get("above"))


def table_from_spec(name: str, paper: str, spec: dict[str, Any]) -> Table:
    columns = [Column(key, c["label"], c["dataset"], c["split"], c["metric"])
               for key, c in spec["columns"].items()]
    rows = [Row(r["experiment"], r["label"], dict(r["reported"]), r.get("note", ""),
                r.get("trained_on")) for r in spec["rows"]]
    return Table(name, paper, spec["caption"], columns, rows, spec.get("baseline"),
                 spec.get("bleu"))
