"""Tiny BERT checkpoints in Hugging Face format (save_pretrained), a corpus in their words, and
the settings of tiny runs, for the tests that train and load models."""

import random
from pathlib import Path

import torch
from transformers import BertConfig, BertForMaskedLM, BertModel, BertTokenizer

from nmtbench.data.tokenization import Vocab

# [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4, then 95 words w5..w99
TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(5, 100)]
BERT_VOCAB = Vocab(size=100, pad=0, bos=2, eos=3, unk=1, mask=4)
TINY = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=64, type_vocab_size=2, pad_token_id=0)
# the checkpoint roles the method contract fills (conftest.tiny_berts) -> their names in configs
TINY_BERTS = {"src_bert": "tiny-src-bert", "tgt_bert": "tiny-tgt-bert"}


def save_tiny_bert(out: Path, mlm: bool = True, seed: int = 0) -> torch.nn.Module:
    """Write a random tiny BertForMaskedLM (or BertModel) and its tokenizer to `out`."""
    torch.manual_seed(seed)
    return _save(out, (BertForMaskedLM if mlm else BertModel)(BertConfig(**TINY)))


def save_tiny_gpt2(out: Path, seed: int = 0) -> torch.nn.Module:
    """Write a random tiny GPT2Model (no dropout) over the same vocabulary to `out`, with that
    vocabulary's tokenizer, as the toy world's GPT-2 reads its side's WordPiece."""
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(seed)
    return _save(out, GPT2Model(GPT2Config(vocab_size=100, n_positions=64, n_embd=32, n_layer=2,
                                           n_head=2, resid_pdrop=0.0, embd_pdrop=0.0,
                                           attn_pdrop=0.0)))


def save_byte_level_gpt2(out: Path, lines: list[str], seed: int = 0) -> torch.nn.Module:
    """Write a random tiny GPT2Model with a byte-level BPE trained on `lines` whose one
    special token is <|endoftext|> (the last id), as the public `gpt2`'s."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Config, GPT2Model, GPT2TokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(lines, vocab_size=300, min_frequency=1, show_progress=False)
    bpe.add_special_tokens(["<|endoftext|>"])
    eot = "<|endoftext|>"
    tokenizer = GPT2TokenizerFast(tokenizer_object=bpe, bos_token=eot, eos_token=eot,
                                  unk_token=eot)
    torch.manual_seed(seed)
    model = GPT2Model(GPT2Config(vocab_size=len(tokenizer), n_positions=256, n_embd=32, n_layer=2,
                                 n_head=2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                 bos_token_id=len(tokenizer) - 1,
                                 eos_token_id=len(tokenizer) - 1))
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(str(out))
    return model


def _save(out: Path, model: torch.nn.Module) -> torch.nn.Module:
    """The model and the tiny vocabulary's WordPiece tokenizer, in Hugging Face format."""
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    vocab = out / "vocab.txt"
    vocab.write_text("\n".join(TOKENS) + "\n")
    BertTokenizer(str(vocab), do_lower_case=False).save_pretrained(str(out))
    return model


def bert_param_count(V: int, H: int, L: int, I: int, P: int, T: int = 2) -> int:  # noqa: E741
    """A BertModel without pooler, by hand: word/position/type embeddings + LayerNorm, then
    per layer q/k/v/out (4 (H^2 + H)), LayerNorm, FFN (H I + I + I H + H), LayerNorm."""
    embeddings = V * H + P * H + T * H + 2 * H
    layer = 4 * (H * H + H) + 2 * H + (H * I + I + I * H + H) + 2 * H
    return embeddings + L * layer


# A tiny Transformer run's settings (the trainer's tests, and the CUDA ones beside them)
TINY_TRANSFORMER = {"method": "transformer", "size": "tiny", "d_model": 32, "ffn_dim": 64,
                    "n_heads": 2, "encoder_layers": 1, "decoder_layers": 1, "max_tokens": 800,
                    "lr": 0.003, "warmup_updates": 5, "clip_norm": 1.0, "max_epochs": 3,
                    "save_interval_updates": 4, "keep_last_epochs": 2, "log_interval": 1,
                    "seed": 3}
# Training settings of the tiny runs on tiny BERTs (BERT-KD's tests, and the CUDA ones)
TINY_TRAINING = {"max_tokens": 800, "lr": 0.003, "warmup_updates": 5, "max_epochs": 1,
                 "log_interval": 1, "seed": 3}


def write_bert_corpus(out: Path) -> dict[str, str]:
    """A tiny parallel corpus in the tiny BERT's words (w5 .. w99): the target is the source
    reversed."""
    rng = random.Random(0)
    words = TOKENS[5:]
    paths = {}
    for split, n in (("train", 48), ("valid", 8)):
        src = [" ".join(rng.choices(words, k=rng.randint(2, 6))) for _ in range(n)]
        for side, lines in (("src", src), ("tgt", [" ".join(s.split()[::-1]) for s in src])):
            path = out / f"{split}.{side}"
            path.write_text("\n".join(lines) + "\n")
            paths[f"{split}_{side}"] = str(path)
    return paths
