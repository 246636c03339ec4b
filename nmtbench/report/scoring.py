"""Under a table whose scores come from real data: what exactly each score column is.

BLEU has many variants (tokenizer, case, compound splitting, the script), and a paper's table
may mix them. For each BLEU, sacreBLEU and chrF column the report says how the harness scored
it (on which text, with which signatures, read from the runs' metrics files) and, from the
paper file's `bleu` record (papers/schema.yaml $defs.bleu), how the paper scored the numbers
it reports there. Toy-world columns get no such note: nothing was published about them.
"""

from __future__ import annotations

from typing import Any

from nmtbench import layout
from nmtbench.data.recipes import RECIPES, recipe_for
from nmtbench.records import read_result
from nmtbench.report.results import Results
from nmtbench.workflow.papers import BLEU, Column, Table
from nmtbench.workflow.plan import Cell, Plan, generated

# The columns described, and where each one's signature is in a metrics file
SIGNATURES = {"bleu_tokenized": ("bleu", "tokenized_signature"),
              "sacrebleu": ("bleu", "signature"),
              "chrf": ("chrf", "signature")}

# A `bleu` record's values in words (unknown ones are listed as not stated)
KINDS = {"tokenized": "tokenized BLEU", "sacrebleu": "sacreBLEU",
         "unknown": "BLEU of an unstated kind"}
TOKENIZERS = {"moses": "Moses-tokenized", "moses-aggressive": "Moses-tokenized (-a)",
              "wordpiece": "BERT-WordPiece-tokenized", "spacy": "spaCy-tokenized",
              "13a": "13a-tokenized (sacreBLEU's default)"}
COMPOUNDS = {True: "compounds split", False: "compounds not split"}
UNSTATED = (("tokenizer", "tokenizer"), ("case", "case"), ("compound_split", "compound splitting"))


def scoring_notes(plan: Plan, results: Results, table: Table) -> list[str]:
    """One note per score column (or columns that are one measurement) on real data, and
    the paper's sentence on rows it scored otherwise, with ours: all rows one way."""
    datasets = plan.config["datasets"]
    cells = plan.table_cells(table)
    notes: list[str] = []
    sources: dict[str, None] = {}  # where the paper says how it scored, once each
    for group in plan.column_groups(table):
        metric = table.columns[group[0]].metric
        if metric not in SIGNATURES:
            continue
        scored = [(table.columns[j], cell) for _, j, cell in cells
                  if j in group and not generated(datasets, cell.dataset)]
        if not scored:
            continue
        ours = {dataset: _ours(datasets, dataset, metric)
                for dataset in sorted({cell.dataset for _, cell in scored})}
        text = (next(iter(ours.values())) if len(set(ours.values())) == 1
                else "; ".join(f"on {dataset}: {how}" for dataset, how in ours.items()))
        found = signatures(plan, results, scored, metric)
        label = " / ".join(table.columns[j].label for j in group)
        note = (f"{label}: {text}; "
                + (f"signature {', '.join(f'`{s}`' for s in found)}."
                   if found else "no run scored yet."))
        records = [table.bleu_scoring(table.columns[j].key)
                   for j in group if _reports(table, table.columns[j])]
        sources.update(dict.fromkeys(r["where"] for r in records if r is not None))
        notes.append(note + "".join(f" The paper reported: {p}."
                                    for p in dict.fromkeys(map(_paper, records))))
    notes += [f"How the paper scored, as its file records it: {where}" for where in sources]
    if notes and table.bleu is not None and "rows_scored_differently" in table.bleu:
        notes.append(f"Rows the paper scored otherwise: {table.bleu['rows_scored_differently']} "
                     "The harness scores all its rows one way, as these notes say.")
    return notes


def _ours(datasets: dict[str, Any], dataset: str, metric: str) -> str:
    """How the harness scores a metric on a real dataset (its config: case, compounds)."""
    spec = datasets[dataset]
    case = "lowercased" if spec["lowercase"] else "cased"
    if metric == "sacrebleu":
        return f"sacreBLEU on detokenized text (the output Moses-detokenized), {case}"
    if metric == "chrf":
        return f"sacreBLEU's chrF (character 6-grams, beta 2) on detokenized text, {case}"
    compounds = "hyphenated compounds split" if spec.get("compound_split") else (
        "compounds not split")
    return (f"multi-bleu.perl (sacreBLEU tokenize none, no smoothing) on "
            f"{_tokenized(datasets, dataset)}, {case} text, {compounds}")


def _tokenized(datasets: dict[str, Any], dataset: str) -> str:
    """The text tokenized BLEU sees: the recipe's Moses tokens, or the release's own."""
    spec = datasets[dataset]
    if spec["kind"] == "reversed":
        return _tokenized(datasets, spec["of"])
    if spec["kind"] in RECIPES and not recipe_for(dataset, spec).tokenize:
        return "pre-tokenized (as released)"
    return "Moses-tokenized"


def signatures(plan: Plan, results: Results, scored: list[tuple[Column, Cell]],
               metric: str) -> list[str]:
    """The signatures of `metric` in the metrics files the cells read (those still made from
    what is there: `Results.current`)."""
    found = set()
    for column, cell in scored:
        if cell.status != "ok":
            continue
        for seed in plan.seeds:
            record = read_result(results.path(cell.file(layout.METRICS, seed,
                                                         split=column.split)))
            if record is None or not results.current(record, cell, seed, column.split):
                continue
            value: Any = record
            for key in SIGNATURES[metric]:
                value = value.get(key) if isinstance(value, dict) else None
            if isinstance(value, str):
                found.add(value)
    return sorted(found)


def _reports(table: Table, column: Column) -> bool:
    """Does the paper report a BLEU number in this column?"""
    return column.metric in BLEU and any(row.reported.get(column.key) is not None
                                         for row in table.rows)


def _paper(record: dict[str, Any] | None) -> str:
    """A `bleu` record in words: "tokenized BLEU on Moses-tokenized, lowercased text,
    compounds not split" (where the paper says so follows in a note of its own)."""
    if record is None:
        return "a BLEU whose scoring the paper file does not record"
    known = [w for w in (TOKENIZERS.get(record["tokenizer"]),
                         record["case"] if record["case"] != "unknown" else None) if w]
    text = KINDS[record["kind"]] + (f" on {', '.join(known)} text" if known else "")
    # sacreBLEU's own tokenizer splits no compounds: only tokenized BLEU's may have been
    unstated = [words for key, words in UNSTATED if record[key] == "unknown"
                and not (key == "compound_split" and record["kind"] == "sacrebleu")]
    if record["compound_split"] in COMPOUNDS and record["kind"] != "sacrebleu":
        text += f", {COMPOUNDS[record['compound_split']]}"
    if unstated:
        text += f"; not stated: {', '.join(unstated)}"
    return text
