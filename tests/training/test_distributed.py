"""Data-parallel training on CPU: two gloo processes under torchrun make the same updates as one
process accumulating the same batches (`update_freq`), only rank 0 writes, and runs resume."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from train_cli import train_arguments

from nmtbench.errors import InputError
from nmtbench.parts import checkpoints
from nmtbench.run_paths import RunPaths
from nmtbench.training.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]
# No dropout: each process draws its own masks, so only then are the two runs the same function.
CFG = {"method": "transformer", "size": "tiny", "d_model": 32, "ffn_dim": 64, "n_heads": 2,
       "encoder_layers": 1, "decoder_layers": 1, "dropout": 0.0, "attention_dropout": 0.0,
       "activation_dropout": 0.0, "max_tokens": 400, "lr": 0.003, "warmup_updates": 5,
       "clip_norm": 1.0, "max_epochs": 3, "save_interval_updates": 4, "log_interval": 1,
       "seed": 3}



def torchrun(run_dir: Path, cfg: dict, toy_paths: RunPaths) -> subprocess.CompletedProcess:
    """`torchrun --nproc-per-node 2 -m nmtbench train`, as the train rule launches it."""
    arguments = train_arguments(toy_paths)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           "2", "-m", "nmtbench", "train", "--run-dir", str(run_dir), "--config",
           json.dumps(cfg), *arguments, "--device", "cpu", "--threads", "2"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def train_log(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "train_log.jsonl").read_text().splitlines()]


def curve(run_dir: Path, key: str, event: str = "train") -> list[float]:
    return [r[key] for r in train_log(run_dir) if r["event"] == event]


@pytest.fixture(scope="module")
def two_processes(toy_paths, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("ddp") / "run"
    torchrun(run_dir, CFG, toy_paths)
    return run_dir


def test_two_processes_make_the_updates_of_one_with_update_freq_2(two_processes, toy_paths,
                                                                   tmp_path):
    torch.set_num_threads(1)
    single = Trainer(tmp_path / "single", {**CFG, "update_freq": 2}, toy_paths, "cpu")
    single.run()
    steps = curve(two_processes, "step")
    assert steps == curve(tmp_path / "single", "step") == list(range(1, len(steps) + 1))
    assert len(steps) > 3 * 10  # three epochs of several updates each: a curve, not a point
    assert curve(two_processes, "ntokens") == curve(tmp_path / "single", "ntokens")
    # (equal to the last bit here; the tolerance is for reduction orders elsewhere)
    for key in ("loss", "nll", "grad_norm"):
        assert curve(two_processes, key) == pytest.approx(curve(tmp_path / "single", key),
                                                          rel=1e-6), key
    assert curve(two_processes, "valid_loss", "valid") == pytest.approx(
        curve(tmp_path / "single", "valid_loss", "valid"), rel=1e-6)
    ddp_weights = checkpoints.load(two_processes / "checkpoints" / "last.pt")["model"]
    for name, tensor in single.model.state_dict().items():
        assert torch.allclose(tensor, ddp_weights[name], atol=1e-6), name

    # the comparison can fail: without accumulation, one process's curve is another one
    halved = Trainer(tmp_path / "halved", CFG, toy_paths, "cpu")
    halved.run()
    assert curve(tmp_path / "halved", "loss")[: len(steps)] != pytest.approx(
        curve(two_processes, "loss"), rel=1e-3)


def test_only_rank_0_writes(two_processes):
    steps = curve(two_processes, "step")
    assert steps == sorted(set(steps))  # one log line per update, not one per process
    summary = json.loads((two_processes / "train_summary.json").read_text())
    assert summary["processes"] == 2 and summary["steps"] == steps[-1]
    assert [p.name for p in checkpoints.numbered_checkpoints(two_processes / "checkpoints")] == [
        "epoch1.pt", "epoch2.pt", "epoch3.pt"]
    # and the curves: one event file, a point per update
    (events,) = (two_processes / "tensorboard").glob("events.out.tfevents.*")
    reader = EventAccumulator(str(events.parent))
    reader.Reload()
    assert [e.step for e in reader.Scalars("train/loss")] == steps


def test_a_stopped_two_process_run_resumes_to_the_same_weights(two_processes, toy_paths,
                                                               tmp_path):
    run_dir = tmp_path / "run"
    torchrun(run_dir, {**CFG, "max_epochs": 1}, toy_paths)
    first = checkpoints.load(run_dir / "checkpoints" / "last.pt")
    torchrun(run_dir, CFG, toy_paths)  # more epochs: trains on from epoch 2
    assert any(r.get("message") == f"resumed from step {first['step']}"
               for r in train_log(run_dir))
    resumed = checkpoints.load(run_dir / "checkpoints" / "last.pt")["model"]
    straight = checkpoints.load(two_processes / "checkpoints" / "last.pt")["model"]
    for name, tensor in straight.items():
        assert torch.equal(tensor, resumed[name]), name


def test_a_run_resumes_only_with_the_processes_it_was_trained_by(two_processes, toy_paths,
                                                                tmp_path):
    """One process resuming a two-process run would take half the batches per update from
    there on: a run neither of the two would train uninterrupted (it used to train on, with a
    warning). It is refused while it would train; a finished one resumes to no update."""
    run_dir = Path(shutil.copytree(two_processes, tmp_path / "run"))
    summary = json.loads((run_dir / "train_summary.json").read_text())
    Trainer(run_dir, CFG, toy_paths, "cpu").run()
    assert json.loads((run_dir / "train_summary.json").read_text())["steps"] == summary["steps"]
    with pytest.raises(InputError) as err:
        Trainer(run_dir, {**CFG, "max_epochs": 4}, toy_paths, "cpu").run()
    assert str(err.value) == (
        f"{run_dir}/checkpoints/last.pt cannot resume as this config's run: it was trained by 2 "
        "processes, this training has 1, and each update would take other batches from here "
        f"on (resume it with 2 processes: resources.train.gpu); delete {run_dir} to train it "
        "again")
    assert json.loads((run_dir / "train_summary.json").read_text())["steps"] == summary["steps"]


def test_a_train_job_with_two_gpus_is_launched_by_torchrun(tmp_path):
    """The train rule starts one process per GPU the job gets, and plain python for one."""
    cmd = [sys.executable, "-m", "snakemake", "-n", "-p", "--forceall", "--cores", "2",
           "--snakefile", str(ROOT / "Snakefile"), "--directory", str(tmp_path)]
    one = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    two = subprocess.run([*cmd, "--set-resources", "train:gpu=2"], capture_output=True,
                         text=True, timeout=300)
    assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
    assert "python -m nmtbench train " in one.stdout and "torchrun" not in one.stdout
    assert "torchrun --standalone --nproc-per-node 2 -m nmtbench train " in two.stdout
