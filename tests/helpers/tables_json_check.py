"""Checking a report's tables.json against its JSON Schema (report/tables.schema.json) and
against the tables.md beside it: every number the page shows is in the record, and every cell
of the page's tables is a cell of the record whose values make its text."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
from fabricated_runs import markdown_table

from nmtbench.report.results import BETTER, WORSE
from nmtbench.workflow.metric_registry import METRICS

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "report" / "tables.schema.json"
# a number, not the digits of a name ("sha256", "seed1", "x86_64")
NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*")
# Sections whose first paragraph is the harness's own prose, the same on every page
PROSE_FIRST = ("Pre-trained checkpoints", "Left out: made from an earlier training", "Settings")
MARKS = {"better": BETTER, "worse": WORSE, None: ""}


def schema_errors(record: Any) -> list[str]:
    """Where `record` breaks the schema, one line each."""
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top level)'}: {e.message}"
            for e in validator.iter_errors(record)]


def _values(value: Any) -> Iterator[str]:
    """Every string and number in a JSON value, keys too, as text."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _values(item)
    elif isinstance(value, list):
        for item in value:
            yield from _values(item)
    elif value is not None:
        yield str(value)


def shown_lines(text: str, record: dict[str, Any]) -> list[str]:
    """tables.md's lines but the harness's fixed prose opening a section (the page's own
    words about what a section is, not numbers of the run)."""
    titles = {*PROSE_FIRST, *(section["title"] for section in record["run_inputs"])}
    lines, skip = [], False
    for line in text.splitlines():
        if line.startswith("## "):
            skip = line[3:] in titles
        elif skip and line.strip():
            skip = False  # the section's first paragraph: one line
            continue
        lines.append(line)
    return lines


def missing_numbers(text: str, record: dict[str, Any]) -> list[str]:
    """The numbers tables.md's `text` shows that the record holds nowhere."""
    held = {number for value in _values(record) for number in NUMBER.findall(value)}
    return sorted({number for line in shown_lines(text, record)
                   for number in NUMBER.findall(line)} - held)


def _formatted(cell: dict[str, Any]) -> str:
    """The start of a cell's text, made from its record's values as the report formats them."""
    fmt, ours = METRICS[cell["metric"]].format, cell["ours"]
    if ours["std"] is None or (METRICS[cell["metric"]].pattern is None and ours["std"] == 0):
        return fmt(ours["mean"])
    return f"{fmt(ours['mean'])} ± {fmt(ours['std'])}"


def cell_mismatches(text: str, record: dict[str, Any]) -> list[str]:
    """Cells of the page's paper tables that the record does not hold as shown: every one is
    there with its text, and a number's text is made of the record's mean, std, significance
    and, on the paper's data, the paper's number."""
    found = []
    for table in record["tables"]:
        body = text.split(f"## {table['name']}\n", 1)[1].split("\n## ", 1)[0]
        cells = {(c["row"], c["shown_as"]): c for c in table["cells"]}
        for row in markdown_table(body):
            for column, shown in row.items():
                if column in ("", "runs"):
                    continue
                cell = cells.get((row[""], column))
                if cell is None or cell["text"] != shown:
                    found.append(f"{table['name']} {row['']} / {column}: {shown!r} vs {cell}")
                elif cell["status"] == "ok":
                    fmt = METRICS[cell["metric"]].format
                    start = _formatted(cell) + MARKS[cell["significance"]]
                    paper = (f"(paper {fmt(cell['paper_value'])}, Δ " if cell["on_papers_data"]
                             and cell["paper_value"] is not None else "")
                    if paper:
                        diff = fmt(cell["difference"])
                        paper += f"{'' if diff.startswith('-') else '+'}{diff})"
                    marked = cell["significance"] is not None or not {BETTER, WORSE} & set(shown)
                    if not shown.startswith(start) or paper not in shown or not marked:
                        found.append(f"{table['name']} {row['']} / {column}: {shown!r} is not "
                                     f"{start!r} ... {paper!r}")
    return found


def claim_and_figure_mismatches(text: str, record: dict[str, Any]) -> list[str]:
    """The claims tables.md shows under its tables, and the papers' figures (its Figures
    section), that the record does not hold as shown (claims.md's, every claim, are the
    record's `claims` too)."""
    found = []
    claims = {(c["table"], f"{c['claim']} ({c['source']})"): c for c in record["claims"]}
    for table in record["tables"]:
        body = text.split(f"## {table['name']}\n", 1)[1].split("\n## ", 1)[0]
        if "\nClaims about this table" not in body:
            continue
        for row in markdown_table(body.split("\nClaims about this table", 1)[1]):
            claim = claims.get((table["name"], row["Claim"]), {})
            if [claim.get(k) for k in ("verdict", "paper_numbers", "ours")] != [
                    row["On our runs"], row["Paper"], row["Ours"]] or not claim["checked"]:
                found.append(f"{table['name']}: {row} vs {claim}")
    shown = {figure["name"]: figure for figure in record["figures"]}
    figures = (text.split("\n## Figures\n", 1)[1].split("\n## ", 1)[0]
               if "\n## Figures\n" in text else "")
    for name, caption in re.findall(r"(?m)^### (.+)\n\n!\[.*\n\n(.+)$", figures):
        if shown.get(name, {}).get("caption") != caption:
            found.append(f"figure {name}: {caption!r} vs {shown.get(name)}")
    return found
