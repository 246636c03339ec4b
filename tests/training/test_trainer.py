"""The trainer: learning-rate schedule, resume after a crash, checkpoint averaging."""

import json
import os
import shutil

import pytest
import torch
from killed_training import train_until_killed
from tiny_checkpoints import TINY_TRANSFORMER as CFG

from nmtbench.errors import InputError
from nmtbench.evaluation.translate import load_run_model
from nmtbench.parts import checkpoints
from nmtbench.parts.contract import Progress
from nmtbench.run_paths import RunPaths
from nmtbench.training import trainer
from nmtbench.training.trainer import Trainer
from nmtbench.workflow.train_settings import (
    TrainConfig,
    inverse_sqrt_lr,
    resumable,
    resume_refusal,
)


def test_inverse_sqrt_schedule():
    cfg = TrainConfig(lr=1e-3, warmup_updates=100, warmup_init_lr=0.0)
    assert inverse_sqrt_lr(50, cfg) == pytest.approx(5e-4)
    assert inverse_sqrt_lr(100, cfg) == pytest.approx(1e-3)
    assert inverse_sqrt_lr(400, cfg) == pytest.approx(5e-4)  # lr * sqrt(100 / 400)


def test_update_k_uses_the_rate_after_k_minus_1_updates(toy_paths, tmp_path):
    """fairseq sets the rate for the next update after each one, starting from
    warmup_init_lr; the training log's `lr` is the rate the update was made with."""
    Trainer(tmp_path / "run", {**CFG, "max_epochs": 1}, toy_paths, device="cpu").run()
    logged = [json.loads(line) for line in (tmp_path / "run" / "train_log.jsonl").open()]
    rates = {r["step"]: r["lr"] for r in logged if r.get("event") == "train"}
    cfg = TrainConfig.from_dict(CFG)
    assert rates[1] == pytest.approx(cfg.warmup_init_lr)
    assert rates[3] == pytest.approx(inverse_sqrt_lr(2, cfg))


def test_resumed_run_ends_with_identical_weights(toy_paths, tmp_path):
    torch.set_num_threads(1)
    straight = Trainer(tmp_path / "straight", CFG, toy_paths, device="cpu")
    straight.run()

    crashing = Trainer(tmp_path / "resumed", CFG, toy_paths, device="cpu")
    steps_per_epoch = len(crashing.train_data.batches(CFG["max_tokens"]))
    kill_at = steps_per_epoch + 6  # mid-epoch 2, two steps after the save at a multiple of 4
    assert kill_at % CFG["save_interval_updates"] != 0
    train_until_killed(crashing, kill_at)
    saved = checkpoints.load(tmp_path / "resumed" / "checkpoints" / "last.pt")
    assert saved["step"] < kill_at  # the steps after the last save are really lost

    resumed = Trainer(tmp_path / "resumed", CFG, toy_paths, device="cpu")
    summary = resumed.run()
    assert summary["steps"] == straight.step
    for name, tensor in straight.model.state_dict().items():
        assert torch.equal(tensor, resumed.model.state_dict()[name]), name

    log = [json.loads(line) for line in
           (tmp_path / "resumed" / "train_log.jsonl").read_text().splitlines()]
    assert any(r.get("message") == f"resumed from step {saved['step']}" for r in log)
    train_steps = [r["step"] for r in log if r["event"] == "train"]
    assert train_steps == sorted(set(train_steps))  # replayed steps are not logged twice


def test_resume_refuses_a_changed_config_and_keeps_the_runs_record(toy_paths, tmp_path):
    Trainer(tmp_path / "run", {**CFG, "max_epochs": 1}, toy_paths, device="cpu").run()
    record = (tmp_path / "run" / "config.json").read_text()
    with pytest.raises(InputError, match="trained with another config"):
        Trainer(tmp_path / "run", {**CFG, "max_epochs": 1, "lr": 0.1}, toy_paths,
                device="cpu").run()
    # decoding builds the model from config.json: it still describes the checkpoints
    assert (tmp_path / "run" / "config.json").read_text() == record


def test_a_fresh_start_removes_what_an_earlier_training_left(toy_paths, tmp_path):
    """last.pt deleted (say, corrupt): training starts over, and the earlier training's log
    and epoch checkpoints do not mix into the new one's curves and averages."""
    run = tmp_path / "run"
    Trainer(run, {**CFG, "max_epochs": 2}, toy_paths, device="cpu").run()
    (run / "checkpoints" / "last.pt").unlink()
    (run / "checkpoints" / "epoch9.pt").write_bytes(b"from another training")
    Trainer(run, {**CFG, "max_epochs": 1}, toy_paths, device="cpu").run()
    assert sorted(p.name for p in (run / "checkpoints").glob("epoch*.pt")) == ["epoch1.pt"]
    steps = [json.loads(line)["step"] for line in (run / "train_log.jsonl").read_text()
             .splitlines() if json.loads(line)["event"] == "train"]
    assert steps == sorted(set(steps))


@pytest.mark.parametrize("changed", ["train_tgt", "valid_src", "tgt_tokenizer"])
def test_resume_refuses_changed_inputs(toy_paths, tmp_path, changed):
    """Regenerated data or vocabularies: the finished checkpoint is not this run's (a resume
    would train 0 steps and report the old model)."""
    given = {k: v for k, v in toy_paths.as_record().items() if isinstance(v, str)}
    inputs = {name: tmp_path / "inputs" / name for name in given}
    inputs["train_src"].parent.mkdir()
    for name, path in inputs.items():
        copy = shutil.copytree if os.path.isdir(given[name]) else shutil.copyfile
        copy(given[name], path)
    paths = RunPaths(**{name: str(path) for name, path in inputs.items()})
    Trainer(tmp_path / "run", {**CFG, "max_epochs": 1}, paths, device="cpu").run()
    summary = (tmp_path / "run" / "train_summary.json").read_text()
    tokenizer = inputs[changed].is_dir()
    target = inputs[changed] / "tokenizer.json" if tokenizer else inputs[changed]
    original = target.read_text(encoding="utf-8")
    target.write_text(original + "\n" if tokenizer  # still loads: other bytes, same JSON
                      else original.replace("\n", " extra\n", 1), encoding="utf-8")
    with pytest.raises(InputError, match=rf"trained on other inputs \({changed} changed\)"):
        Trainer(tmp_path / "run", {**CFG, "max_epochs": 2}, paths, device="cpu").run()
    assert (tmp_path / "run" / "train_summary.json").read_text() == summary
    # unchanged bytes rewritten (a regenerated file with the same content) resume as before
    target.write_text(original, encoding="utf-8")
    assert Trainer(tmp_path / "run", {**CFG, "max_epochs": 1}, paths,
                   device="cpu").run()["steps"] > 0


def test_keeps_last_epochs_and_averages_them(toy_paths, tmp_path):
    Trainer(tmp_path / "run", CFG, toy_paths, device="cpu").run()
    found = checkpoints.numbered_checkpoints(tmp_path / "run" / "checkpoints")
    assert [p.name for p in found] == ["epoch2.pt", "epoch3.pt"]
    averaged = checkpoints.average(found)
    a, b = (checkpoints.load(p)["model"] for p in found)
    for name in a:
        assert torch.allclose(averaged[name], (a[name] + b[name]) / 2, atol=1e-6), name
    assert any(not torch.equal(a[name], b[name]) for name in a)  # a real average, not a copy


def test_the_save_interval_counts_only_where_update_checkpoints_are_kept():
    """How often last.pt is saved changes nothing a run learns; where update checkpoints are
    kept, it changes which weights a decode averages, so a checkpoint saved at another
    interval is not this config's."""
    every_4, every_8 = {**CFG}, {**CFG, "save_interval_updates": 8}
    assert resumable(every_4) == resumable(every_8)
    assert (resumable({**every_4, "keep_interval_updates": 3})
            != resumable({**every_8, "keep_interval_updates": 3}))


def test_keeps_interval_updates_and_a_resumed_run_keeps_the_same(toy_paths, tmp_path):
    """keep_interval_updates: the weights of every save_interval_updates updates, the last k
    kept (a run of few epochs can still average 10); a killed and resumed run ends with the
    same ones, and decoding averages them."""
    torch.set_num_threads(1)
    cfg = {**CFG, "keep_interval_updates": 3}
    straight = Trainer(tmp_path / "straight", cfg, toy_paths, device="cpu")
    straight.run()
    crashing = Trainer(tmp_path / "resumed", cfg, toy_paths, device="cpu")
    train_until_killed(crashing, len(crashing.train_data.batches(CFG["max_tokens"])) + 6)
    Trainer(tmp_path / "resumed", cfg, toy_paths, device="cpu").run()
    interval = CFG["save_interval_updates"]
    last = straight.step // interval * interval
    names = [f"update{step}.pt" for step in range(last - 2 * interval, last + 1, interval)]
    kept = {}
    for run in ("straight", "resumed"):
        found = checkpoints.numbered_checkpoints(tmp_path / run / "checkpoints", "updates")
        assert [p.name for p in found] == names, run
        kept[run] = [checkpoints.load(p)["model"] for p in found]
        assert all("optimizer" not in checkpoints.load(p) for p in found)
    for ours, theirs in zip(kept["resumed"], kept["straight"], strict=True):
        assert all(torch.equal(ours[k], theirs[k]) for k in theirs)
    model, *_ = load_run_model(tmp_path / "straight", average_last=3, device="cpu",
                               average_of="updates")
    first = next(iter(kept["straight"][0]))
    mean = sum(weights[first] for weights in kept["straight"]) / 3
    assert torch.allclose(model.checkpoint_state()[first], mean, atol=1e-6)
    with pytest.raises(InputError, match="only 3 update checkpoints exist"):
        load_run_model(tmp_path / "straight", average_last=4, device="cpu",
                       average_of="updates")


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(toy_paths, tmp_path):
    trainer = Trainer(tmp_path / "run", {**CFG, "save_interval_updates": 2}, toy_paths,
                      device="cpu")
    original_loss = trainer.model.loss

    def loss_goes_nan(batch, progress=None):
        loss, losses = original_loss(batch, progress)
        return (loss * float("nan") if trainer.step >= 3 else loss), losses

    trainer.model.loss = loss_goes_nan
    with pytest.raises(FloatingPointError, match=r"^training diverged at step 4: loss is nan; "
                       r"the last good checkpoint is .*/last\.pt \(step 2\)$"):
        trainer.run()
    saved = checkpoints.load(tmp_path / "run" / "checkpoints" / "last.pt")
    assert saved["step"] == 2
    assert all(torch.isfinite(t).all() for t in saved["model"].values())


def test_accumulated_batches_weigh_by_target_tokens_like_one_big_batch(toy_paths, tmp_path):
    """update_freq 2 over batches a, b gives the gradient of one batch a + b: each batch's mean
    loss counts by its share of the update's target tokens (fairseq's sample-size rule)."""
    torch.set_num_threads(1)
    cfg = {**CFG, "dropout": 0.0, "attention_dropout": 0.0, "activation_dropout": 0.0,
           "clip_norm": 0.0}
    accumulated = Trainer(tmp_path / "a", {**cfg, "update_freq": 2}, toy_paths, "cpu")
    joined = Trainer(tmp_path / "b", cfg, toy_paths, "cpu")
    data = accumulated.train_data
    a, b = sorted(data.batches(CFG["max_tokens"]), key=data.target_tokens)[::-1][:2]
    a = a[: len(a) // 3]  # unequal token counts: an unweighted mean of means would differ
    assert data.target_tokens(a) != data.target_tokens(b)
    record = accumulated._train_step([a, b])
    joined._train_step([a + b])
    assert record["ntokens"] == data.target_tokens(a) + data.target_tokens(b)
    for (name, p), q in zip(accumulated.model.named_parameters(), joined.model.parameters(),
                            strict=True):
        assert torch.allclose(p.grad, q.grad, rtol=1e-4, atol=1e-7), name


def test_weight_decay_is_decoupled_as_in_fairseq_and_bert(toy_paths, tmp_path):
    """fairseq's Adam and BERT's optimiser decay weights apart from the gradient step (AdamW):
    a row that gets no gradient shrinks by exactly (1 - lr * weight_decay) per update. Adam's
    L2 form would instead push it towards 0 by about lr per update (Adam normalises the decay
    term like a gradient), wiping out a pre-trained embedding's rarely seen rows."""
    decay = 0.1
    trainer = Trainer(tmp_path / "run", {**CFG, "max_epochs": 1, "weight_decay": decay},
                      toy_paths, device="cpu")
    table = dict(trainer.model.named_parameters())["encoder.embed.weight"]
    before = table.detach().clone()
    unseen = sorted(set(range(table.size(0))) - {t for s in trainer.train_data.src for t in s})
    assert unseen, "the test needs source tokens the training data never holds"
    trainer.run()
    logged = [json.loads(line) for line in (tmp_path / "run" / "train_log.jsonl").open()]
    factor = 1.0
    for record in logged:
        if record.get("event") == "train":
            factor *= 1 - record["lr"] * decay
    assert factor < 0.999  # the decay is large enough to see
    torch.testing.assert_close(table.detach()[unseen], before[unseen] * factor)


def test_a_checkpoint_past_where_the_config_stops_is_not_resumed(toy_paths, tmp_path):
    """max_epochs lowered 2 -> 1: resuming would report the 2-epoch model as the 1-epoch run's."""
    run = tmp_path / "run"
    Trainer(run, {**CFG, "max_epochs": 2}, toy_paths, device="cpu").run()
    summary = (run / "train_summary.json").read_text()
    with pytest.raises(InputError, match=r"last\.pt cannot resume as this config's run: it has "
                       r"trained \d+ updates into epoch 3, past where this config stops; "
                       rf"delete {run} to train it again"):
        Trainer(run, {**CFG, "max_epochs": 1}, toy_paths, device="cpu").run()
    assert (run / "train_summary.json").read_text() == summary


def test_a_linear_decay_resumes_only_to_the_length_it_decayed_over(toy_paths, tmp_path):
    """Raising max_epochs of a linearly decayed run would go on from a rate decayed to 0 over
    the old length; an inverse-square-root run trains on (test_distributed: to the weights of
    an uninterrupted run)."""
    run = tmp_path / "run"
    linear = {**CFG, "lr_schedule": "linear", "max_epochs": 1}
    first = Trainer(run, linear, toy_paths, device="cpu").run()
    with pytest.raises(InputError, match=rf"its schedule ran over {first['steps']} updates \(a "
                       r"linear decay, or its method's schedule\), this config plans \d+"):
        Trainer(run, {**linear, "max_epochs": 2}, toy_paths, device="cpu").run()
    assert Trainer(run, linear, toy_paths, device="cpu").run()["steps"] == first["steps"]


@pytest.mark.parametrize(("key", "old", "new", "refused"), [
    ("patience", 3, 1, True), ("patience", 0, 2, True), ("patience", 1, 3, False),
    ("divergence_factor", 10.0, 5.0, True), ("divergence_factor", 10.0, 0, False)])
def test_a_stop_it_might_have_met_earlier_is_not_resumed(key, old, new, refused):
    state = {"step": 4, "epoch": 2, "offset": 0, "total_updates": 8, "read_total": False}
    why = resume_refusal({**CFG, key: old}, state, {**CFG, key: new}, 8)
    assert (why is not None) == refused and (not refused or key in why)


def test_a_schedule_that_read_the_runs_length_resumes_only_to_it():
    """A method's lr_scale or loss that read `Progress.total` (or `fraction`) ties the run to
    its length, as a linear decay does; an older checkpoint is assumed to."""
    progress = Progress(3, 10)
    assert not progress.read_total and progress.fraction == 0.3 and progress.read_total
    state = {"step": 4, "epoch": 2, "offset": 0, "total_updates": 8}
    longer = {**CFG, "max_epochs": CFG["max_epochs"] + 1}
    assert resume_refusal(CFG, {**state, "read_total": False}, longer, 12) is None
    assert "ran over 8 updates" in resume_refusal(CFG, {**state, "read_total": True}, longer, 12)
    assert resume_refusal(CFG, state, longer, 12) is not None
    assert resume_refusal(CFG, state, CFG, 8) is None


def test_a_run_is_not_trained_into_a_directory_of_other_files(toy_paths, tmp_path):
    """A pre-trained checkpoint's directory (or any other) given as the run directory: its
    files would be mixed with or replaced by the run's."""
    bert = tmp_path / "bert"
    bert.mkdir()
    (bert / "model.safetensors").write_bytes(b"weights")
    (bert / "config.json").write_text("{}")
    with pytest.raises(InputError, match=rf"^{bert}: it holds model\.safetensors, which no run "
                       "directory holds; write to a new directory$"):
        Trainer(bert, {**CFG, "max_epochs": 1}, toy_paths, device="cpu")
    assert sorted(p.name for p in bert.iterdir()) == ["config.json", "model.safetensors"]


def test_a_run_stopped_by_its_patience_stays_stopped_when_resumed(toy_paths, tmp_path,
                                                                  monkeypatch):
    """A run its patience stopped is a finished run: rerunning its train job, or raising
    max_epochs, trains no further (an uninterrupted run would have stopped there too)."""
    torch.set_num_threads(1)
    # the validation loss gets worse after the first epoch, whatever the weights
    losses = iter(range(1, 100))
    monkeypatch.setattr(trainer, "validation_loss", lambda *args: float(next(losses)))
    cfg = {**CFG, "patience": 1, "max_epochs": 6}
    run = tmp_path / "run"
    first = Trainer(run, cfg, toy_paths, device="cpu").run()
    assert first["epochs"] < cfg["max_epochs"]  # the patience stopped it
    for again in (cfg, {**cfg, "max_epochs": 7}):
        assert Trainer(run, again, toy_paths, device="cpu").run()["steps"] == first["steps"]


def test_a_run_cut_inside_an_epoch_by_max_updates_does_not_resume_past_it(toy_paths, tmp_path,
                                                                          capsys):
    """max_updates ended a run inside an epoch (and it validated there): resumed with the
    same cap it is finished; with a higher cap, or none, resuming would skip the rest of that
    epoch, unlike an uninterrupted run, so it is refused with the advice to train again."""
    torch.set_num_threads(1)
    probe = Trainer(tmp_path / "probe", CFG, toy_paths, device="cpu")
    per_epoch = len(probe.train_data.batches(CFG["max_tokens"]))
    cap = per_epoch + per_epoch // 2  # inside epoch 2
    run = tmp_path / "run"
    cut = Trainer(run, {**CFG, "max_updates": cap}, toy_paths, device="cpu").run()
    assert cut["steps"] == cap
    assert Trainer(run, {**CFG, "max_updates": cap}, toy_paths, "cpu").run()["steps"] == cap
    for more in (cap + 2, 0):
        with pytest.raises(InputError, match=r"cannot resume as this config's run: max_updates "
                                             rf"ended it inside epoch 2, after {cap} updates"):
            Trainer(run, {**CFG, "max_updates": more}, toy_paths, device="cpu").run()


def test_logging_and_saving_more_often_resumes(toy_paths, tmp_path):
    """How often a run logs and saves last.pt changes nothing it learns: a finished run given
    more epochs with other intervals trains on, to the weights of an uninterrupted run."""
    torch.set_num_threads(1)
    straight = Trainer(tmp_path / "straight", {**CFG, "max_epochs": 2}, toy_paths, "cpu")
    straight.run()
    run = tmp_path / "run"
    Trainer(run, {**CFG, "max_epochs": 1}, toy_paths, device="cpu").run()
    more = {**CFG, "max_epochs": 2, "log_interval": 3, "save_interval_updates": 5}
    resumed = Trainer(run, more, toy_paths, device="cpu")
    assert resumed.run()["steps"] == straight.step
    for name, tensor in straight.model.state_dict().items():
        assert torch.equal(tensor, resumed.model.state_dict()[name]), name
