"""The settings of toy-world pre-training (nmtbench/training/pretraining.py), without torch: the
config check reads them."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from nmtbench.errors import InputError

MODELS = ("bert", "gpt2")


@dataclass
class PretrainConfig:
    model: str  # "bert" (masked LM) or "gpt2" (causal LM)
    seed: int = 1
    d_model: int = 128
    ffn_dim: int = 512
    n_heads: int = 4
    layers: int = 3
    # on embeddings, attention weights and every sub-layer's output (BERT's and GPT-2's 0.1);
    # saved with the checkpoint, so the methods that train with it in train mode use it too
    dropout: float = 0.1
    max_positions: int = 256
    max_tokens: int = 4096  # padded tokens per batch
    lr: float = 1e-3
    warmup_updates: int = 200
    max_updates: int = 1500
    weight_decay: float = 0.01
    mask_prob: float = 0.15  # share of tokens selected for prediction
    # of the selected tokens, the share replaced by [MASK] and by a random token; the rest stay
    # as they are (BERT: 80/10/10)
    mask_replace_prob: float = 0.8
    random_replace_prob: float = 0.1
    heldout_sentences: int = 1000
    log_interval: int = 100

    @classmethod
    def from_dict(cls, cfg: dict[str, Any]) -> PretrainConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise InputError(f"pre-training setting {unknown[0]!r} is unknown; known: "
                             f"{', '.join(sorted(known))}")
        if cfg.get("model") not in MODELS:
            raise InputError(f"pre-training model {cfg.get('model')!r}: use one of "
                             f"{', '.join(MODELS)}")
        return cls(**cfg)

    def __post_init__(self) -> None:
        if self.max_tokens < self.max_positions:  # a sentence would be a batch over budget
            raise InputError(f"pre-training settings max_tokens {self.max_tokens} is less than "
                             f"max_positions {self.max_positions}: a batch could not hold the "
                             "longest sentence it keeps")
        if self.mask_replace_prob + self.random_replace_prob > 1:
            raise InputError("pre-training settings mask_replace_prob + random_replace_prob = "
                             f"{self.mask_replace_prob} + {self.random_replace_prob}: they share "
                             "the selected tokens, so their sum is at most 1")
