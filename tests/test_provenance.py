"""Provenance: content digests of a run's inputs, and outputs tied to the training they were
made from (the report side is in tests/report/test_report.py, the trainer's in
tests/training/test_trainer.py).
"""

from __future__ import annotations

import json

import pytest
import torch

from nmtbench import provenance
from nmtbench.errors import InputError
from nmtbench.evaluation.evaluate import Decoded, Scoring, evaluate_run
from nmtbench.evaluation.translate import translate_file
from nmtbench.fileio import write_json
from nmtbench.training.trainer import Trainer
from nmtbench.workflow.decode_settings import DecodeSettings

CFG = {"method": "transformer", "size": "tiny", "d_model": 32, "ffn_dim": 64, "n_heads": 2,
       "encoder_layers": 1, "decoder_layers": 1, "max_tokens": 800, "lr": 0.003,
       "warmup_updates": 5, "max_epochs": 1, "seed": 3}


def test_a_directory_digest_follows_its_files_not_its_locks(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "vocab.txt").write_text("a\nb\n")
    before = provenance.path_digest(tmp_path / "d")
    (tmp_path / "d" / ".lock").write_text("pid 7")
    assert provenance.path_digest(tmp_path / "d") == before
    (tmp_path / "d" / "vocab.txt").write_text("a\nc\n")
    assert provenance.path_digest(tmp_path / "d") != before


def test_input_digests_name_nested_inputs_and_changes(tmp_path):
    for name in ("a", "b", "c"):
        (tmp_path / name).write_text(name)
    recorded = provenance.input_digests({"train_src": tmp_path / "a",
                                         "pretrained": {"src_bert": tmp_path / "b"}})
    assert set(recorded) == {"train_src", "pretrained.src_bert"}
    paths = {"train_src": tmp_path / "a", "pretrained": {"src_bert": tmp_path / "c"},
             "inputs": {"init_from": tmp_path / "a"}}
    now = provenance.input_digests(paths)
    assert provenance.changed(recorded, now, paths) == ["inputs.init_from",
                                                        "pretrained.src_bert"]


@pytest.mark.parametrize("record", sorted(provenance.RECORDS))
def test_a_checkpoint_made_again_byte_for_byte_keeps_its_digest(tmp_path, record):
    """Pre-training again gives the same weights but another wall-clock time in its summary:
    the runs on the checkpoint stay current. What a model loads is what counts."""
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    (tmp_path / record).write_text('{"seconds": 12.5}')
    before = provenance.path_digest(tmp_path)
    (tmp_path / record).write_text('{"seconds": 13.1}')
    assert provenance.path_digest(tmp_path) == before
    (tmp_path / "model.safetensors").write_bytes(b"other weights")
    assert provenance.path_digest(tmp_path) != before


def test_digests_recorded_with_the_records_still_match(tmp_path):
    """Runs recorded their checkpoints' digests with the summaries in them before those were
    left out: after the upgrade they are still current, but not once the weights change."""
    bert = tmp_path / "bert"
    bert.mkdir()
    (bert / "model.safetensors").write_bytes(b"weights")
    (bert / "pretrain_summary.json").write_text('{"seconds": 12.5}')
    paths = {"pretrained": {"src_bert": bert}}
    earlier = {"pretrained.src_bert": provenance.path_digest(bert, with_records=True)}
    assert earlier["pretrained.src_bert"] != provenance.path_digest(bert)
    assert provenance.changed_inputs(earlier, paths) == []
    assert provenance.changed(earlier, provenance.input_digests(paths), paths) == []
    (bert / "model.safetensors").write_bytes(b"other weights")
    assert provenance.changed_inputs(earlier, paths) == [("pretrained.src_bert", bert)]
    assert provenance.changed(earlier, provenance.input_digests(paths), paths) == [
        "pretrained.src_bert"]


def test_a_missing_input_is_one_line(tmp_path):
    with pytest.raises(InputError, match=r"nothing\.txt: cannot read"):
        provenance.input_digests({"train_src": tmp_path / "nothing.txt"})


def test_scores_only_hypotheses_of_the_training_in_the_run(toy_paths, toy_dir, tmp_path):
    """Hypotheses decoded before the run was trained again are refused by evaluate, and the
    metrics record the training they scored."""
    torch.set_num_threads(1)
    run = tmp_path / "run"
    Trainer(run, CFG, toy_paths, device="cpu").run()
    hyp, info = tmp_path / "hyp.txt", tmp_path / "decode.json"
    record = translate_file(run, toy_dir / "test.src", hyp, DecodeSettings(beam=2),
                            device="cpu")
    write_json(info, record)
    assert record[provenance.TRAINED] == provenance.training_digest(run)

    def score():
        return evaluate_run(Decoded(hyp, run / "train_summary.json", run / "config.json", info),
                            "test", Scoring(toy_dir / "test.tgt", lowercase=False,
                                            detok_lang="en"), tmp_path / "metrics.json")

    metrics = score()
    assert provenance.current(metrics, run)
    assert metrics["hyp"] == provenance.file_digest(hyp)

    summary = json.loads((run / "train_summary.json").read_text())
    write_json(run / "train_summary.json", {**summary, "steps": summary["steps"] + 1})
    with pytest.raises(InputError, match="decoded from another training"):
        score()
    assert not provenance.current(metrics, run)


def test_a_source_longer_than_the_models_positions_is_one_line_naming_it(toy_paths, toy_dir,
                                                                        tmp_path):
    """Training drops pairs longer than max_positions (logged); decoding cannot drop a test
    line, so it names the line instead of failing deep in the model."""
    run = tmp_path / "run"
    Trainer(run, {**CFG, "max_positions": 32}, toy_paths, device="cpu").run()
    lines = (toy_dir / "test.src").read_text().splitlines()
    src = tmp_path / "test.src"
    src.write_text("\n".join([lines[0], " ".join(lines[:4]), lines[1]]) + "\n")
    with pytest.raises(InputError) as err:
        translate_file(run, src, tmp_path / "hyp.txt", DecodeSettings(beam=2), device="cpu")
    message = str(err.value)
    assert message.startswith(f"{src}: line 2: ") and "more than the model's 32 positions" \
        in message and "\n" not in message
    assert not (tmp_path / "hyp.txt").exists()


def test_a_finished_run_that_lost_a_checkpoint_is_named(tmp_path):
    """best.pt and last.pt and their checksum files, and every other checkpoint kept with
    its checksum file: the first one gone is named, once the run has finished."""
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    names = ["best.pt", "last.pt", "epoch1.pt", "epoch2.pt"]
    for name in names:
        (checkpoints / name).write_bytes(b"w")
        (checkpoints / f"{name}.sha256").write_text("x\n")
    (tmp_path / "train_log.jsonl").write_text("{}\n")
    assert provenance.lost_checkpoint(tmp_path) is None
    (checkpoints / "best.pt").unlink()
    assert provenance.lost_checkpoint(tmp_path) is None  # not finished: a resume makes it
    (tmp_path / "train_summary.json").write_text("{}\n")
    assert provenance.lost_checkpoint(tmp_path) == checkpoints / "best.pt"
    assert provenance.lost_checkpoint_line(tmp_path) == (
        f"{checkpoints}/best.pt is gone, but the run's results were made from it and only "
        f"training the run again makes it; delete {tmp_path} to train it again")
    (checkpoints / "best.pt").write_bytes(b"w")
    (checkpoints / "epoch2.pt").unlink()  # averaging reads it
    assert provenance.lost_checkpoint(tmp_path) == checkpoints / "epoch2.pt"
    (checkpoints / "epoch2.pt.sha256").unlink()  # an epoch checkpoint no longer kept
    assert provenance.lost_checkpoint(tmp_path) is None
    # one the run keeps, deleted with its checksum file: named where its records say so
    assert provenance.lost_checkpoint(tmp_path, ["epoch1.pt", "epoch2.pt"]) == \
        checkpoints / "epoch2.pt"
    (checkpoints / "last.pt.sha256").unlink()
    assert provenance.lost_checkpoint(tmp_path) == checkpoints / "last.pt.sha256"
    (checkpoints / "last.pt.sha256").write_text("x\n")
    # the log the report draws its curves from, which a resume does not write again
    (tmp_path / "train_log.jsonl").unlink()
    assert provenance.lost_checkpoint(tmp_path) == tmp_path / "train_log.jsonl"


def test_the_numbered_checkpoints_a_finished_run_keeps(tmp_path):
    """As the trainer prunes them: its last keep_last_epochs epochs, and the last
    keep_interval_updates of every save_interval_updates updates; none until it finished."""
    from nmtbench.workflow.train_settings import kept_by_run, kept_checkpoints

    cfg = {"method": "transformer", "keep_last_epochs": 2, "keep_interval_updates": 2,
           "save_interval_updates": 4}
    assert kept_checkpoints(cfg, 3, 39) == {"epochs": ["epoch2.pt", "epoch3.pt"],
                                            "updates": ["update32.pt", "update36.pt"]}
    assert kept_checkpoints({**cfg, "keep_interval_updates": 0}, 1, 39)["updates"] == []
    assert kept_checkpoints({**cfg, "keep_last_epochs": 5}, 2, 8)["epochs"] == [
        "epoch1.pt", "epoch2.pt"]
    assert kept_by_run(tmp_path) == {"epochs": [], "updates": []}
    write_json(tmp_path / "config.json", {"experiment": cfg})
    assert kept_by_run(tmp_path) == {"epochs": [], "updates": []}  # not finished
    write_json(tmp_path / "train_summary.json", {"epochs": 1, "steps": 8})
    assert kept_by_run(tmp_path) == {"epochs": ["epoch1.pt"],
                                     "updates": ["update4.pt", "update8.pt"]}


def test_a_pretraining_that_lost_its_summary_is_named(tmp_path):
    assert provenance.lost_summary_line(tmp_path) is None  # not made yet: its rule makes it
    (tmp_path / "config.json").write_text("{}\n")
    assert provenance.lost_summary_line(tmp_path) == (
        f"{tmp_path}: its pretrain_summary.json is gone, but its config.json is there, so no "
        f"job makes it again; delete {tmp_path} to pre-train the checkpoint again")
    (tmp_path / "pretrain_summary.json").write_text("{}\n")
    assert provenance.lost_summary_line(tmp_path) is None


def test_a_snapshot_or_trim_that_lost_its_weights_is_named(tmp_path):
    assert provenance.lost_weights_line(tmp_path) is None  # not made yet: its rule makes it
    (tmp_path / "config.json").write_text("{}\n")
    assert provenance.lost_weights_line(tmp_path) == (
        f"{tmp_path}: its weights (*.safetensors) are gone, but its config.json is there, so "
        f"no job makes them again; delete {tmp_path} to make the checkpoint again")
    (tmp_path / "model.safetensors").write_bytes(b"w")
    assert provenance.lost_weights_line(tmp_path) is None
