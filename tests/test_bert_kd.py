"""BERT as a teacher (methods/bert_kd.py, nmtbench/soft_targets.py): the C-MLM objective masks
only the target, the soft-target dump masks each target position once and stores what a
forward pass gives, soft targets follow their pairs through length filtering, and the student's
loss is Eq. 5 computed by hand."""

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from test_run_inputs import write_bert_corpus
from tiny_checkpoints import BERT_VOCAB, TOKENS, save_tiny_bert
from transformers import BertTokenizer

from methods import get_method
from methods.bert_kd import SOFT_IDS, SOFT_LOGPROBS, joined
from nmtbench import soft_targets
from nmtbench.data import ParallelData
from nmtbench.errors import InputError
from nmtbench.method import Batch
from nmtbench.tokenization import load_tokenizer
from nmtbench.trainer import Trainer

V = BERT_VOCAB
SMALL = {"size": "tiny", "d_model": 16, "ffn_dim": 32, "n_heads": 2, "encoder_layers": 1,
         "decoder_layers": 1, "dropout": 0.0, "max_positions": 64}
TRAIN = {"max_tokens": 800, "lr": 0.003, "warmup_updates": 5, "max_epochs": 1,
         "log_interval": 1, "seed": 3}


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("kd") / "bert"
    save_tiny_bert(out, seed=7)
    return out


def teacher(bert_dir: Path, **settings):
    torch.manual_seed(0)
    return get_method("c-mlm").build({"method": "c-mlm", "bert": str(bert_dir), **settings},
                                     V, V).eval()


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


def test_copy_masks_mask_every_position_exactly_once():
    for n in (1, 3, 7, 8, 20):
        masks = soft_targets.copy_masks(n)
        assert masks.shape == (min(7, n), n)
        assert torch.equal(masks.sum(0), torch.ones(n, dtype=torch.long))


def pair_data(paths: dict[str, str], tok, max_positions: int | None = None) -> ParallelData:
    return ParallelData.load(paths["train_src"], paths["train_tgt"], tok, tok, max_positions)


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


def dump(bert_dir: Path, tmp_path: Path, paths: dict[str, str]) -> Path:
    """A c-mlm teacher trained one epoch, and its top-8 soft targets of `paths`' training set."""
    torch.set_num_threads(1)
    run = tmp_path / "teacher"
    Trainer(run, {"method": "c-mlm", "bert": str(bert_dir), **TRAIN},
            {**paths, "src_tokenizer": str(bert_dir), "tgt_tokenizer": str(bert_dir),
             "pretrained": {"bert": str(bert_dir)}}, device="cpu").run()
    out = tmp_path / "soft.safetensors"
    summary = soft_targets.dump(run, paths["train_src"], paths["train_tgt"], paths["valid_src"],
                                paths["valid_tgt"], out, top_k=8, info=tmp_path / "soft.json",
                                device="cpu")
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
    moved = ParallelData.load(paths["train_src"], other, tok, tok)
    with pytest.raises(InputError, match="line 1 has"):
        soft_targets.load(out, moved, tok, top_k=8)
    vocab = tmp_path / "vocab.txt"  # the same size, one word another
    vocab.write_text("\n".join(t if t != "w50" else "w500" for t in TOKENS) + "\n")
    BertTokenizer(str(vocab), do_lower_case=False).save_pretrained(str(tmp_path / "other"))
    with pytest.raises(InputError, match="another target vocabulary"):
        soft_targets.load(out, full, load_tokenizer(tmp_path / "other"), top_k=8)


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
            {**paths, "src_tokenizer": str(bert_dir), "tgt_tokenizer": str(bert_dir),
             "inputs": {"soft_targets": str(out)}}, device="cpu").run()
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    steps = [r for r in log if r["event"] == "train"]
    assert steps and all("bidi" in r for r in steps)
