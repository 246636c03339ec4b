"""A small paper file, configs on it, and run directories fabricated at the paths a plan lists.

Shared by test_report.py and test_figures.py: every number a test expects is written here, so a
cell or plotted point can be checked against the file it must come from.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import yaml

from nmtbench.workflow.config import check
from nmtbench.workflow.plan import Plan

REPO = Path(__file__).resolve().parents[2]
PAPER = "toypaper"
TABLE = f"{PAPER}.table1"
SWEEP, CURVE, BUCKETS = f"{PAPER}.figure1", f"{PAPER}.figure2", f"{PAPER}.figure3"
DATASET = "wmt14-en-de"  # the paper's dataset, configured under its own name (comparable)
OTHER_DATASET = "wmt14-en-fr"  # table2's second column: on the toy world, the same data
TAG_BASE = "beam5-lp1-fairseq-best"  # the config's decoding
TAG_BIG = "beam4-lp0p6-fairseq-best"  # trm-big's own decoding

SIG_CASED = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
SIG_LC = "nrefs:1|case:lc|eff:no|tok:13a|smooth:exp|version:2.6.0"
SIG_TOK = "nrefs:1|case:mixed|eff:no|tok:none|smooth:none|version:2.6.0"
SIG_CHRF = "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0"

# How the toy paper scored its BLEU (papers/schema.yaml $defs.bleu): as config/paper.yaml's
# WMT14 En-De is scored (cased, compounds split), so the config check lets it through
BLEU_RECORD = {"kind": "tokenized", "tokenizer": "moses", "case": "cased",
               "compound_split": True, "where": "Section 4, footnote 2",
               "rows_scored_differently": "Prior work is quoted, scored by its own script."}


def _column(label: str, dataset: str, metric: str) -> dict[str, str]:
    """A table column on the test split."""
    return {"label": label, "dataset": dataset, "split": "test", "metric": metric}


PAPER_YAML = {
    "paper": PAPER,
    "title": "A Toy Paper on BERT",
    "citation": "Doe, Roe. TOY 2024.",
    "source": "tests",
    "experiments": {
        "trm-base": {"method": "transformer", "size": "base"},
        "trm-big": {"method": "transformer", "size": "big",
                    "decode": {"beam": 4, "lenpen": 0.6}},
        "abnet": {"method": "future-method", "description": "not built yet"},
        "prior-work": {"method": "external"},
    },
    "tables": {
        "table1": {
            "caption": "Table 1: the toy table.",
            "baseline": "trm-base",
            "bleu": {**BLEU_RECORD, "columns": {"sacre": {
                "kind": "sacrebleu", "tokenizer": "13a", "compound_split": False,
                "where": "Section 4: sacreBLEU, nrefs:1|case:mixed|tok:13a"}}},
            "columns": {
                "bleu": _column("BLEU", DATASET, "bleu_tokenized"),
                "sacre": _column("sacreBLEU", DATASET, "sacrebleu"),
                "params": _column("#Params", DATASET, "params_trained"),
                "latency": _column("Latency", DATASET, "latency_ms"),
                "speedup": _column("Speedup", DATASET, "speedup"),
            },
            "rows": [
                {"experiment": "trm-base", "label": "Transformer",
                 "note": "the baseline (* in the paper)",
                 "reported": {"bleu": 27.3, "sacre": 26.4, "params": 74000000,
                              "latency": 30.0, "speedup": 1.0}},
                {"experiment": "trm-big", "label": "Transformer big",
                 "reported": {"bleu": 28.4, "sacre": None, "params": 800000,
                              "speedup": 1.9}},
                {"experiment": "abnet", "label": "AB-Net", "reported": {"bleu": 29.0}},
                {"experiment": "prior-work", "label": "Prior work", "reported": {"bleu": 28.0}},
            ],
        },
        "table2": {
            "caption": "Table 2: two language pairs.",
            "baseline": "trm-base",
            "bleu": {**BLEU_RECORD, "columns": {"en_fr": {"compound_split": False}}},
            "columns": {
                "en_de": _column("En-De", DATASET, "bleu_tokenized"),
                "en_fr": _column("En-Fr", OTHER_DATASET, "bleu_tokenized"),
                "params": _column("#Params", OTHER_DATASET, "params_trained"),
            },
            "rows": [
                {"experiment": "trm-base", "label": "Transformer",
                 "reported": {"en_de": 27.3, "en_fr": 38.1}},
                {"experiment": "abnet", "label": "AB-Net", "reported": {"en_de": 29.0}},
            ],
        },
    },
    "claims": [
        {"claim": "Big beats base", "source": "abstract", "table": "table1",
         "row": "trm-big", "than": "trm-base"},
        {"claim": "Base is smaller", "source": "Table 1", "table": "table1",
         "columns": ["params"], "row": "trm-base", "than": "trm-big"},
        {"claim": "Big is faster", "source": "Section 4", "table": "table1",
         "columns": ["speedup"], "row": "trm-big", "above": 1.0},
        {"claim": "AB-Net beats base", "source": "conclusion", "table": "table1",
         "columns": ["bleu"], "row": "abnet", "than": "trm-base"},
        {"claim": "Base beats AB-Net in two pairs", "source": "Table 2", "table": "table2",
         "row": "trm-base", "than": "abnet"},
    ],
    "figures": {
        "figure1": {
            "kind": "sweep", "caption": "BLEU and trained parameters by model size.",
            "dataset": DATASET, "split": "test",
            "x": {"label": "d_model", "values": [256, 512, 1024]},
            "experiments": ["abnet", "trm-base", "trm-big"],
            "y": "bleu_tokenized", "y2": "params_trained",
            "reported": {"y": [None, 27.3, 28.4], "y2": None},
        },
        "figure2": {
            "kind": "curve", "caption": "Valid BLEU per epoch.",
            "dataset": DATASET, "split": "valid", "axis": "epoch",
            "series": {"trm-base": "Base", "trm-big": "Big", "abnet": "AB-Net"},
            "reported": {"trm-base": [15.0, 25.0]},  # its 1st and 2nd epoch
        },
        "figure3": {
            "kind": "buckets", "caption": "BLEU by output length.",
            "dataset": DATASET, "split": "test", "bucket_cutoffs": [8, 16],
            "series": {"trm-base": "Base", "trm-big": "Big", "abnet": "AB-Net"},
            "reported": {"trm-big": [30.0, None, 20.0], "trm-base": None},
        },
    },
}

# Per experiment and seed: what its run files hold.
NUMBERS: dict[str, dict[int, dict[str, Any]]] = {
    "trm-base": {
        1: {"tokenized": 27.0, "sacrebleu": 26.0, "trained": 74_000_000, "latency": 30.0,
            "signature": SIG_CASED, "device": "cpu"},
        2: {"tokenized": 28.0, "sacrebleu": 26.5, "trained": 74_000_000, "latency": 32.0,
            "signature": SIG_CASED, "device": "cpu"},
    },
    "trm-big": {
        1: {"tokenized": 28.0, "sacrebleu": 27.0, "trained": 765_432, "latency": 15.0,
            "signature": SIG_LC, "device": "cuda"},
        2: {"tokenized": 29.0, "sacrebleu": 27.25, "trained": 765_432, "latency": 20.0,
            "signature": SIG_LC, "device": "cuda"},
    },
}
# valid events (epoch, valid_bleu) per experiment and seed; epoch 4 exists in seed 1 only.
CURVES = {
    "trm-base": {1: [(1, 10.0), (2, 20.0), (3, 30.0), (4, 35.0)],
                 2: [(1, 12.0), (2, 22.0), (3, 32.0)]},
    "trm-big": {1: [(1, 5.0), (2, 25.0), (3, 40.0)], 2: [(1, 7.0), (2, 27.0), (3, 41.0)]},
}
# BLEU per bucket (<8, [8,16), >=16) per experiment and seed; None: an empty bucket.
BUCKETS_BLEU = {
    "trm-base": {1: [20.0, 30.0, None], 2: [22.0, 31.0, 10.0]},
    "trm-big": {1: [25.0, 35.0, 12.0], 2: [27.0, 36.0, 14.0]},
}
BUCKET_LABELS = ["<8", "[8,16)", ">=16"]
# A bootstrap's p-values for each finding it writes
P_VALUES = {"better": {"p_better": 0.01, "p_worse": 0.99},
            "worse": {"p_better": 0.99, "p_worse": 0.01},
            "none": {"p_better": 0.4, "p_worse": 0.6}}


def write_papers(directory: Path, paper: dict[str, Any] = PAPER_YAML) -> Path:
    """The papers directory: the schema and `paper`."""
    directory.mkdir(parents=True, exist_ok=True)
    schema = yaml.safe_load((REPO / "papers" / "schema.yaml").read_text(encoding="utf-8"))
    schema["$defs"]["method"]["x-planned"].append("future-method")  # no code has it yet
    (directory / "schema.yaml").write_text(yaml.safe_dump(schema), encoding="utf-8")
    (directory / f"{PAPER}.yaml").write_text(yaml.safe_dump(paper, sort_keys=False),
                                             encoding="utf-8")
    return directory


def make_config(seeds: list[int], *, toy: bool = False,
                tables: list[str] | None = None) -> dict[str, Any]:
    """config/config.yaml with our table/figures; toy: the paper's dataset mapped to a toy
    world whose overrides make both Transformers `tiny` (so they share one run)."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text(encoding="utf-8"))
    config["tables"] = tables or [TABLE]
    config["seeds"] = seeds
    config.pop("pretraining")  # no run here loads a pre-trained checkpoint
    if toy:
        config["datasets"] = {"toy": {
            "kind": "toyworld", "vocab_size": {"src": 100, "tgt": 100},
            # test pairs: the latency's 5 warm-up and 100 timed sentences, and more
            "world": {"seed": 1, "train_pairs": 100, "valid_pairs": 10, "test_pairs": 110,
                      "mono_sentences": 100},
            "lowercase": False, "detok_lang": "en",
            "overrides": {"transformer": {"size": "tiny"}}}}
        config["dataset_map"] = {DATASET: "toy", OTHER_DATASET: "toy"}
    else:
        config["datasets"] = {DATASET: {"kind": "wmt14", "src_lang": "en", "tgt_lang": "de",
                                        "vocab_size": {"src": 100, "tgt": 100},
                                        "lowercase": False, "detok_lang": "de",
                                        "compound_split": True}}
        config.pop("dataset_map")
    return config


def make_plan(config: dict[str, Any], papers: Path) -> Plan:
    return check(config, REPO / "config" / "schema.yaml", papers)


def _owners(plan: Plan) -> dict[tuple[str, str], str]:
    """(run name, decode tag) -> the experiment of our paper it decodes."""
    owners = {}
    for experiment in NUMBERS:
        cell = plan.cell(DATASET, experiment, "test")
        owners[(cell.run, cell.tag)] = experiment
    return owners


def fabricate(plan: Plan, results: Path,
              verdicts: dict[tuple[str, int], str] | None = None) -> list[Path]:
    """Write every file plan.targets() lists under `results` (a copy of results/), plus each
    run's train_log.jsonl; return the run directories. verdicts: (experiment, seed) ->
    the bootstrap's significance (default "better")."""
    verdicts = verdicts or {}
    owners = _owners(plan)
    run_dirs = set()
    pattern = re.compile(r"results/runs/(?P<dataset>[^/]+)/(?P<run>[^/]+)/seed(?P<seed>\d+)/"
                         r"(?P<name>[^/]+)$")
    for target in plan.targets():
        match = pattern.fullmatch(target)
        assert match, target
        run, seed, name = match["run"], int(match["seed"]), match["name"]
        run_dir = results / Path(target).parent.relative_to("results")
        run_dir.mkdir(parents=True, exist_ok=True)
        run_dirs.add(run_dir)
        # trained with the settings and on the files the plan gives the run
        write(run_dir / "config.json", {
            "experiment": plan.run_settings(match["dataset"], run, seed),
            "paths": plan.run_paths(match["dataset"], run, seed), "inputs": {}})
        path = run_dir / name
        if name == "train_summary.json":
            experiment = run  # runs are named after an experiment that asks for them
            write(path, SUMMARY)
            log = [{"event": "train", "epoch": 1, "step": 10, "loss": 5.0}]
            log += [{"event": "valid", "epoch": e, "step": 10 * e, "valid_loss": 3.0,
                     "valid_bleu": b} for e, b in CURVES[experiment][seed]]
            log.append({"event": "valid", "epoch": 9, "step": 90, "valid_loss": 2.0})
            (run_dir / "train_log.jsonl").write_text(
                "".join(json.dumps(r) + "\n" for r in log), encoding="utf-8")
            continue
        kind, split, rest = name.split(".", 2)
        tag = rest.split(".", 1)[0] if kind != "latency" else split
        experiment = owners[(run, tag)]
        numbers = NUMBERS[experiment][seed]
        spec = plan.config["datasets"][match["dataset"]]  # scored as the config scores it
        scoring = {"lowercase": spec["lowercase"], "detok_lang": spec["detok_lang"],
                   "compound_split": bool(spec.get("compound_split"))}
        if kind == "metrics":
            record = metrics(split, numbers) | {"hyp": _hyp(run, tag, seed, split),
                                                "decode": plan.decode_for_tag(tag).record()}
            record["bleu"] |= {"compound_split": scoring["compound_split"],
                               "detok_lang": scoring["detok_lang"]}
            write(path, record)
        elif kind == "latency":  # latency.TAG.json, or latency.TAG.vs.BASELINE.BTAG.json
            own = numbers["latency"]
            record = {"latency_ms": {"median": own, "p90": own + 1}, "sentences": 100,
                      "device": numbers["device"], "trained": TRAINED}
            if rest != "json":
                _, brun, btag, _ = rest.split(".")
                base = NUMBERS[owners[(brun, btag)]][seed]["latency"]
                record |= {"baseline": {"latency_ms": {"median": base, "p90": base + 1},
                                        "trained": TRAINED},
                           "speedup": base / own}
            write(path, record)
        elif kind == "bootstrap":  # bootstrap.SPLIT.TAG.SCORE.vs.BASELINE.BTAG.json
            _, score, _, brun, btag, _ = rest.split(".")
            significance = verdicts.get((experiment, seed), "better")
            write(path, {"significance": significance, **P_VALUES[significance], "score": score,
                         "samples": 1000, "hyps": [_hyp(run, tag, seed, split),
                                                   _hyp(brun, btag, seed, split)], **scoring})
        elif kind == "buckets":  # and the decoding record of the hypotheses it bucketed
            write(path, {"cutoffs": [8, 16], "buckets": [
                {"bucket": label, "sentences": 0 if bleu is None else 3, "bleu": bleu}
                for label, bleu in zip(BUCKET_LABELS, BUCKETS_BLEU[experiment][seed],
                                       strict=True)], "hyp": _hyp(run, tag, seed, split)})
            write(run_dir / f"decode.{split}.{tag}.json",
                  plan.decode_for_tag(tag).record() | {"trained": TRAINED})
        else:
            raise AssertionError(f"unexpected target {target}")
    for run_dir in run_dirs:  # every output above was made from this training
        write(run_dir / "train_summary.json", SUMMARY)
    return sorted(run_dirs)


def metrics(split: str, numbers: dict) -> dict:
    return {
        "method": "transformer",
        "split": split,
        "bleu": {"sacrebleu": numbers["sacrebleu"], "signature": numbers["signature"],
                 "tokenized": numbers["tokenized"], "tokenized_signature": SIG_TOK,
                 "compound_split": True},
        "chrf": {"score": numbers["sacrebleu"] + 30.0, "signature": SIG_CHRF},
        "rouge": {"rouge1": 50.0, "rouge2": 30.0, "rougeL": 45.0},
        "params": {"total": numbers["trained"] * 2, "trained": numbers["trained"]},
        "train": {"seconds": 10.0, "steps": 100, "epochs": 3, "device": numbers["device"],
                  "best_valid_loss": 2.0, "train_pairs": 1000},
        "decode": {},
        "trained": TRAINED,
    }


def _hyp(run: str, tag: str, seed: int, split: str) -> str:
    """Stands for the digest of a run's hypotheses (metrics and bootstrap record it)."""
    return f"{run}.{tag}.seed{seed}.{split}"


def write(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


# Every fabricated run's train_summary.json, and its digest, which the outputs made from it
# record (nmtbench.provenance).
SUMMARY = {"steps": 100, "epochs": 3, "seconds": 1.0}
TRAINED = hashlib.sha256((json.dumps(SUMMARY, indent=2) + "\n").encode()).hexdigest()


def markdown_table(text: str) -> list[dict[str, str]]:
    """The first markdown table in `text` as a list of {header: cell}."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(line)

    def cells(line: str) -> list[str]:
        return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]

    header = cells(rows[0])
    assert set(rows[1]) <= set("|:- ")
    return [dict(zip(header, cells(line), strict=True)) for line in rows[2:]]


def section(text: str, title: str) -> str:
    """The body of the `## title` section of a markdown document."""
    body = text.split(f"## {title}\n", 1)[1]
    return body.split("\n## ", 1)[0]
