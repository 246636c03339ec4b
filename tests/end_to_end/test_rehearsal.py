"""The rehearsal of config/paper.yaml on a CPU (docs/rehearsal.md): its stand-in checkpoints and
the loopback hub that serves them to the real snapshot code, the faults that stop it at
planning with one line, and (opt-in, `-m rehearsal`: hours on two cores) the whole run to a
filled report marked as a rehearsal."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hub_server import HubServer
from hub_stand_ins import write_stand_in
from huggingface_hub import constants
from rehearsal import PAPER, PROFILE, SCALE, overlay_overrides, plan_of, rehearse
from rehearsal_text import rehearsal_text
from release_fixtures import ROOT, build_releases, server_config

from nmtbench.errors import InputError
from nmtbench.parts.pretrained import KNOWN_CONFIGS, check_on_hub


@pytest.mark.parametrize("name", ["bert-base-german-cased", "gpt2"])
def test_a_stand_in_is_the_hub_model_at_a_stated_fraction_of_its_width(tmp_path, name):
    from transformers import AutoConfig, AutoTokenizer

    write_stand_in(name, tmp_path / name, 8, ["Das Haus ist klein .", "the house is small ."])
    config = AutoConfig.from_pretrained(tmp_path / name)
    model_type, settings = KNOWN_CONFIGS[name]
    width = "hidden_size" if model_type == "bert" else "n_embd"
    assert config.model_type == model_type
    assert getattr(config, width) * 8 == settings[width]
    assert {k: getattr(config, k) for k in settings if k not in (width, "intermediate_size")} \
        == {k: v for k, v in settings.items() if k not in (width, "intermediate_size")}
    assert len(AutoTokenizer.from_pretrained(tmp_path / name)) == settings["vocab_size"]
    assert (tmp_path / name / "model.safetensors").is_file()


def _hub_repos(root: Path, without_config: str | None = None) -> Path:
    """Repositories of every hub checkpoint: a config.json and weights (their file list is
    what planning reads), one of them without its config.json."""
    for name in KNOWN_CONFIGS:
        (root / name).mkdir(parents=True)
        (root / name / "model.safetensors").write_bytes(b"")
        if name != without_config:
            (root / name / "config.json").write_text("{}")
    return root


def test_planning_asks_the_hub_for_each_snapshot_s_files(tmp_path, monkeypatch):
    with HubServer(_hub_repos(tmp_path / "hub", without_config="bert-large-cased")) as hub:
        monkeypatch.setattr(constants, "ENDPOINT", hub.url)
        check_on_hub(["bert-base-cased", "gpt2"])
        with pytest.raises(InputError) as err:
            check_on_hub(["bert-base-cased", "bert-large-cased"])
        assert str(err.value) == (f"checkpoint 'bert-large-cased': the hub repository has no "
                                  f"config.json ({hub.url})")
        with pytest.raises(InputError, match="'bert-huge': no such repository on the hub"):
            check_on_hub(["bert-huge"])
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        check_on_hub(["bert-large-cased"])  # offline: the snapshot job will say
    monkeypatch.delenv("HF_HUB_OFFLINE")
    check_on_hub(["bert-large-cased"])  # the hub out of reach: the same


def test_the_loopback_hub_serves_the_real_snapshot_code(tmp_path):
    write_stand_in("bert-base-cased", tmp_path / "hub" / "bert-base-cased", 8, ["a b c ."])
    with HubServer(tmp_path / "hub") as hub:
        env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf-home")}
        env.pop("HF_HUB_OFFLINE", None)
        result = subprocess.run([sys.executable, "-m", "nmtbench", "snapshot", "bert-base-cased",
                                 "--out", str(tmp_path / "snapshot")], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    served = tmp_path / "hub" / "bert-base-cased"
    for file in ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"):
        assert (tmp_path / "snapshot" / file).read_bytes() == (served / file).read_bytes()


def _planning_configs(tmp_path: Path) -> list[Path]:
    """The rehearsal's configs but the overlay (planning reads the hub's architectures)."""
    build_releases(tmp_path / "served", rehearsal_text, SCALE)
    sources = server_config(tmp_path / "served", "http://127.0.0.1:9", tmp_path / "sources.yaml")
    return [PAPER, PROFILE, sources]


def _start(tmp_path: Path, configs: list[Path], env: dict[str, str] | None = None):
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
           "--directory", str(tmp_path), "--cores", "2", "--configfile", *map(str, configs)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)


def _stopped_at_planning(tmp_path: Path, result) -> str:
    """The one error line of a workflow that stopped before its first job."""
    assert result.returncode == 1, result.stderr[-3000:]
    assert not re.search(r"^(local)?rule \w+:", result.stdout + result.stderr, re.M)
    assert not any((tmp_path / d).exists() for d in ("data", "results", "logs"))
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, errors
    return errors[0]


@pytest.mark.slow
def test_the_overlay_logs_valid_bleu_only_where_a_curve_draws_it(tmp_path):
    """The paper config logs valid BLEU in every decoded run; the rehearsal only in those a
    curve figure draws, which keep it."""
    def logged(plan) -> dict[tuple[str, str], bool]:
        return {(d, r): plan.run_settings(d, r, 1)["valid_bleu"] for d, r in plan.trained_runs()
                if plan.decoding(d, r) != "none"}

    configs = _planning_configs(tmp_path)
    paper = plan_of(*configs)
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(yaml.safe_dump(overlay_overrides(paper, 16)))
    rehearsal = plan_of(*configs, overlay)
    drawn = {e for f in rehearsal.catalogue.figures.values() if f.kind == "curve"
             for e in f.experiments()}
    assert all(logged(paper).values())
    runs = logged(rehearsal)
    assert len(runs) == len(logged(paper))
    assert {run: on for run, on in runs.items() if on} == {
        (d, r): True for d, r in runs if set(rehearsal.sharing(d, r)) & drawn}
    assert 0 < sum(runs.values()) < len(runs)


@pytest.mark.slow
def test_a_parent_of_another_vocabulary_stops_the_rehearsal_at_planning(tmp_path):
    fault = tmp_path / "fault.yaml"
    fault.write_text(yaml.safe_dump({"datasets": {"wmt14-en-de": {"overrides": {
        "transformer-big": {"vocabulary": "joint", "share_embeddings": True}}}}}))
    offline = {**os.environ, "HF_HUB_OFFLINE": "1"}  # as on cluster nodes: no hub asked
    result = _start(tmp_path, [*_planning_configs(tmp_path), fault], offline)
    line = _stopped_at_planning(tmp_path, result)
    assert re.fullmatch(r"config error: run wmt14-en-de/[\w-]+, init_from "
                        r"wmt14-en-de/transformer-big: .*", line), line


@pytest.mark.slow
def test_a_hub_checkpoint_without_its_config_stops_the_rehearsal_at_planning(tmp_path):
    configs = _planning_configs(tmp_path)
    with HubServer(_hub_repos(tmp_path / "hub", "bert-base-german-cased")) as hub:
        env = {**os.environ, "HF_ENDPOINT": hub.url}
        env.pop("HF_HUB_OFFLINE", None)
        result = _start(tmp_path, configs, env)
    line = _stopped_at_planning(tmp_path, result)
    assert line == (f"config error: checkpoint 'bert-base-german-cased': the hub repository "
                    f"has no config.json ({hub.url})")


@pytest.mark.rehearsal
def test_the_rehearsal_runs_every_experiment_to_a_filled_report(tmp_path):
    """Every experiment of config/paper.yaml, a handful of updates each, to tables.md: marked
    as a rehearsal, every cell of an implemented row a number, nothing left out as stale."""
    record = rehearse(tmp_path, "--keep-going")
    print(json.dumps(record))
    assert record["returncode"] == 0, (tmp_path / "snakemake.log").read_text()[-3000:]
    assert "**A rehearsal, not results**" in (tmp_path / "results" / "tables.md").read_text()
    report = json.loads((tmp_path / "results" / "tables.json").read_text())
    cells = [cell for table in report["tables"] for cell in table["cells"]]
    assert not [c for c in cells if c["status"] == "missing"]
    empty = [(c["table"], c["row"], c["column"]) for c in cells
             if c["status"] == "ok" and c["ours"]["mean"] is None]
    assert not empty, empty[:10]
    assert not report["stale"]
    assert all(Path(tmp_path / "results" / f).is_file()
               for figure in report["figures"] for f in figure["files"])
