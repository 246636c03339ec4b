"""`results/tables.md` rendered from fabricated run directories, cell by cell."""

from __future__ import annotations

import hashlib
import json
import re
from importlib import metadata
from pathlib import Path

import pytest

from nmtbench import report
from nmtbench.errors import InputError
from nmtbench.report import load_run, write_tables

SIG_CASED = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
SIG_LC = "nrefs:1|case:lc|eff:no|tok:13a|smooth:exp|version:2.6.0"
SIG_TOK = "nrefs:1|case:mixed|eff:no|tok:none|smooth:none|version:2.6.0"

CONFIG = {
    "tables": ["abnet2020.table2"],
    "datasets": {"toy": {"kind": "toyworld"}},
    "seeds": [1, 2],
    "table_definitions": {
        "abnet2020.table2": {
            "caption": "Table 2: BLEU on the toy world",
            "dataset": "toy",
            "rows": ["transformer-tiny", "abnet-tiny", "ctnmt-tiny"],
        },
        "unrequested": {"caption": "Never rendered", "dataset": "toy", "rows": ["nothing"]},
    },
}


def metrics(experiment: str, seed: int, tokenized: float, sacre: float, seconds: float,
            total: int = 1234567, trained: int = 1234567, signature: str = SIG_CASED,
            device: str = "cpu") -> dict:
    return {
        "dataset": "toy", "experiment": experiment, "seed": seed, "split": "test",
        "bleu": {"sacrebleu": sacre, "signature": signature, "tokenized": tokenized,
                 "tokenized_signature": SIG_TOK},
        "params": {"total": total, "trained": trained},
        "train": {"seconds": seconds, "steps": 3000, "device": device},
        "decode": {"beam": 5, "lenpen": 1.0, "seconds": 4.2},
    }


def make_runs(root: Path) -> list[Path]:
    """Two seeds of the baseline, abnet with seed 2 unfinished, ctnmt with no finished run."""
    finished = {
        ("transformer-tiny", 1): metrics("transformer-tiny", 1, 60.0, 58.1, 192),
        ("transformer-tiny", 2): metrics("transformer-tiny", 2, 62.5, 59.3, 200),
        ("abnet-tiny", 1): metrics("abnet-tiny", 1, 70.4, 68.25, 3725, total=2000000,
                                   trained=765432, signature=SIG_LC, device="cuda"),
    }
    run_dirs = []
    for experiment in ("transformer-tiny", "abnet-tiny", "ctnmt-tiny"):
        for seed in (1, 2):
            relative = Path("results/runs/toy") / experiment / f"seed{seed}"
            (root / relative).mkdir(parents=True)
            if (experiment, seed) in finished:
                (root / relative / "metrics.json").write_text(
                    json.dumps(finished[experiment, seed]), encoding="utf-8")
            run_dirs.append(relative)
    return run_dirs


def section(text: str, title: str) -> str:
    body = text.split(f"## {title}\n", 1)[1]
    return body.split("\n## ", 1)[0]


def table(text: str) -> list[dict[str, str]]:
    """The first markdown table in `text` as a list of {header: cell}."""
    rows = [line for line in text.splitlines() if line.startswith("|")]

    def cells(line: str) -> list[str]:
        return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]

    header = cells(rows[0])
    assert set(rows[1]) <= set("|:- ")
    return [dict(zip(header, cells(line), strict=True)) for line in rows[2:]]


@pytest.fixture
def rendered(tmp_path: Path) -> str:
    out = tmp_path / "results" / "tables.md"
    write_tables(CONFIG, make_runs(tmp_path), out, tmp_path)
    return out.read_text(encoding="utf-8")


def test_table_cells(rendered: str) -> None:
    text = section(rendered, "abnet2020.table2")
    assert "Table 2: BLEU on the toy world" in text
    rows = {row["experiment"]: row for row in table(text)}
    assert list(rows) == ["transformer-tiny", "abnet-tiny", "ctnmt-tiny"]

    base = rows["transformer-tiny"]
    assert base["BLEU (tokenized)"] == "61.25 ± 1.77"  # mean(60.0, 62.5), sample std
    assert base["sacreBLEU"] == "58.70 ± 0.85"
    assert base["#params total"] == "1,234,567"
    assert base["#params trained"] == "1,234,567"
    assert base["training time"] == "3m 16s ± 5.7s"  # mean(192, 200) s, sample std 5.66 s
    assert base["seeds"] == "2"
    assert base["runs"] == ("[seed1](runs/toy/transformer-tiny/seed1) "
                            "[seed2](runs/toy/transformer-tiny/seed2)")

    abnet = rows["abnet-tiny"]
    assert abnet["BLEU (tokenized)"] == "70.40"
    assert abnet["sacreBLEU"] == "68.25"
    assert abnet["#params total"] == "2,000,000"
    assert abnet["#params trained"] == "765,432"
    assert abnet["training time"] == "1h 02m"
    assert abnet["seeds"] == "1 of 2 (seed2 missing)"
    assert abnet["runs"] == ("[seed1](runs/toy/abnet-tiny/seed1) "
                             "[seed2](runs/toy/abnet-tiny/seed2) missing")

    ctnmt = rows["ctnmt-tiny"]
    for column in ("BLEU (tokenized)", "sacreBLEU", "#params total", "#params trained",
                   "training time"):
        assert ctnmt[column] == "missing"
    assert ctnmt["seeds"] == "0 of 2 (seed1, seed2 missing)"


def test_only_requested_tables_and_toy_notice(rendered: str) -> None:
    assert "Never rendered" not in rendered
    assert "## unrequested" not in rendered
    preamble = rendered.split("\n## ", 1)[0]
    assert "measured by this harness" in preamble
    assert "toy-world numbers; not comparable to the papers" in preamble


def test_no_toy_notice_for_real_datasets(tmp_path: Path) -> None:
    config = {"tables": ["t"], "seeds": [1],
              "table_definitions": {"t": {"caption": "c", "dataset": "iwslt14-de-en",
                                          "rows": ["transformer"]}}}
    out = tmp_path / "tables.md"
    write_tables(config, [], out, tmp_path)
    text = out.read_text(encoding="utf-8")
    assert "measured by this harness" in text
    assert "toy-world" not in text
    rows = table(section(text, "t"))
    assert rows[0]["BLEU (tokenized)"] == "missing"
    assert rows[0]["runs"] == "[seed1](results/runs/iwslt14-de-en/transformer/seed1) missing"


def test_single_seed_cells_keep_two_decimals(tmp_path: Path) -> None:
    run_dir = tmp_path / "results" / "runs" / "toy" / "transformer-tiny" / "seed1"
    run_dir.mkdir(parents=True)
    run = metrics("transformer-tiny", 1, 70.4, 68.0, 42.34)
    (run_dir / "metrics.json").write_text(json.dumps(run), encoding="utf-8")
    config = {**CONFIG, "seeds": [1], "table_definitions": {"abnet2020.table2": {
        "caption": "c", "dataset": "toy", "rows": ["transformer-tiny"]}}}
    out = tmp_path / "results" / "tables.md"
    write_tables(config, [run_dir], out, tmp_path)
    text = out.read_text(encoding="utf-8")
    [row] = table(section(text, "abnet2020.table2"))
    assert (row["BLEU (tokenized)"], row["sacreBLEU"]) == ("70.40", "68.00")
    assert (row["training time"], row["seeds"]) == ("42.3s", "1")
    [listed] = table(section(text, "All runs"))
    assert (listed["BLEU (tokenized)"], listed["sacreBLEU"]) == ("70.40", "68.00")


def test_all_runs_lists_every_run_dir(rendered: str) -> None:
    rows = table(section(rendered, "All runs"))
    listed = [(row["experiment"], row["seed"]) for row in rows]
    assert listed == [(e, s) for e in ("abnet-tiny", "ctnmt-tiny", "transformer-tiny")
                      for s in ("1", "2")]
    by_run = {(row["experiment"], row["seed"]): row for row in rows}
    assert by_run["transformer-tiny", "2"]["BLEU (tokenized)"] == "62.50"
    assert by_run["transformer-tiny", "2"]["training time"] == "3m 20s"
    assert by_run["abnet-tiny", "1"]["device"] == "cuda"
    assert by_run["abnet-tiny", "2"]["sacreBLEU"] == "missing"
    assert by_run["ctnmt-tiny", "1"]["run"] == "[seed1](runs/toy/ctnmt-tiny/seed1)"


def test_provenance(rendered: str) -> None:
    text = section(rendered, "Provenance")
    digest = hashlib.sha256(json.dumps(CONFIG, sort_keys=True).encode()).hexdigest()[:12]
    assert f"config hash: {digest}" in text
    assert "git commit: uncommitted/unknown" in text  # tmp_path is not a git repository
    assert "training devices seen in runs: cpu, cuda" in text
    assert f"`{SIG_CASED}`" in text and f"`{SIG_LC}`" in text and f"`{SIG_TOK}`" in text
    assert text.count("`nrefs:") == 3  # distinct signatures only
    for name in ("torch", "transformers", "sacrebleu", "pandas"):
        assert f"{name} {metadata.version(name)}" in text


def test_provenance_names_uninstalled_libraries(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "LIBRARIES", ("pandas", "no-such-library-nmtbench"))
    out = tmp_path / "tables.md"
    write_tables({"tables": [], "seeds": [1]}, [], out, tmp_path)
    assert "no-such-library-nmtbench not installed" in out.read_text(encoding="utf-8")


def test_rendering_is_deterministic(tmp_path: Path) -> None:
    run_dirs = make_runs(tmp_path)
    first, second = tmp_path / "a.md", tmp_path / "b.md"
    write_tables(CONFIG, run_dirs, first, tmp_path)
    write_tables(CONFIG, list(reversed(run_dirs)), second, tmp_path)
    body = [p.read_text(encoding="utf-8").split("## Provenance")[0] for p in (first, second)]
    assert body[0] == body[1]


def test_load_run(tmp_path: Path) -> None:
    assert load_run(tmp_path) is None
    run = metrics("x", 1, 1.0, 2.0, 3.0)
    (tmp_path / "metrics.json").write_text(json.dumps(run), encoding="utf-8")
    assert load_run(tmp_path) == run


def test_load_run_rejects_bad_metrics(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    path.write_text('{\n"bleu": {,\n}', encoding="utf-8")
    with pytest.raises(InputError, match=r"metrics\.json: line 2: invalid JSON"):
        load_run(tmp_path)
    run = metrics("x", 1, 1.0, 2.0, 3.0)
    del run["params"]["trained"]
    path.write_text(json.dumps(run), encoding="utf-8")
    with pytest.raises(InputError, match=r"metrics\.json: missing key 'params\.trained'"):
        load_run(tmp_path)
    run = metrics("x", 1, 1.0, 2.0, 3.0)
    run["bleu"]["tokenized"] = "62.0"
    path.write_text(json.dumps(run), encoding="utf-8")
    with pytest.raises(InputError, match=r"'bleu\.tokenized' must be a number"):
        load_run(tmp_path)


def test_unknown_table_names_the_key(tmp_path: Path) -> None:
    config = {**CONFIG, "tables": ["abnet2020.table9"]}
    with pytest.raises(InputError, match=r"table_definitions\.abnet2020\.table9"):
        write_tables(config, [], tmp_path / "tables.md", tmp_path)
