"""BERT as a teacher (nmtbench/methods/bert_kd.py and bert_kd_soft_targets.py): the C-MLM
objective masks only the target, the soft-target dump masks each target position once and stores
what a forward pass gives, soft targets follow their pairs through length filtering, and the
student's loss is Eq. 5 computed by hand."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import save_file
from tiny_checkpoints import BERT_VOCAB, TOKENS, save_tiny_bert, write_bert_corpus
from tiny_checkpoints import TINY_TRAINING as TRAIN
from train_cli import train_arguments
from transformers import BertTokenizer

from nmtbench import cli, provenance
from nmtbench.data.tokenization import load_tokenizer
from nmtbench.errors import InputError
from nmtbench.evaluation.translate import load_run_model
from nmtbench.methods import bert_kd_soft_targets as soft_targets
from nmtbench.methods import get_method
from nmtbench.methods.bert_kd import SOFT_IDS, SOFT_LOGPROBS, joined
from nmtbench.parts.batches import Bitext
from nmtbench.parts.contract import Batch
from nmtbench.run_paths import RunPaths
from nmtbench.training.trainer import Trainer
from nmtbench.workflow.run_inputs.soft_targets import teachers

V = BERT_VOCAB
SMALL = {"size": "tiny", "d_model": 16, "ffn_dim": 32, "n_heads": 2, "encoder_layers": 1,
         "decoder_layers": 1, "dropout": 0.0, "max_positions": 64}


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("kd") / "bert"
    save_tiny_bert(out, seed=7)
    return out


def teacher(bert_dir: Path, **settings):
    torch.manual_seed(0)
    config = {"method": "bert-kd-teacher", "bert": str(bert_dir), **settings}
    return get_method("bert-kd-teacher").build(config, V, V).eval()


def batch() -> Batch:
    src = torch.tensor([[V.bos, 10, 11, 12, V.eos], [V.bos, 20, V.eos, V.pad, V.pad]])
    tgt_out = torch.tensor([[30, 31, V.eos, V.pad], [40, 41, 42, V.eos]])
    tgt_in = torch.tensor([[V.bos, 30, 31, V.pad], [V.bos, 40, 41, 42]])
    return Batch(src, tgt_in, tgt_out, torch.arange(2))


def test_joined_puts_the_target_after_the_source_with_segment_1():
    b = batch()
    ids, segments, where = joined(b.src, b.tgt_out, V.pad)
    assert ids.tolist()[0][:8] == [V.bos, 10, 11, 12, V.eos, 30, 31, V.eos]
    assert ids.tolist()[1][:7] == [V.bos, 20, V.eos, 40, 41, 42, V.eos]
    assert segments.tolist()[0][:8] == [0, 0, 0, 0, 0, 1, 1, 1]
    assert segments.tolist()[1][:8] == [0, 0, 0, 1, 1, 1, 1, 0]
    assert torch.equal(ids.gather(1, where)[b.tgt_out != V.pad], b.tgt_out[b.tgt_out != V.pad])


def test_cmlm_masks_target_tokens_only_and_at_least_one_per_pair(bert_dir):
    model = teacher(bert_dir, mask_prob=0.3).train()
    seen = []
    forward = model.bert.forward

    def spy(**kwargs):
        seen.append((kwargs["input_ids"].clone(), kwargs["token_type_ids"].clone()))
        return forward(**kwargs)

    model.bert.forward = spy
    b = batch()
    for seed in range(30):
        torch.manual_seed(seed)
        losses = model.losses(b)
        ids, segments = seen[-1]
        masked = ids == V.mask
        assert not (masked & (segments == 0)).any()  # nothing of [CLS] x [SEP]
        assert masked.any(dim=1).all()
        assert losses.ntokens == int(masked.sum())
    rate = sum(int((i == V.mask).sum()) for i, _ in seen) / (30 * 7)
    assert 0.2 < rate < 0.45  # about mask_prob, plus the forced one of an empty row


def test_the_l2r_teacher_does_not_see_later_target_words(bert_dir):
    b = batch()
    later = b.tgt_out.clone()
    later[1, 2] = 55  # change the third target word of pair 2
    for objective, independent in (("l2r", True), ("cmlm", False)):
        model = teacher(bert_dir, objective=objective)
        with torch.no_grad():
            a, c = model.predict(b.src, b.tgt_out), model.predict(b.src, later)
        assert torch.allclose(a[1, :2], c[1, :2], atol=1e-6) == independent, objective
        torch.testing.assert_close(a[0], c[0])


def test_teacher_layers_keeps_the_first_layers(bert_dir):
    model = teacher(bert_dir, teacher_layers=1)
    assert len(model.bert.bert.encoder.layer) == 1
    with pytest.raises(InputError, match="teacher_layers"):
        teacher(bert_dir, teacher_layers=3)


def test_the_teacher_is_fine_tuned_without_decay_on_biases_and_layernorms(bert_dir):
    """BERT's fine-tuning recipe: every matrix decays, no bias or LayerNorm gain does."""
    model = teacher(bert_dir)
    decayed, kept = model.param_groups()
    names = {id(p): n for n, p in model.named_parameters()}
    assert kept.weight_decay == 0.0 and decayed.weight_decay is None  # None: the trainer's
    assert {names[id(p)] for p in kept.params} == {
        n for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n}
    assert len(decayed.params) + len(kept.params) == len(list(model.parameters()))


def test_copy_masks_mask_every_position_exactly_once():
    for n in (1, 3, 7, 8, 20):
        masks = soft_targets.copy_masks(n)
        assert masks.shape == (min(7, n), n)
        assert torch.equal(masks.sum(0), torch.ones(n, dtype=torch.long))


def pair_data(paths: dict[str, str], tok, max_positions: int | None = None) -> Bitext:
    return Bitext.load(paths["train_src"], paths["train_tgt"], tok, tok, max_positions)


def test_stored_top_k_is_that_of_a_forward_pass_with_the_position_masked(bert_dir, tmp_path):
    paths = write_bert_corpus(tmp_path)
    tok = load_tokenizer(bert_dir)
    model = teacher(bert_dir)
    data = pair_data(paths, tok)
    ids, lprobs = soft_targets.teacher_topk(model, data, top_k=4, max_tokens=700)
    for i in (0, 5, 17):
        src = torch.tensor([data.src[i]])
        target = torch.tensor(data.tgt[i][1:])  # y [SEP]
        n = len(target)
        assert ids[i].shape == (n, 4) and lprobs[i].dtype == torch.float16
        for j in range(n):  # by hand: the copy that masks j masks every position = j mod c
            c = min(soft_targets.COPIES, n)
            masked = target.masked_fill(torch.arange(n) % c == j % c, V.mask)
            with torch.no_grad():
                top = model.predict(src, masked[None])[0, j].topk(4)
            assert ids[i][j].tolist() == top.indices.tolist()
            torch.testing.assert_close(lprobs[i][j].float(), top.values, atol=2e-3, rtol=0)


def dump(bert_dir: Path, tmp_path: Path, paths: dict[str, str],
         objective: str = "cmlm") -> Path:
    """A BERT-KD teacher trained one epoch, and its top-8 soft targets of `paths`' training set."""
    torch.set_num_threads(1)
    run = tmp_path / "teacher"
    Trainer(run, {"method": "bert-kd-teacher", "bert": str(bert_dir), "objective": objective,
                  **TRAIN},
            RunPaths(**paths, src_tokenizer=str(bert_dir), tgt_tokenizer=str(bert_dir),
                     pretrained={"bert": str(bert_dir)}), device="cpu").run()
    out = tmp_path / "soft.safetensors"
    summary = soft_targets.dump(load_run_model(run, device="cpu"), run,
                                (paths["train_src"], paths["train_tgt"]),
                                (paths["valid_src"], paths["valid_tgt"]), out, top_k=8,
                                info=tmp_path / "soft.json")
    assert json.loads((tmp_path / "soft.json").read_text()) == summary
    assert summary["pairs"] == 48 and 0 <= summary["valid_masked_accuracy"] <= 1
    assert summary["bytes_per_target_position"] > 8 * (4 + 2)  # int32 ids + float16 values
    return out


def test_soft_targets_follow_their_pairs_through_length_filtering(bert_dir, tmp_path):
    paths = write_bert_corpus(tmp_path)
    out = dump(bert_dir, tmp_path, paths)
    tok = load_tokenizer(bert_dir)
    full, filtered = pair_data(paths, tok), pair_data(paths, tok, max_positions=6)
    assert 0 < len(filtered) < len(full)
    soft_targets.load(out, full, tok, top_k=8)
    soft_targets.load(out, filtered, tok, top_k=4)
    for k, line in enumerate(filtered.lines):
        assert torch.equal(filtered.extras[SOFT_IDS][k], full.extras[SOFT_IDS][line][:, :4])
        assert len(filtered.extras[SOFT_IDS][k]) == len(filtered.tgt[k]) - 1
    with pytest.raises(InputError, match="top_k 9"):
        soft_targets.load(out, full, tok, top_k=9)
    # soft targets of other targets, or of another vocabulary, are refused
    other = tmp_path / "other.tgt"
    lines = Path(paths["train_tgt"]).read_text().splitlines()
    other.write_text("\n".join([lines[0] + " w50", *lines[1:]]) + "\n")
    moved = Bitext.load(paths["train_src"], other, tok, tok)
    with pytest.raises(InputError, match="made from another training corpus"):
        soft_targets.load(out, moved, tok, top_k=8)
    vocab = tmp_path / "vocab.txt"  # the same size, one word another
    vocab.write_text("\n".join(t if t != "w50" else "w500" for t in TOKENS) + "\n")
    BertTokenizer(str(vocab), do_lower_case=False).save_pretrained(str(tmp_path / "other"))
    with pytest.raises(InputError, match="another target vocabulary"):
        soft_targets.load(out, full, load_tokenizer(tmp_path / "other"), top_k=8)


def test_soft_targets_are_refused_for_a_corpus_with_two_pairs_swapped(bert_dir, tmp_path):
    """Equal-length pairs swapped: every line's length still fits, the content does not."""
    paths = write_bert_corpus(tmp_path)
    out = dump(bert_dir, tmp_path, paths)
    tok = load_tokenizer(bert_dir)
    for side in ("train_src", "train_tgt"):
        lines = Path(paths[side]).read_text().splitlines()
        first = next(i for i in range(1, len(lines))
                     if len(lines[i].split()) == len(lines[0].split()) and lines[i] != lines[0])
        lines[0], lines[first] = lines[first], lines[0]
        Path(paths[side]).write_text("\n".join(lines) + "\n")
        with pytest.raises(InputError, match="made from another training corpus"):
            soft_targets.load(out, pair_data(paths, tok), tok, top_k=8)
        lines[0], lines[first] = lines[first], lines[0]
        Path(paths[side]).write_text("\n".join(lines) + "\n")
    soft_targets.load(out, pair_data(paths, tok), tok, top_k=8)  # restored: taken


def rewrite(path: Path, change) -> None:
    """The file with its tensors changed by `change` (its record kept, or changed too)."""
    with safe_open(str(path), framework="pt") as f:
        record = json.loads(f.metadata()[soft_targets.RECORD])
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    change(tensors, record)
    save_file(tensors, str(path), metadata={soft_targets.RECORD: json.dumps(record)})


def test_edited_or_malformed_soft_targets_are_refused_in_one_line(bert_dir, tmp_path):
    paths = write_bert_corpus(tmp_path)
    out = dump(bert_dir, tmp_path, paths)
    tok = load_tokenizer(bert_dir)
    original = out.read_bytes()

    def rotated(tensors, record):  # rows moved by one: every line reads its neighbour's
        tensors["ids"] = torch.roll(tensors["ids"], 1, 0)

    def out_of_range(tensors, record):  # and a record that vouches for them
        tensors["ids"][0, 0] = -1 if tensors["ids"][0, 0] else record["vocab_size"]
        record["tensors"] = soft_targets.tensors_digest(tensors)

    def offsets_off(tensors, record):
        tensors["offsets"][-1] += 1
        record["tensors"] = soft_targets.tensors_digest(tensors)

    def no_record(tensors, record):
        record.clear()

    for change, message in ((rotated, "not those it was written with"),
                            (out_of_range, "ids outside the vocabulary"),
                            (offsets_off, "malformed"), (no_record, "not those")):
        out.write_bytes(original)
        rewrite(out, change)
        with pytest.raises(InputError, match=message) as err:
            soft_targets.load(out, pair_data(paths, tok), tok, top_k=8)
        assert str(err.value).startswith(f"{out}: ") and "\n" not in str(err.value)
    out.write_bytes(b"not safetensors")
    with pytest.raises(InputError, match="not a soft-targets file"):
        soft_targets.load(out, pair_data(paths, tok), tok, top_k=8)


def test_train_refuses_a_student_whose_corpus_or_soft_targets_changed(bert_dir, tmp_path,
                                                                      capsys):
    """The fault through `python -m nmtbench train`: the student's corpus with two pairs
    swapped, or the soft targets' rows rotated, stop training with one line (exit 2); the
    untouched inputs train."""
    paths = write_bert_corpus(tmp_path)
    out = dump(bert_dir, tmp_path, paths)
    cfg = {"method": "bert-kd", **SMALL, **TRAIN, "alpha": 0.5, "temperature": 5.0}
    given = RunPaths(**paths, src_tokenizer=str(bert_dir), tgt_tokenizer=str(bert_dir),
                     inputs={"soft_targets": str(out)})

    def train(run: str) -> tuple[int, str]:
        status = cli.main(["train", "--run-dir", str(tmp_path / run), "--config",
                           json.dumps(cfg), *train_arguments(given), "--device", "cpu"])
        errors = [line for line in capsys.readouterr().err.splitlines()
                  if line.startswith("error: ")]
        return status, " / ".join(errors)

    original = out.read_bytes()
    rewrite(out, lambda tensors, record: tensors.__setitem__(
        "ids", torch.roll(tensors["ids"], 1, 0)))
    assert train("rotated") == (2, f"error: {out}: its tensors are not those it was written "
                                "with (edited or damaged); write it again from the teacher "
                                "(delete it and rerun)")
    out.write_bytes(original)
    lines = Path(paths["train_src"]).read_text().splitlines()
    swapped = [lines[1], lines[0], *lines[2:]]
    Path(paths["train_src"]).write_text("\n".join(swapped) + "\n")
    status, error = train("swapped")
    assert status == 2 and error.startswith(f"error: {out}: made from another training corpus")
    Path(paths["train_src"]).write_text("\n".join(lines) + "\n")
    assert train("untouched") == (0, "")


def test_soft_targets_written_twice_are_the_same_bytes_and_name_their_training(bert_dir,
                                                                                tmp_path):
    """A digest of the file is of its content: the same teacher and corpus write the same
    bytes (a finished student then resumes), in another process too; the file and its
    summary record the teacher's training."""
    paths = write_bert_corpus(tmp_path)
    out = dump(bert_dir, tmp_path, paths)
    again = tmp_path / "again.safetensors"
    code = ("import sys; from nmtbench import cli; sys.exit(cli.main(sys.argv[1:]))")
    result = subprocess.run([sys.executable, "-c", code, "soft-targets", "--run-dir",
                             str(tmp_path / "teacher"), "--train-src", paths["train_src"],
                             "--train-tgt", paths["train_tgt"], "--valid-src",
                             paths["valid_src"], "--valid-tgt", paths["valid_tgt"], "--out",
                             str(again), "--top-k", "8", "--device", "cpu"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert again.read_bytes() == out.read_bytes()
    trained = provenance.training_digest(tmp_path / "teacher")
    with safe_open(str(out), framework="pt") as f:
        assert json.loads(f.metadata()[soft_targets.RECORD])[provenance.TRAINED] == trained
    assert json.loads((tmp_path / "soft.json").read_text())[provenance.TRAINED] == trained


def student(alpha: float, temperature: float = 2.0):
    torch.manual_seed(0)
    return get_method("bert-kd").build({"method": "bert-kd", **SMALL, "alpha": alpha,
                                        "temperature": temperature, "top_k": 3,
                                        "label_smoothing": 0.0}, V, V)


def with_soft_targets(b: Batch) -> Batch:
    g = torch.Generator().manual_seed(1)
    shape = (*b.tgt_out.shape, 5)  # more candidates than top_k: the student takes 3
    extras = {SOFT_IDS: torch.randint(5, 100, shape, generator=g).int(),
              SOFT_LOGPROBS: torch.randn(shape, generator=g).half()}
    return Batch(b.src, b.tgt_in, b.tgt_out, b.ids, extras)


def test_kd_loss_is_eq_5_by_hand_and_xe_at_alpha_0():
    b = with_soft_targets(batch())
    model = student(alpha=0.3).eval()
    loss, losses = model.loss(b)
    lprobs = F.log_softmax(model(b.src, b.tgt_in), dim=-1)
    xe = bidi = 0.0
    n = 0
    for row in range(2):
        for t in range(b.tgt_out.size(1)):
            if b.tgt_out[row, t] == V.pad:
                continue
            n += 1
            xe -= lprobs[row, t, b.tgt_out[row, t]]
            p = F.softmax(b.extras[SOFT_LOGPROBS][row, t, :3].float() / 2.0, dim=-1)
            bidi -= (p * lprobs[row, t, b.extras[SOFT_IDS][row, t, :3].long()]).sum()
    torch.testing.assert_close(losses.terms["bidi"], bidi)
    torch.testing.assert_close(loss, (0.3 * bidi + 0.7 * xe) / n)
    xe_only = student(alpha=0.0).eval()
    loss0, _ = xe_only.loss(b)
    plain, _ = xe_only.loss(Batch(b.src, b.tgt_in, b.tgt_out, b.ids))  # no soft targets
    torch.testing.assert_close(loss0, plain)


def test_a_student_without_soft_targets_is_refused_in_training():
    with pytest.raises(InputError, match="soft_targets"):
        student(alpha=0.5).train().loss(batch())


def test_teacher_then_student_through_the_trainer(bert_dir, tmp_path):
    paths = write_bert_corpus(tmp_path)
    out = dump(bert_dir, tmp_path, paths)
    run = tmp_path / "student"
    Trainer(run, {"method": "bert-kd", **SMALL, **TRAIN, "alpha": 0.5, "temperature": 5.0},
            RunPaths(**paths, src_tokenizer=str(bert_dir), tgt_tokenizer=str(bert_dir),
                     inputs={"soft_targets": str(out)}), device="cpu").run()
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    steps = [r for r in log if r["event"] == "train"]
    assert steps and all("bidi" in r for r in steps)


def test_a_left_to_right_teachers_positions_are_masked_one_at_a_time(bert_dir, tmp_path):
    """Masks left of a position would hide the context an l2r teacher reads."""
    from safetensors.torch import load_file

    from nmtbench.evaluation.translate import load_run_model

    paths = write_bert_corpus(tmp_path)
    words = TOKENS[5:]
    for split in ("train", "valid"):  # targets longer than the 7 copies of a C-MLM teacher
        for side in ("src", "tgt"):
            lines = Path(paths[f"{split}_{side}"]).read_text().splitlines()
            Path(paths[f"{split}_{side}"]).write_text("\n".join(
                f"{line} {' '.join(words[k % 90] for k in range(n, n + 6))}"
                for n, line in enumerate(lines)) + "\n")
    stored = load_file(str(dump(bert_dir, tmp_path, paths, objective="l2r")))
    model, tok, _, _ = load_run_model(tmp_path / "teacher", device="cpu")
    data = pair_data(paths, tok)
    i = max(range(len(data)), key=lambda k: len(data.tgt[k]))  # longer than 7 positions
    target = torch.tensor(data.tgt[i][1:])
    rows = slice(int(stored["offsets"][i]), int(stored["offsets"][i + 1]))
    assert len(target) > soft_targets.COPIES
    for j in range(len(target)):
        with torch.no_grad():
            alone = model.predict(torch.tensor([data.src[i]]),
                                  target.masked_fill(torch.arange(len(target)) == j,
                                                     V.mask)[None])[0, j].topk(8)
        assert stored["ids"][rows][j].tolist() == alone.indices.tolist()


# --- the plan: a student's soft targets come from its teacher's run ---------------------------

def default_config() -> dict:
    import yaml

    root = Path(__file__).resolve().parents[2]
    return yaml.safe_load((root / "config" / "config.yaml").read_text()), root


def test_a_student_trains_on_its_teachers_soft_targets_in_its_vocabulary():
    from nmtbench.workflow import config as nmtconfig

    cfg, root = default_config()
    plan = nmtconfig.check(cfg, root / "config" / "schema.yaml")
    inputs = plan.run_inputs("toy", "bertkd-kd-deen")
    assert set(inputs) == {"soft_targets"}
    assert inputs["soft_targets"].path(1) == (
        "results/runs/toy/bertkd-teacher-mbert/seed1/soft_targets.top8.safetensors")
    # student, baseline and teacher read the teacher's BERT's vocabulary on both sides
    for run in ("bertkd-kd-deen", "bertkd-transformer-base", "bertkd-teacher-mbert"):
        assert plan.vocabulary("toy", run, "src") == ("toy-bert-joint", "joint")
        assert plan.vocabulary("toy", run, "tgt") == ("toy-bert-joint", "joint")
    assert plan.vocabulary("toy", "transformer-tiny", "src") == (None, "src")
    assert "toy-bert-joint" in plan.pretrained_targets()
    (teacher, top_k), = teachers(plan)
    assert (teacher.run, top_k) == ("bertkd-teacher-mbert", 8)


@pytest.mark.parametrize("mutate, message", [
    (lambda c: c["experiments"].update(bertkd_x={
        "method": "bert-kd", "teacher": {"experiment": "transformer-tiny"}}),
     "'transformer-tiny' is not a teacher (an experiment whose method is trained to give "
     "soft targets"),
    (lambda c: c["experiments"].update(bertkd_x={
        "method": "bert-kd", "teacher": {"experiment": "no-such-teacher"}}),
     "'no-such-teacher' is not an implemented experiment"),
])
def test_a_teacher_that_is_no_c_mlm_run_is_a_config_error(mutate, message):
    from nmtbench.workflow import config as nmtconfig

    cfg, root = default_config()
    cfg.setdefault("experiments", {})
    mutate(cfg)
    with pytest.raises(InputError, match=re.escape(message)):
        nmtconfig.check(cfg, root / "config" / "schema.yaml")


def test_a_teacher_cannot_be_a_table_row():
    from nmtbench.workflow import config as nmtconfig

    cfg, root = default_config()
    plan = nmtconfig.check(cfg, root / "config" / "schema.yaml")
    with pytest.raises(InputError, match="is a teacher, never decoded"):
        plan.cell("iwslt14-de-en", "bertkd-teacher-mbert", "a table")
