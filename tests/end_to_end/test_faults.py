"""Fault scenarios end to end: the real `train`, `decode` and `score` commands (in process) on a
tiny toy world, and the report's figures, under kills, corrupt files, divergence and a second
process on one run directory. Each ends as if nothing had happened, or with one line naming the
file (exit status 2 for bad input, 1 for a diverged training), never a traceback."""

from __future__ import annotations

import fcntl
import json
import logging
import math
import os
import shutil
import stat
import threading
import time
from dataclasses import replace
from pathlib import Path

import matplotlib.figure
import pytest
import torch
from fabricated_runs import (
    CURVE,
    DATASET,
    SUMMARY,
    TABLE,
    fabricate,
    make_config,
    make_plan,
    markdown_table,
    section,
    write_papers,
)
from safetensors.torch import save_file
from train_cli import train_arguments

from nmtbench import cli, layout
from nmtbench.data.tokenization import train_wordpiece
from nmtbench.errors import InputError
from nmtbench.fileio import atomic_directory, read_lines, write_text
from nmtbench.parts import checkpoints
from nmtbench.provenance import file_digest, path_digest
from nmtbench.report import figures
from nmtbench.report.results import Results
from nmtbench.report.tables import write_report
from nmtbench.run_paths import RunPaths
from nmtbench.training.trainer import Trainer

CFG = {"method": "transformer", "size": "tiny", "d_model": 32, "ffn_dim": 64, "n_heads": 2,
       "encoder_layers": 1, "decoder_layers": 1, "max_tokens": 800, "lr": 0.003,
       "warmup_updates": 5, "clip_norm": 1.0, "max_epochs": 2, "save_interval_updates": 4,
       "keep_last_epochs": 2, "log_interval": 1, "seed": 3}
# a learning rate that makes the tiny model's loss jump from 7 to thousands at step 3 (the
# largest a config may set)
DIVERGING = {**CFG, "lr": 10.0, "warmup_updates": 1, "save_interval_updates": 2}


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs (not even `except Exception` handlers)."""


def train(run: Path, cfg: dict, paths: RunPaths, *more: str) -> int:
    return cli.main(["train", "--run-dir", str(run), "--config", json.dumps(cfg),
                     *train_arguments(paths), "--device", "cpu", *more])


def decode(run: Path, toy_dir: Path, tmp_path: Path, *more: str) -> int:
    return cli.main(["decode", "--run-dir", str(run), "--src", str(toy_dir / "test.src"),
                     "--out", str(tmp_path / "hyp.txt"), "--device", "cpu", "--beam", "1",
                     *more])


def one_error_line(capsys) -> str:
    """The single `error:` line the command printed (and no traceback)."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


def corrupt(path: Path) -> None:
    """Overwrite eight bytes in the middle of a file (a bad sector, a stray write)."""
    data = bytearray(path.read_bytes())
    at = len(data) // 2
    data[at:at + 8] = bytes(255 - b for b in data[at:at + 8])
    path.write_bytes(bytes(data))


def finite(path: Path) -> bool:
    return all(torch.isfinite(t).all() for t in checkpoints.load(path)["model"].values())


@pytest.fixture(scope="module")
def trained(toy_paths, tmp_path_factory) -> Path:
    """A finished two-epoch run, copied by the tests that damage it."""
    run = tmp_path_factory.mktemp("trained") / "run"
    Trainer(run, CFG, toy_paths, device="cpu").run()
    return run


@pytest.fixture
def run_copy(trained, tmp_path) -> Path:
    return Path(shutil.copytree(trained, tmp_path / "run"))


# --- kills --------------------------------------------------------------------------------

def test_kill_mid_training_then_resume_with_a_cut_log_line(toy_paths, tmp_path, capsys, caplog,
                                                           trained):
    run = tmp_path / "run"
    trainer = Trainer(run, CFG, toy_paths, device="cpu")
    original_step = trainer._train_step

    def step_then_die(group):
        if trainer.step == 6:
            raise Killed
        return original_step(group)

    trainer._train_step = step_then_die
    with pytest.raises(Killed):
        trainer.run()
    log = run / "train_log.jsonl"
    with log.open("a") as f:
        f.write('{"step": 6, "epoch": 1, "event": "tra')  # the kill cut the line
    assert train(run, CFG, toy_paths) == 0, capsys.readouterr().err
    records = [json.loads(line) for line in log.read_text().splitlines()]
    steps = [r["step"] for r in records if r["event"] == "train"]
    assert steps == sorted(set(steps))
    assert "resumed from step 4" in [r.get("message") for r in records]
    assert f"{log}: line 7: dropped an incomplete last line" in caplog.text
    # the divergence rule's running loss level resumed too: it ends where a straight run's does
    ema = [checkpoints.load(r / "checkpoints" / "last.pt")["loss_ema"] for r in (run, trained)]
    assert ema[0] == pytest.approx(ema[1], rel=1e-5)


def test_a_corrupt_line_inside_the_log_stops_the_resume_with_one_line(run_copy, toy_paths,
                                                                      capsys):
    log = run_copy / "train_log.jsonl"
    lines = log.read_text().splitlines()
    lines[1] = lines[1][:10]
    log.write_text("\n".join(lines) + "\n")
    assert train(run_copy, {**CFG, "max_epochs": 3}, toy_paths) == 2
    assert one_error_line(capsys).startswith(f"error: {log}: line 2: invalid JSON")


def test_a_kill_during_a_checkpoint_save_leaves_no_temporary_file(run_copy, toy_paths):
    """A killed save leaves its hidden temporary file (a checkpoint's size); the next training
    removes it."""
    left = run_copy / "checkpoints" / ".last.pt.x1y2z3.tmp"
    left.write_bytes(b"half a checkpoint")
    Trainer(run_copy, {**CFG, "max_epochs": 3}, toy_paths, device="cpu").run()
    assert not left.exists()
    # and epoch1.pt, now beyond keep_last_epochs, went with its checksum record
    assert sorted(p.name for p in (run_copy / "checkpoints").iterdir()) == [
        "best.pt", "best.pt.sha256", "epoch2.pt", "epoch2.pt.sha256", "epoch3.pt",
        "epoch3.pt.sha256", "last.pt", "last.pt.sha256"]


@pytest.mark.parametrize("renamed", [False, True], ids=["before-rename", "after-rename"])
def test_a_kill_while_a_checkpoint_is_replaced_leaves_one_that_verifies(tmp_path, monkeypatch,
                                                                        renamed):
    """Killed after the record listing both digests was written, before or after the new file
    was renamed over the old one."""
    path = tmp_path / "last.pt"
    checkpoints.save(path, {"model": {"w": torch.zeros(3)}})
    original = checkpoints._write_checksums

    def killed(target, digests):
        if len(digests) == 2:  # the record for the rename: the old file's digest and the new
            original(target, digests)
        if len(digests) == 1 or not renamed:
            raise Killed

    monkeypatch.setattr(checkpoints, "_write_checksums", killed)
    with pytest.raises(Killed):
        checkpoints.save(path, {"model": {"w": torch.ones(3)}})
    monkeypatch.undo()
    assert len(Path(f"{path}.sha256").read_text().splitlines()) == 2
    expected = torch.ones(3) if renamed else torch.zeros(3)
    assert torch.equal(checkpoints.load(path)["model"]["w"], expected)


# --- corrupt checkpoints ------------------------------------------------------------------

def test_flipped_bytes_are_caught_when_decoding_averaging_and_warm_starting(
        run_copy, toy_dir, toy_paths, tmp_path, capsys):
    best = run_copy / "checkpoints" / "best.pt"
    corrupt(best)
    assert decode(run_copy, toy_dir, tmp_path) == 2
    assert one_error_line(capsys) == (f"error: {best}: corrupt checkpoint (its sha256 is not "
                                      f"the one recorded in {best}.sha256); delete {run_copy} "
                                      "to train it again")
    epoch = run_copy / "checkpoints" / "epoch1.pt"
    corrupt(epoch)
    assert decode(run_copy, toy_dir, tmp_path, "--average-last", "2") == 2
    assert f"error: {epoch}: corrupt checkpoint" in one_error_line(capsys)
    warm = replace(toy_paths, inputs={"init_from": str(best)})
    assert train(tmp_path / "warm", CFG, warm) == 2
    assert one_error_line(capsys).startswith(f"error: init_from: {best}: corrupt checkpoint")


def test_an_epoch_checkpoint_deleted_with_its_checksum_is_not_left_out_of_an_average(
        run_copy, toy_dir, tmp_path, capsys):
    """The run keeps epoch1.pt and epoch2.pt; the last one and its checksum file deleted by
    hand, an average of the last epoch averaged epoch1.pt instead, with exit 0. It is named,
    and so is the directory to delete (no job makes it again)."""
    epoch = run_copy / "checkpoints" / "epoch2.pt"
    epoch.unlink()
    Path(f"{epoch}.sha256").unlink()
    assert decode(run_copy, toy_dir, tmp_path, "--average-last", "1") == 2
    assert one_error_line(capsys) == (
        f"error: {epoch} is gone, but the run keeps it and averaging reads it; delete "
        f"{run_copy} to train it again")
    assert not (tmp_path / "hyp.txt").exists()


@pytest.mark.parametrize("changed", [{"max_epochs": 1}, {"patience": 1},
                                     {"lr_schedule": "linear"}],
                         ids=["fewer-epochs", "a-patience-it-may-have-met", "another-schedule"])
def test_a_finished_run_under_changed_settings_is_not_reported_as_theirs(run_copy, toy_paths,
                                                                          capsys, changed):
    """The train command the workflow reruns when the config changes: resuming would keep the
    old model (2 epochs where 1 is asked), one a patience might have stopped earlier, or one
    of another schedule; it stops instead, in one line saying how to train again, and the
    run's summary stays the old training's (test_trainer: a linear decay's length)."""
    summary = (run_copy / "train_summary.json").read_text()
    assert train(run_copy, {**CFG, **changed}, toy_paths) == 2
    assert one_error_line(capsys).endswith(f"; delete {run_copy} to train it again")
    assert (run_copy / "train_summary.json").read_text() == summary


def test_a_run_trained_again_alike_saves_the_same_weight_files(trained, toy_paths, tmp_path):
    """best.pt and the epoch checkpoints held the training's wall-clock seconds: a parent
    trained again alike (deleted, as a refusal advises) changed the digest its children
    recorded, and every child refused to resume, "trained on other inputs"."""
    again = tmp_path / "again"
    Trainer(again, CFG, toy_paths, device="cpu").run()
    for name in ("best.pt", "epoch1.pt", "epoch2.pt"):
        assert path_digest(again / "checkpoints" / name) == \
            path_digest(trained / "checkpoints" / name), name


def test_a_corrupt_last_checkpoint_stops_the_resume_with_one_line(run_copy, toy_paths, capsys):
    last = run_copy / "checkpoints" / "last.pt"
    corrupt(last)
    assert train(run_copy, {**CFG, "max_epochs": 3}, toy_paths) == 2
    assert one_error_line(capsys) == (
        f"error: {last}: corrupt checkpoint (its sha256 is not the one recorded in "
        f"{last}.sha256); the epoch checkpoints hold no optimizer state to resume from: "
        f"delete {run_copy} to train it again")


@pytest.mark.parametrize("checksum", [True, False], ids=["with-checksum", "without"])
def test_a_zero_byte_last_checkpoint_is_one_line(run_copy, toy_paths, capsys, checksum):
    last = run_copy / "checkpoints" / "last.pt"
    last.write_bytes(b"")
    if not checksum:
        Path(f"{last}.sha256").unlink()
    assert train(run_copy, {**CFG, "max_epochs": 3}, toy_paths) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"error: {last}: ")
    assert ("corrupt checkpoint" if checksum else "checksum file last.pt.sha256 is missing") \
        in line


def test_a_checkpoint_without_a_checksum_file_is_not_loaded(tmp_path):
    """Written by another program (or the record deleted): it cannot be verified."""
    path = tmp_path / "other.pt"
    torch.save({"model": {"w": torch.ones(2)}}, path)
    with pytest.raises(InputError, match=rf"^{path}: its checksum file other\.pt\.sha256 is "
                                         r"missing, so it cannot be verified$"):
        checkpoints.load(path)


def test_a_damaged_checksum_file_is_one_line(tmp_path):
    path = tmp_path / "best.pt"
    checkpoints.save(path, {"model": {"w": torch.ones(2)}})
    Path(f"{path}.sha256").write_text("not a digest\n")
    with pytest.raises(InputError, match=rf"^{path}\.sha256: line 1: not a sha256 line$"):
        checkpoints.load(path)


def test_checksum_files_go_with_their_checkpoints(trained):
    names = sorted(p.name for p in (trained / "checkpoints").iterdir())
    assert names == ["best.pt", "best.pt.sha256", "epoch1.pt", "epoch1.pt.sha256", "epoch2.pt",
                     "epoch2.pt.sha256", "last.pt", "last.pt.sha256"]
    line = (trained / "checkpoints" / "last.pt.sha256").read_text()
    assert line.endswith("  last.pt\n")  # `sha256sum -c last.pt.sha256` checks it by hand


# --- decoding only what the run was trained with ---------------------------------------------

def copied_tokenizers(run: Path, tmp_path: Path) -> Path:
    """The run's tokenizers copied beside it (the shared ones stay intact), its config.json
    pointing at the copies: same contents, so the same digests."""
    config_path = run / "config.json"
    config = json.loads(config_path.read_text())
    for side in ("src", "tgt"):
        key = f"{side}_tokenizer"
        copy = shutil.copytree(config["paths"][key], tmp_path / f"tok_{side}")
        config["paths"][key] = str(copy)
    config_path.write_text(json.dumps(config))
    return tmp_path / "tok_tgt"


@pytest.mark.parametrize("vocab_size", [450, 500], ids=["other-size", "same-size"])
def test_a_retrained_tokenizer_does_not_decode(run_copy, toy_dir, tmp_path, capsys,
                                               vocab_size):
    """Retrained on other text: of another size the weights would not fit (a traceback once),
    of the same size they would decode into other words (exit 0 once)."""
    tgt = copied_tokenizers(run_copy, tmp_path)
    assert decode(run_copy, toy_dir, tmp_path) == 0, capsys.readouterr().err
    train_wordpiece([toy_dir / "train.tgt"], tgt, vocab_size)
    assert decode(run_copy, toy_dir, tmp_path, "--average-last", "2") == 2
    assert one_error_line(capsys) == (f"error: {tgt}: changed since {run_copy} was trained; "
                                      f"delete {run_copy} to train it again")


def test_a_run_recording_no_digests_is_not_decoded(run_copy, toy_dir, tmp_path, capsys):
    """A config.json without the input digests every training records: what the run was
    trained on cannot be checked, so it is not decoded as if it could."""
    config_path = run_copy / "config.json"
    config = json.loads(config_path.read_text())
    del config["inputs"]
    config_path.write_text(json.dumps(config))
    assert decode(run_copy, toy_dir, tmp_path) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"error: {config_path}: ") and "'inputs'" in line


@pytest.mark.parametrize("other", ["config", "inputs"])
def test_another_runs_checkpoint_does_not_decode(run_copy, toy_dir, tmp_path, capsys, other):
    """best.pt and its .sha256 copied from a run of another seed, or one trained on other
    data: it verifies, but it is not this run's."""
    best = run_copy / "checkpoints" / "best.pt"
    state = checkpoints.load(best)
    if other == "config":
        state["config"] = json.dumps({**CFG, "seed": 4}, sort_keys=True)
    else:
        state["inputs"] = {**state["inputs"], "train_src": "0" * 64}
    checkpoints.save(best, state)  # with its own checksum record, as a copy brings
    assert decode(run_copy, toy_dir, tmp_path) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"error: {best}: not a checkpoint of {run_copy} (it was trained ")
    assert line.endswith(f"; delete {run_copy} to train it again")
    assert ("another config" if other == "config" else "other inputs") in line
    epoch = run_copy / "checkpoints" / "epoch1.pt"  # averaging checks each one it reads
    shutil.copy(best, epoch)
    shutil.copy(f"{best}.sha256", f"{epoch}.sha256")
    assert decode(run_copy, toy_dir, tmp_path, "--average-last", "2") == 2
    assert one_error_line(capsys).startswith(f"error: {epoch}: not a checkpoint of {run_copy}")


def test_a_checkpoint_that_lost_its_checksum_file_is_refused(run_copy, toy_dir, tmp_path,
                                                             capsys):
    """Every checkpoint is saved with a record beside it: one without it lost it."""
    best = run_copy / "checkpoints" / "best.pt"
    checkpoints.checksum_path(best).unlink()
    assert decode(run_copy, toy_dir, tmp_path) == 2
    assert one_error_line(capsys) == (
        f"error: {best}: its checksum file best.pt.sha256 is missing, so it cannot be "
        f"verified; delete {run_copy} to train it again")


# --- the report shows only numbers made from what is there ----------------------------------

def test_the_report_leaves_out_scores_of_other_hypotheses_or_tokenizers(tmp_path,
                                                                         monkeypatch):
    """metrics.json scored hypotheses decoded again since, or was made by a training whose
    tokenizer was retrained since: the cell is left out (it was shown as current)."""
    plan = make_plan(make_config([1]), write_papers(tmp_path / "papers"))
    results_dir = tmp_path / "results"
    fabricate(plan, results_dir)
    cell = plan.cell(DATASET, "trm-big", "test")
    results = Results(plan, results_dir)
    metrics = results.path(cell.file(layout.METRICS, 1, split="test"))
    hyp = results.path(cell.file(layout.HYP, 1, split="test"))
    monkeypatch.chdir(tmp_path)  # the run's paths are the workflow directory's
    tokenizer = tmp_path / plan.run_paths(cell.dataset, str(cell.run), 1)["tgt_tokenizer"]
    tokenizer.mkdir(parents=True)
    (tokenizer / "vocab.txt").write_text("a\nb\n")
    summary = results.path(cell.file(layout.TRAIN_SUMMARY, 1))
    summary.write_text(json.dumps({**SUMMARY, "inputs": {"tgt_tokenizer": path_digest(
        tokenizer)}}))
    hyp.write_text("the hypotheses\n")
    record = json.loads(metrics.read_text())
    metrics.write_text(json.dumps({**record, "trained": file_digest(summary),
                                   "hyp": file_digest(hyp)}))

    def bleu() -> float | None:
        results = Results(plan, results_dir)
        value = results.measure(cell, "test", "bleu_tokenized", 1, None)
        assert (value is None) == (metrics in results.stale)
        return value

    assert bleu() == 28.0
    hyp.write_text("decoded again\n")
    assert bleu() is None
    hyp.write_text("the hypotheses\n")
    assert bleu() == 28.0
    (tokenizer / "vocab.txt").write_text("a\nc\n")
    assert bleu() is None
    shutil.rmtree(tokenizer)  # a copied results directory without the data
    assert bleu() == 28.0


def test_the_report_refuses_a_toy_world_the_config_changed_and_leaves_out_one_made_again(
        tmp_path):
    """Issue 61's example: the config's toy world asks for another test set size. Before the
    workflow makes the world again, `report` by hand stops with one line (the world in data/
    records the settings it was made with); once it is made again, the scores of the old test
    set are left out and listed: no cell shows them."""
    plan = make_plan(make_config([1], toy=True), write_papers(tmp_path / "papers"))
    results_dir, prepared = tmp_path / "results", tmp_path / "data" / "toy" / "prepared"
    fabricate(plan, results_dir)
    world = plan.config["datasets"]["toy"]["world"]

    def make_world(world: dict) -> None:
        assert cli.main(["toyworld", "--out", str(prepared), "--world", json.dumps(world)]) == 0

    def big(plan) -> str:
        write_report(plan, results_dir, tmp_path / "report" / "tables.md", tmp_path)
        text = (tmp_path / "report" / "tables.md").read_text()
        rows = {row[""]: row for row in markdown_table(section(text, TABLE))}
        return rows["Transformer big"]["BLEU"]

    make_world(world)
    for metrics in results_dir.rglob("metrics.test.*.json"):  # scored on the world made now
        record = json.loads(metrics.read_text())
        record["ref"] = file_digest(prepared / "test.tgt")
        record["decode"]["src"] = file_digest(prepared / "test.src")
        metrics.write_text(json.dumps(record))
    assert big(plan).startswith("28.00")
    smaller = {**world, "test_pairs": world["test_pairs"] - 2}
    config = make_config([1], toy=True)
    config["datasets"]["toy"]["world"] = smaller
    changed = make_plan(config, tmp_path / "papers")
    with pytest.raises(InputError, match=(
            f"^{prepared}: the toy world there was made with other settings than config key "
            rf"'datasets.toy.world' gives it now \(test_pairs {world['test_pairs']} there, "
            rf"{smaller['test_pairs']} in the config\); run the workflow")):
        big(changed)
    make_world(smaller)
    assert big(changed) == "missing"
    assert "metrics.test." in (tmp_path / "report" / "tables.md").read_text().split(
        "## Left out")[1]


# --- divergence ---------------------------------------------------------------------------

@pytest.mark.parametrize("clip_norm", [1.0, 0.0], ids=["clipped", "unclipped"])
def test_a_huge_learning_rate_stops_naming_a_finite_checkpoint(toy_paths, tmp_path, capsys,
                                                               clip_norm):
    run = tmp_path / "run"
    assert train(run, {**DIVERGING, "clip_norm": clip_norm}, toy_paths) == 1
    line = one_error_line(capsys)
    assert line.startswith("error: training diverged at step 3: loss ")
    last = run / "checkpoints" / "last.pt"
    assert line.endswith(f"; the last good checkpoint is {last} (step 2)")
    assert checkpoints.load(last)["step"] == 2 and finite(last)
    assert not (run / "train_summary.json").exists()


def test_the_loss_rule_can_be_turned_off(toy_paths, tmp_path):
    """divergence_factor 0: a loss in the hundreds (clipped, finite gradients) trains on."""
    cfg = {**DIVERGING, "lr": 10.0, "max_epochs": 1, "divergence_factor": 0}
    assert Trainer(tmp_path / "run", cfg, toy_paths, device="cpu").run()["steps"] == 20
    with pytest.raises(FloatingPointError, match=r"over 10x its running level"):
        Trainer(tmp_path / "default", {**cfg, "divergence_factor": 10}, toy_paths,
                device="cpu").run()


def test_an_infinite_gradient_norm_stops_before_the_update(toy_paths, tmp_path):
    trainer = Trainer(tmp_path / "run", {**CFG, "save_interval_updates": 2}, toy_paths,
                      device="cpu")
    weight = next(trainer.model.parameters())
    weight.register_hook(lambda g: g * math.inf if trainer.step >= 3 else g)
    before = {}
    original_step = trainer._train_step

    def remember(group):
        before.update({k: v.clone() for k, v in trainer.model.state_dict().items()})
        return original_step(group)

    trainer._train_step = remember
    with pytest.raises(FloatingPointError, match=r"^training diverged at step 4: gradient "
                       r"norm is (inf|nan); the last good checkpoint is .*last\.pt \(step 2\)$"):
        trainer.run()
    for name, tensor in trainer.model.state_dict().items():  # that step was not made
        assert torch.equal(tensor, before[name]), name


def test_non_finite_weights_are_never_saved(toy_paths, tmp_path):
    """Weights gone nan at an update whose loss and gradients were finite: the save after it
    is refused, and the message says no checkpoint holds this training."""
    run = tmp_path / "run"
    trainer = Trainer(run, {**CFG, "save_interval_updates": 1}, toy_paths, device="cpu")
    original = trainer.optimizer.step

    def step_to_nan(*args, **kwargs):
        original(*args, **kwargs)
        with torch.no_grad():
            next(trainer.model.parameters()).fill_(math.nan)

    trainer.optimizer.step = step_to_nan
    with pytest.raises(FloatingPointError, match=r"^training diverged at step 1: model\.\S+ "
                       r"holds non-finite values; no checkpoint was saved before it: training "
                       r"again starts over$"):
        trainer.run()
    assert not list((run / "checkpoints").glob("*.pt"))


def test_resuming_a_checkpoint_with_nan_weights_is_one_line(run_copy, toy_paths, capsys):
    """Weights of a diverged training, saved (with their record) by a program that did not
    check them: resuming them cannot work."""
    last = run_copy / "checkpoints" / "last.pt"
    state = checkpoints.load(last)
    next(iter(state["model"].values())).fill_(math.nan)
    torch.save(state, last)
    checkpoints._write_checksums(last, [file_digest(last)])
    assert train(run_copy, {**CFG, "max_epochs": 3}, toy_paths) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"error: {last}: ")
    assert "holds non-finite values" in line


# --- two processes, one run directory -----------------------------------------------------

def test_a_second_trainer_waits_for_the_first_and_deletes_nothing(run_copy, toy_paths, capsys,
                                                                  caplog):
    """A job that gives up on the lock fails, and Snakemake then deletes its output: the
    other process's finished train_summary.json. So it waits, then resumes: 0 updates, the
    same summary, exit 0."""
    summary = (run_copy / "train_summary.json").read_bytes()
    codes = []
    with (run_copy / ".train.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other process, still training
        second = threading.Thread(target=lambda: codes.append(train(run_copy, CFG, toy_paths)))
        second.start()
        deadline = time.monotonic() + 60
        while "waiting" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.1)
        assert second.is_alive() and not codes
        assert (run_copy / "train_summary.json").read_bytes() == summary
    second.join(60)
    assert codes == [0]
    assert (run_copy / "train_summary.json").read_bytes() == summary
    assert f"{run_copy} is being trained by another process: waiting" in caplog.text


# --- half-written outputs -----------------------------------------------------------------

def test_a_kill_while_drawing_a_figure_leaves_the_old_one_whole(tmp_path, monkeypatch):
    plan = make_plan(make_config([1], tables=[CURVE]), write_papers(tmp_path / "papers"))
    fabricate(plan, tmp_path / "results")
    results, figure, out = Results(plan, tmp_path / "results"), plan.figures[0], tmp_path / "out"
    old = [p.read_bytes() for p in figures.draw(plan, results, figure, out).paths]
    original = matplotlib.figure.Figure.savefig

    def half_then_killed(self, fname, **kwargs):
        original(self, fname, **kwargs)
        Path(fname).write_bytes(Path(fname).read_bytes()[:100])
        raise Killed

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", half_then_killed)
    with pytest.raises(Killed):
        figures.draw(plan, results, figure, out)
    assert [(out / f"{figure.name}.{ext}").read_bytes() for ext in ("png", "pdf")] == old
    assert sorted(p.name for p in out.iterdir()) == [f"{figure.name}.pdf", f"{figure.name}.png"]


def test_a_curve_drawn_while_a_run_writes_its_log(tmp_path, caplog):
    """The report reads a log as the trainer does: a line cut short is left out."""
    plan = make_plan(make_config([1], tables=[CURVE]), write_papers(tmp_path / "papers"))
    fabricate(plan, tmp_path / "results")
    results, figure = Results(plan, tmp_path / "results"), plan.figures[0]
    whole = figures.draw(plan, results, figure, tmp_path / "a").series
    log = next((tmp_path / "results").rglob("train_log.jsonl"))
    with log.open("a") as f:
        f.write('{"step": 999, "event": "valid", "valid_bl')
    assert figures.draw(plan, results, figure, tmp_path / "b").series == whole
    assert "dropped an incomplete last line" in caplog.text


def test_files_written_through_temporary_files_honour_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        write_text(tmp_path / "a.txt", "x\n")
        checkpoints.save(tmp_path / "c.pt", {"model": {}})
        with atomic_directory(tmp_path / "d", "f") as d:
            (d / "f").write_text("x")
            (d / "sub").mkdir(mode=0o700)
            # as Hugging Face's save_pretrained writes weights: 0600, whatever the umask
            save_file({"w": torch.zeros(2)}, str(d / "sub" / "model.safetensors"))
    finally:
        os.umask(old)
    for name in ("a.txt", "c.pt", "c.pt.sha256", "d/f", "d/sub/model.safetensors"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o640, name
    for name in ("d", "d/sub"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o750, name


# --- a UTF-8 byte-order mark --------------------------------------------------------------

def test_a_byte_order_mark_does_not_change_bleu(tmp_path, capsys, caplog):
    text = "the cat sat on the mat .\nit is raining .\n"
    (tmp_path / "ref.txt").write_text(text, encoding="utf-8")
    (tmp_path / "hyp.txt").write_text("\ufeff" + text, encoding="utf-8")
    assert cli.main(["score", "--hyp", str(tmp_path / "hyp.txt"),
                     "--ref", str(tmp_path / "ref.txt")]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["tokenized"] == pytest.approx(100) and scores["sacrebleu"] == pytest.approx(100)
    assert f"{tmp_path / 'hyp.txt'}: dropped a UTF-8 byte-order mark" in caplog.text


def test_only_a_leading_byte_order_mark_is_dropped(tmp_path, caplog):
    path = tmp_path / "x.txt"
    path.write_text("\ufeffa\n\ufeffb\n", encoding="utf-8")  # inside a line: a character
    with caplog.at_level(logging.WARNING):
        assert read_lines(path) == ["a", "\ufeffb"]


def test_a_byte_order_mark_does_not_change_a_trained_vocabulary(toy_dir, tmp_path):
    from nmtbench.data.tokenization import load_tokenizer, train_wordpiece

    text = (toy_dir / "train.tgt").read_text(encoding="utf-8")
    vocabularies = []
    for name, prefix in (("plain", ""), ("bom", "\ufeff")):
        (tmp_path / name).write_text(prefix + text, encoding="utf-8")
        train_wordpiece([tmp_path / name], tmp_path / f"tok_{name}", 300)
        vocabularies.append(load_tokenizer(tmp_path / f"tok_{name}").get_vocab())
    assert vocabularies[0] == vocabularies[1]


def test_a_second_workflow_in_the_same_directory_stops_before_any_job(tmp_path):
    """Snakemake's own lock is off (it survives a kill -9); the workflow's OS lock keeps a
    second invocation from rerunning the first's jobs and deleting their outputs, also one
    started with --no-hooks (which skips `onstart`), and one deleting the outputs itself
    (--delete-all-output). A dry run takes no lock, and the lock goes with its process."""
    from smoke import snakemake

    (tmp_path / ".snakemake").mkdir()
    with (tmp_path / ".snakemake" / "nmtbench-workflow.lock").open("a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("4242\n")
        held.flush()
        seconds = [snakemake(tmp_path, "--cores", "1", *how) for how in (
            ["--until", "toyworld"], ["--until", "toyworld", "--no-hooks"],
            ["--delete-all-output"])]
        assert snakemake(tmp_path, "-n", "--cores", "1", "--until", "toyworld").returncode == 0
        assert snakemake(tmp_path, "-n", "--cores", "1", "--delete-all-output").returncode == 0
    for second in seconds:
        assert second.returncode == 1 and "Traceback" not in second.stderr
        assert (f"error: another workflow (process 4242) is running jobs in {tmp_path}; wait "
                "for it to end, or stop it") in second.stderr.splitlines()
    assert not (tmp_path / "data").exists()
    lock = tmp_path / ".snakemake" / "nmtbench-workflow.lock"
    lock.unlink()
    lock.mkdir()  # a careless mkdir: no lock to take, one line
    second = snakemake(tmp_path, "--cores", "1", "--until", "toyworld")
    assert second.returncode == 1 and "Traceback" not in second.stderr
    assert (f"error: cannot open the workflow's lock {lock} (Is a directory); delete it if it "
            "is not a file") in second.stderr.splitlines()
    lock.rmdir()
    assert snakemake(tmp_path, "--cores", "1", "--until", "toyworld").returncode == 0
