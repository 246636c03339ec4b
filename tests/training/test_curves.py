"""Training curves: the TensorBoard event files of a training and a pre-training, read back with
TensorBoard's own reader; a resumed run's curves not doubled; W&B in offline mode, and its
absence."""

import json
import logging
import random
import struct
import sys
from pathlib import Path

import pytest
import torch
from killed_training import train_until_killed
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tiny_checkpoints import TINY_TRANSFORMER as CFG

from nmtbench import provenance
from nmtbench.data.tokenization import train_wordpiece
from nmtbench.parts import checkpoints
from nmtbench.training.curves import scalars
from nmtbench.training.pretraining import pretrain
from nmtbench.training.trainer import Trainer

# test_pretraining.py's tiny pre-training
TINY_PRETRAINING = {"d_model": 32, "ffn_dim": 64, "n_heads": 2, "layers": 2, "max_positions": 64,
                    "max_tokens": 256, "max_updates": 3, "warmup_updates": 1,
                    "heldout_sentences": 20, "log_interval": 1}
NAMED = ("train/loss", "train/grad_norm", "train/lr", "train/tokens_per_second", "lr/all",
         "valid/loss", "valid/best_loss", "valid/bleu")


def events(directory: Path) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value)]} as TensorBoard reads the event files (purging what a resumed
    run's writer marks as replayed)."""
    reader = EventAccumulator(str(directory))
    reader.Reload()
    return {tag: [(e.step, e.value) for e in reader.Scalars(tag)]
            for tag in reader.Tags()["scalars"]}


def train_log(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]


def logged(run: Path, event: str, key: str) -> list[tuple[int, float]]:
    return [(r["step"], r[key]) for r in train_log(run) if r["event"] == event and key in r]


def approx(points: list[tuple[int, float]]) -> list:
    """Points as the event files hold them (values in float32)."""
    return [(step, pytest.approx(value, rel=1e-6)) for step, value in points]


def test_scalars_of_the_log_records():
    assert scalars({"event": "train", "step": 3, "epoch": 1, "loss": 2.5, "nll": 2.0,
                    "ntokens": 90.0, "lr": 1e-3, "lr_biases and norms": 5e-4,
                    "grad_norm": 0.7}) == {
        "train/loss": 2.5, "train/nll": 2.0, "train/ntokens": 90.0, "train/lr": 1e-3,
        "lr/biases_and_norms": 5e-4, "train/grad_norm": 0.7}
    assert scalars({"event": "valid", "valid_loss": 3.0, "best_valid_loss": 2.9,
                    "valid_bleu": 12.5, "seconds": 4.2}) == {
        "valid/loss": 3.0, "valid/best_loss": 2.9, "valid/bleu": 12.5}
    assert scalars({"event": "heldout", "accuracy": 0.5, "perplexity": 9.0}) == {
        "heldout/accuracy": 0.5, "heldout/perplexity": 9.0}
    assert scalars({"event": "warm_start", "missing": [], "from": "x"}) == {}
    assert scalars({"event": "resume", "message": "resumed from step 4"}) == {}


def test_a_run_writes_the_named_scalars_as_its_log_holds_them(toy_paths, tmp_path):
    run = tmp_path / "run"
    Trainer(run, {**CFG, "max_epochs": 2, "valid_bleu": True}, toy_paths, device="cpu").run()
    (directory,) = [p for p in run.iterdir() if p.name == "tensorboard"]
    assert len(list(directory.glob("events.out.tfevents.*"))) == 1
    curves = events(directory)
    assert set(NAMED) <= set(curves)
    steps = [step for step, _ in curves["train/loss"]]
    assert steps == list(range(1, len(steps) + 1))  # log_interval 1: every update, once
    assert curves["train/loss"] == approx(logged(run, "train", "loss"))
    assert curves["train/grad_norm"] == approx(logged(run, "train", "grad_norm"))
    assert curves["lr/all"] == approx(logged(run, "train", "lr_all"))
    assert all(lr > 0 for _, lr in curves["lr/all"][1:])  # the first: warmup_init_lr
    assert all(rate > 0 for _, rate in curves["train/tokens_per_second"])
    assert curves["valid/loss"] == approx(logged(run, "valid", "valid_loss"))
    assert curves["valid/bleu"] == approx(logged(run, "valid", "valid_bleu"))
    assert len(curves["valid/loss"]) == 2 and curves["valid/loss"][-1][0] == steps[-1]


def test_a_resumed_runs_curves_are_not_doubled(toy_paths, tmp_path):
    torch.set_num_threads(1)
    run = tmp_path / "run"
    crashing = Trainer(run, CFG, toy_paths, device="cpu")
    kill_at = len(crashing.train_data.batches(CFG["max_tokens"])) + 6  # after the save at 4k
    train_until_killed(crashing, kill_at)
    saved = checkpoints.load(run / "checkpoints" / "last.pt")["step"]
    assert saved < kill_at
    # the killed process wrote the steps after its checkpoint: the resumed one makes them again
    assert max(step for step, _ in events(run / "tensorboard")["train/loss"]) == kill_at
    resumed = Trainer(run, CFG, toy_paths, device="cpu")
    resumed.run()
    assert len(list((run / "tensorboard").glob("events.out.tfevents.*"))) == 2
    curves = events(run / "tensorboard")
    for tag, event, key in (("train/loss", "train", "loss"), ("valid/loss", "valid",
                                                              "valid_loss")):
        steps = [step for step, _ in curves[tag]]
        assert steps == sorted(set(steps)), tag  # each step once
        assert curves[tag] == approx(logged(run, event, key)), tag  # the log's, after resuming
    assert [step for step, _ in curves["train/loss"]] == list(range(1, resumed.step + 1))


def test_a_fresh_start_removes_an_earlier_trainings_event_files(toy_paths, tmp_path):
    run = tmp_path / "run"
    Trainer(run, {**CFG, "max_epochs": 2}, toy_paths, device="cpu").run()
    (run / "checkpoints" / "last.pt").unlink()
    Trainer(run, {**CFG, "max_epochs": 1}, toy_paths, device="cpu").run()
    assert len(list((run / "tensorboard").glob("events.out.tfevents.*"))) == 1
    assert events(run / "tensorboard")["train/loss"] == approx(logged(run, "train", "loss"))


def test_a_finished_run_resumed_writes_no_event_file(toy_paths, tmp_path):
    run = tmp_path / "run"
    Trainer(run, {**CFG, "max_epochs": 1}, toy_paths, device="cpu").run()
    Trainer(run, {**CFG, "max_epochs": 1}, toy_paths, device="cpu").run()  # 0 updates
    assert len(list((run / "tensorboard").glob("events.out.tfevents.*"))) == 1


def wandb_history(run_file: Path) -> list[dict]:
    """The history rows of an offline W&B run's transaction log (`run-<id>.wandb`: LevelDB's
    log format, 32 KiB blocks of records with 7-byte headers, each a protobuf Record)."""
    from wandb.proto import wandb_internal_pb2

    data, block, pos = run_file.read_bytes(), 32768, 7  # past the file's header (":W&B")
    assert data.startswith(b":W&B")
    rows, pending = [], b""
    while pos + 7 <= len(data):
        left = block - pos % block
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if left < 7 or (length == 0 and kind == 0):  # the block's padding
            pos += left
            continue
        pending += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a whole record, or a record's last part
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            if record.WhichOneof("record_type") == "history":
                rows.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                             for item in record.history.item})
    return rows


def test_wandb_offline_logs_the_same_scalars(toy_paths, tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "run"
    Trainer(run, {**CFG, "max_epochs": 1}, toy_paths, device="cpu",
            wandb_project="nmtbench-test").run()
    (run_file,) = (run / "wandb").glob("offline-run-*/run-*.wandb")
    rows = wandb_history(run_file)
    losses = [(row["_step"], row["train/loss"]) for row in rows if "train/loss" in row]
    assert losses == approx(logged(run, "train", "loss"))
    assert [row["valid/loss"] for row in rows if "valid/loss" in row] == [
        pytest.approx(v) for _, v in logged(run, "valid", "valid_loss")]
    assert all("lr/all" in row and "train/grad_norm" in row for row in rows
               if "train/loss" in row)
    # the event files are written as without W&B; the run's digests do not see either
    assert set(NAMED) - {"valid/bleu"} <= set(events(run / "tensorboard"))


def test_without_wandb_one_warning_and_training_goes_on(toy_paths, tmp_path, monkeypatch,
                                                       caplog):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError
    run = tmp_path / "run"
    with caplog.at_level(logging.WARNING):
        summary = Trainer(run, {**CFG, "max_epochs": 1}, toy_paths, device="cpu",
                          wandb_project="nmtbench-test").run()
    assert summary["steps"] > 0 and not (run / "wandb").exists()
    warnings = [r.getMessage() for r in caplog.records if "wandb" in r.getMessage()]
    assert len(warnings) == 1 and "wandb is not installed" in warnings[0]
    assert "train/loss" in events(run / "tensorboard")


def test_pretraining_writes_curves_beside_the_checkpoint_outside_its_digest(tmp_path):
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefgh") for _ in range(rng.randint(2, 6)))
             for _ in range(60)]
    (tmp_path / "mono.txt").write_text("".join(
        " ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) + "\n"
        for _ in range(300)))
    train_wordpiece([tmp_path / "mono.txt"], tmp_path / "tok", 120)
    out = tmp_path / "ckpt"
    summary = pretrain(tmp_path / "mono.txt", tmp_path / "tok", out,
                       {"model": "bert", **TINY_PRETRAINING, "log_interval": 2})
    curves = events(out / "tensorboard")
    assert [step for step, _ in curves["train/loss"]] == [2, 3]  # every 2nd, and the last
    assert {"train/grad_norm", "train/tokens_per_second", "lr/matrices",
            "lr/biases_and_norms"} <= set(curves)
    assert curves["lr/matrices"][0][1] > 0
    assert curves["heldout/accuracy"] == [(3, pytest.approx(summary["heldout"]["accuracy"]))]
    # a checkpoint pre-trained again byte for byte keeps its digest: the event files differ
    digest = provenance.path_digest(out)
    for path in (out / "tensorboard").iterdir():
        path.write_bytes(b"another clock")
    assert provenance.path_digest(out) == digest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "mono.txt", "tok"]
