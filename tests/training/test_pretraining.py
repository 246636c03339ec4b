"""Toy pre-training: BERT's MLM masking statistics (15%, then 80/10/10), GPT-2 labels, and a
tiny end-to-end pretrain() whose output loads with AutoModel/AutoTokenizer."""

import json
import random

import pytest
import torch
from transformers import AutoModel, AutoTokenizer, BertModel, GPT2Model

from nmtbench.data.tokenization import load_tokenizer, train_wordpiece
from nmtbench.errors import InputError
from nmtbench.parts.pretrained import load_model
from nmtbench.training.pretraining import (
    Batcher,
    PretrainConfig,
    heldout_scores,
    pretrain,
    split_corpus,
)

TINY = {"d_model": 32, "ffn_dim": 64, "n_heads": 2, "layers": 2, "max_positions": 64,
        "max_tokens": 256, "max_updates": 3, "warmup_updates": 1, "heldout_sentences": 20,
        "log_interval": 1}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """(a 300-line corpus, its WordPiece tokenizer directory)."""
    out = tmp_path_factory.mktemp("pretrain")
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefgh") for _ in range(rng.randint(2, 6)))
             for _ in range(60)]
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) for _ in range(300)]
    (out / "mono.txt").write_text("\n".join(lines) + "\n")
    train_wordpiece([out / "mono.txt"], out / "tok", 120)
    return out / "mono.txt", out / "tok"


def sequences(tok, n, rng):
    """n [CLS] w .. w [SEP] sequences of 5..40 random non-special ids."""
    ordinary = sorted(set(range(len(tok))) - set(tok.all_special_ids))
    return [[tok.cls_token_id] + rng.choices(ordinary, k=rng.randint(5, 40)) + [tok.sep_token_id]
            for _ in range(n)]


@pytest.mark.parametrize("select, masked, randomised", [(0.15, 0.8, 0.1), (0.3, 0.5, 0.1)])
def test_mlm_masking_statistics(corpus, select, masked, randomised):
    """`mask_prob` of the ordinary tokens are selected (BERT: 15%); of those
    `mask_replace_prob` [MASK], `random_replace_prob` random, the rest kept (BERT: 80/10/10;
    the toy BERTs' 50/10/40); [CLS]/[SEP]/[PAD] never; labels hold the original ids exactly
    where selected."""
    tok = load_tokenizer(corpus[1])
    batcher = Batcher(PretrainConfig(model="bert", mask_prob=select, mask_replace_prob=masked,
                                     random_replace_prob=randomised), tok)
    special = torch.tensor([tok.cls_token_id, tok.sep_token_id, tok.pad_token_id])
    torch.manual_seed(0)
    rng = random.Random(0)
    counts = dict(ordinary=0, selected=0, masked=0, kept=0, other=0)
    for _ in range(20):
        seqs = sequences(tok, 50, rng)
        longest = max(map(len, seqs))
        orig = torch.tensor([s + [tok.pad_token_id] * (longest - len(s)) for s in seqs])
        out = batcher(seqs)
        ids, labels = out["input_ids"], out["labels"]
        assert ids.shape == labels.shape == orig.shape
        assert torch.equal(out["attention_mask"], (orig != tok.pad_token_id).long())
        is_special = torch.isin(orig, special)
        selected = labels != -100
        assert not (selected & is_special).any()
        assert torch.equal(ids[~selected], orig[~selected])  # unselected: untouched
        assert torch.equal(labels[selected], orig[selected])
        picked, was = ids[selected], orig[selected]
        counts["ordinary"] += int((~is_special).sum())
        counts["selected"] += int(selected.sum())
        counts["masked"] += int((picked == tok.mask_token_id).sum())
        counts["kept"] += int((picked == was).sum())
        counts["other"] += int(((picked != was) & (picked != tok.mask_token_id)).sum())
    assert counts["ordinary"] > 20000 and counts["selected"] > 2500
    # binomial sd: 0.0025 for the selection rate, <= 0.008 for the shares of the selected
    assert counts["selected"] / counts["ordinary"] == pytest.approx(select, abs=0.015)
    assert counts["masked"] / counts["selected"] == pytest.approx(masked, abs=0.04)
    # a random replacement can draw the token itself: then it counts as kept
    assert counts["other"] / counts["selected"] == pytest.approx(randomised, abs=0.03)
    assert counts["kept"] / counts["selected"] == pytest.approx(1 - masked - randomised,
                                                                 abs=0.03)


class CopyInput(torch.nn.Module):
    """A 'masked LM' that predicts each position's input token."""

    def __init__(self, vocab_size: int):
        super().__init__()
        self.vocab_size = vocab_size

    def forward(self, input_ids, attention_mask):
        logits = 10.0 * torch.nn.functional.one_hot(input_ids, self.vocab_size).float()
        return type("Out", (), {"logits": logits})


def test_heldout_accuracy_scores_only_the_positions_given_as_mask(corpus):
    """Kept tokens give their answer away: a model that copies its input would score their
    share of the selected tokens if they counted. Only [MASK] positions do, so it scores 0."""
    tok = load_tokenizer(corpus[1])
    seqs = sequences(tok, 200, random.Random(2))
    batcher = Batcher(PretrainConfig(model="bert", mask_prob=0.5, mask_replace_prob=0.5,
                                     random_replace_prob=0.0), tok)
    scores = heldout_scores(CopyInput(len(tok)), batcher, seqs, max_tokens=512, seed=1)
    masked = sum(len(s) - 2 for s in seqs) * 0.5 * 0.5
    assert scores["accuracy"] == 0.0
    assert scores["scored_tokens"] == pytest.approx(masked, rel=0.15)


def test_gpt2_batches_label_every_real_token(corpus):
    """GPT-2 batches: right-padded ids, labels = ids except -100 at padding."""
    tok = load_tokenizer(corpus[1])
    seqs = sequences(tok, 4, random.Random(1))
    out = Batcher(PretrainConfig(model="gpt2"), tok)(seqs)
    for row, s in enumerate(seqs):
        assert out["input_ids"][row, :len(s)].tolist() == s
        assert out["labels"][row, :len(s)].tolist() == s
        assert (out["labels"][row, len(s):] == -100).all()
        assert out["attention_mask"][row].sum() == len(s)


@pytest.mark.parametrize("model, base", [("bert", BertModel), ("gpt2", GPT2Model)])
def test_pretrain_writes_a_loadable_checkpoint(corpus, tmp_path, model, base):
    """pretrain() writes a HF directory (AutoModel/AutoTokenizer load it) and a summary with
    held-out accuracy in [0, 1]; nothing temporary is left beside it."""
    out = tmp_path / "ckpt"
    summary = pretrain(corpus[0], corpus[1], out, {"model": model, **TINY})
    loaded = AutoModel.from_pretrained(out)
    assert isinstance(loaded, base) and loaded.config.num_hidden_layers == 2
    assert loaded.config.hidden_size == 32
    tok = AutoTokenizer.from_pretrained(out)
    assert len(tok) == len(load_tokenizer(corpus[1])) == loaded.config.vocab_size
    saved = json.loads((out / "pretrain_summary.json").read_text())
    assert saved["updates"] == summary["updates"] == 3
    assert saved["heldout_sentences"] == 20 and saved["train_sentences"] == 280
    assert 0.0 <= saved["heldout"]["accuracy"] <= 1.0 and saved["heldout"]["scored_tokens"] > 0
    assert saved["heldout"]["perplexity"] > 1.0
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]
    if model == "bert":  # the path the NMT methods load it by
        assert isinstance(load_model(str(out)), BertModel)


def test_extra_corpora_are_trained_on_and_never_held_out(corpus, tmp_path):
    """Text beyond the dataset's own goes before its training sentences, a line of each
    extra corpus in turn; the held-out sentences stay the dataset's last ones, as without it."""
    text, tok_dir = corpus
    tok, cfg = load_tokenizer(tok_dir), PretrainConfig.from_dict({"model": "bert", **TINY})
    extra = [tmp_path / "a.txt", tmp_path / "b.txt"]
    extra[0].write_text("ab cd\nab\n")
    extra[1].write_text("ef\n")
    _, train, heldout, _ = split_corpus(text, tok, cfg)
    name, with_extra, same, _ = split_corpus(text, tok, cfg, extra)
    assert same == heldout and len(heldout) == 20
    encode = [tok(line)["input_ids"] for line in ("ab cd", "ef", "ab")]
    assert with_extra == encode + train
    assert name == f"{text}; for training also {extra[0]} + {extra[1]}"
    summary = pretrain(text, tok_dir, tmp_path / "ckpt", {"model": "bert", **TINY},
                       train_only=extra)
    assert summary["train_sentences"] == 283 and summary["heldout_sentences"] == 20
    assert summary["corpus"] == name


def test_sentences_dropped_as_too_long_are_counted_in_the_summary(corpus, tmp_path):
    """A few sentences longer than max_positions are dropped (logged) and counted, by part;
    the held-out part is counted too, as its scores are of the sentences kept."""
    text, tok_dir = corpus
    tok = load_tokenizer(tok_dir)
    lengths = [len(ids) for ids in tok(text.read_text().splitlines())["input_ids"]]
    limit = sorted(lengths)[len(lengths) * 3 // 4]  # a quarter of them, or fewer, longer
    summary = pretrain(text, tok_dir, tmp_path / "ckpt",
                       {"model": "bert", **TINY, "max_positions": limit})
    dropped = {"train": sum(n > limit for n in lengths[:-20]),
               "heldout": sum(n > limit for n in lengths[-20:])}
    assert dropped["train"] > 0
    assert summary["dropped_sentences"] == dropped
    assert summary["train_sentences"] == 280 - dropped["train"]
    saved = json.loads((tmp_path / "ckpt" / "pretrain_summary.json").read_text())
    assert saved["dropped_sentences"] == dropped


@pytest.mark.parametrize("model, names", [
    ("bert", ("hidden_dropout_prob", "attention_probs_dropout_prob")),
    ("gpt2", ("resid_pdrop", "embd_pdrop", "attn_pdrop")),
])
def test_dropout_setting_is_saved_with_the_checkpoint(corpus, tmp_path, model, names):
    """`dropout` reaches every dropout of the saved config (BERT's and GPT-2's default 0.1
    otherwise): the methods that train with the checkpoint in train mode read it from there."""
    pretrain(corpus[0], corpus[1], tmp_path / "d0", {"model": model, **TINY, "dropout": 0.0})
    pretrain(corpus[0], corpus[1], tmp_path / "d1", {"model": model, **TINY})
    zero, default = (AutoModel.from_pretrained(tmp_path / d).config for d in ("d0", "d1"))
    assert [getattr(zero, n) for n in names] == [0.0] * len(names)
    assert [getattr(default, n) for n in names] == [0.1] * len(names)


@pytest.mark.parametrize("settings, message", [
    ({"model": "t5"}, "pre-training model 't5'"),
    ({"model": "bert", "lr_peak": 1.0}, "'lr_peak' is unknown"),
    ({"model": "bert", "heldout_sentences": 300}, "not more than heldout_sentences"),
    ({"model": "bert", "mask_replace_prob": 0.8, "random_replace_prob": 0.3},
     r"mask_replace_prob \+ random_replace_prob = 0.8 \+ 0.3: .* at most 1$"),
    # every sentence dropped: training waited forever for a first batch; half of them: it
    # trained on another corpus than the config names
    ({"model": "bert", "max_positions": 2, "heldout_sentences": 20},
     r"mono\.txt: 280 of 280 sentences are longer than max_positions \(2 tokens\); raise the "
     r"pre-training setting max_positions$"),
    ({"model": "bert", "max_positions": 7, "heldout_sentences": 20},
     r"mono\.txt: \d+ of 280 sentences are longer than max_positions \(7 tokens\); raise "
     r"the pre-training setting max_positions$"),
])
def test_bad_pretraining_input_is_an_input_error(corpus, tmp_path, settings, message):
    """Unknown model or setting, or a corpus no longer than the held-out part."""
    with pytest.raises(InputError, match=message):
        pretrain(corpus[0], corpus[1], tmp_path / "ckpt", settings)
    assert not (tmp_path / "ckpt").exists()
