"""The Transformer baseline (Vaswani et al. 2017) as fairseq's `transformer` architecture builds it.

Every BERT-into-NMT paper compares against this model, so it follows fairseq's choices: sinusoidal
positions added to embeddings scaled by sqrt(d), post-norm residual blocks (pre-norm optional, as
fairseq's `--encoder-normalize-before`; then a final LayerNorm closes each stack), dropout after
each sub-layer and on the embeddings, ReLU FFN, separate source and target embeddings, the decoder's
output projection tied to its input embedding (no bias), label-smoothed cross-entropy.

Details the papers and fairseq leave to us, and what we chose:
- positions count from 0 (fairseq offsets them by padding_idx + 1; for a model trained from scratch
  only the difference between positions matters);
- sequences longer than `max_positions` are an error rather than silently wrapped;
- the decoder's position during incremental decoding is the length of its self-attention cache.

The building blocks here serve every method: `TransformerEncoder` and `TransformerDecoder` (its
causal or non-causal self-attention, incremental `start`/`step`), and `EncoderDecoder`, the
autoregressive model every method with beam search builds from an encoder and this decoder.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from nmtbench.data.tokenization import Vocab
from nmtbench.errors import InputError, TooLong
from nmtbench.parts.contract import (
    Batch,
    Losses,
    Method,
    MethodSettings,
    Model,
    Progress,
    method_settings,
)
from nmtbench.parts.losses import compiled_smoothed_nll, smoothed_nll_of_logits


@dataclass
class TransformerConfig:
    d_model: int = 512
    ffn_dim: int = 2048
    n_heads: int = 8
    encoder_layers: int = 6
    decoder_layers: int = 6
    dropout: float = 0.1  # on embeddings and every sub-layer's output
    attention_dropout: float = 0.0  # on attention weights (fairseq default 0)
    activation_dropout: float = 0.0  # inside the FFN, after ReLU (fairseq default 0)
    pre_norm: bool = False
    max_positions: int = 1024
    label_smoothing: float = 0.1


# fairseq's named architectures, plus the deep-encoder variants of Weng et al. (`001`).
SIZES: dict[str, TransformerConfig] = {
    # The toy world's sizes, chosen so the embedded default trains in minutes on two CPU cores:
    # `tiny` stands for base; the others keep the papers' order of size (deep fusion's Table 1:
    # base 62M < Transformer-12 123M < Transformer-20 159M < big 207M) at 1.6M < 1.8M < 2.2M
    # < 3.5M parameters on the toy world's vocabularies: deeper encoders, a wider model. Depths
    # measured on the default's data (valid loss after its 10 epochs; tiny's 3 layers: 1.98):
    # post-norm, 4 encoder layers 2.42, 6 stall at 3.66 (3.16 at lr 0.001, 3.34 with 400
    # warm-up updates); pre-norm 6 reach 2.23, 9 stall at 3.18.
    "tiny": TransformerConfig(d_model=128, ffn_dim=512, n_heads=4, encoder_layers=3,
                              decoder_layers=3, dropout=0.1),
    "tiny-deep12": TransformerConfig(d_model=128, ffn_dim=512, n_heads=4, encoder_layers=4,
                                     decoder_layers=3, dropout=0.1),
    "tiny-deep20": TransformerConfig(d_model=128, ffn_dim=512, n_heads=4, encoder_layers=6,
                                     decoder_layers=3, dropout=0.1, pre_norm=True),
    "tiny-big": TransformerConfig(d_model=192, ffn_dim=768, n_heads=4, encoder_layers=3,
                                  decoder_layers=3, dropout=0.1),
    # real data on a laptop's CPU (config/multi30k.yaml): iwslt's shape at half its width
    "small": TransformerConfig(d_model=256, ffn_dim=1024, n_heads=4, encoder_layers=3,
                               decoder_layers=3, dropout=0.1),
    "iwslt": TransformerConfig(d_model=512, ffn_dim=1024, n_heads=4, dropout=0.3),
    "base": TransformerConfig(d_model=512, ffn_dim=2048, n_heads=8, dropout=0.1),
    "big": TransformerConfig(d_model=1024, ffn_dim=4096, n_heads=16, dropout=0.3),
    # Weng et al. give only d_model 768; their #Param (123M and 159M) differ by 36M for 8
    # encoder layers, 4.5M a layer: an FFN of 1536 (4.7M), not 3072 (7.1M, 57M for 8 layers)
    "deep12": TransformerConfig(d_model=768, ffn_dim=1536, n_heads=12, encoder_layers=12,
                                dropout=0.1),
    "deep20": TransformerConfig(d_model=768, ffn_dim=1536, n_heads=12, encoder_layers=20,
                                dropout=0.1, pre_norm=True),
    # deep fusion's decoder (d_dec 768): layers of BERT-base's shape
    "d768": TransformerConfig(d_model=768, ffn_dim=3072, n_heads=12, dropout=0.1),
}


class SizedSettings(MethodSettings):
    """Settings of a method with Transformer parts: `size` (default "base") picks a SIZES
    entry and any architecture field given overrides it."""

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> SizedSettings:
        size = cfg.get("size", "base")
        if size not in SIZES:
            raise InputError(f"unknown transformer size {size!r}; known: {', '.join(SIZES)}")
        sized = {f.name: getattr(SIZES[size], f.name) for f in fields(TransformerConfig)
                 if f.name in cls.keys()}
        settings = cls(**{**sized, **{k: cfg[k] for k in cls.keys() if k in cfg}})
        if settings.d_model % settings.n_heads:
            raise InputError(f"d_model {settings.d_model} is not a multiple of n_heads "
                             f"{settings.n_heads} (each head attends over d_model / n_heads)")
        return settings

    @property
    def architecture(self) -> TransformerConfig:
        """The Transformer parts' shape (a field the method does not have: its size's)."""
        size = SIZES[self.size]
        return TransformerConfig(**{f.name: getattr(self, f.name, getattr(size, f.name))
                                    for f in fields(TransformerConfig)})


@method_settings("transformer")
class TransformerSettings(SizedSettings):
    pass


def sinusoids(n: int, d: int) -> torch.Tensor:
    """fairseq's sinusoidal table (n, d): sines in the first half of the channels, cosines in
    the second (not interleaved as in Vaswani et al.)."""
    half = d // 2
    freq = torch.exp(torch.arange(half, dtype=torch.float) * -(math.log(10000.0) / (half - 1)))
    angle = torch.arange(n, dtype=torch.float)[:, None] * freq[None, :]  # (n, half)
    table = torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)  # (n, 2 * half)
    return F.pad(table, (0, d - 2 * half))  # (n, d); a zero channel when d is odd


class MultiheadAttention(nn.Module):
    """Attention with separate q/k/v/out projections, so keys/values can be projected once and
    cached: `kv` projects the memory, `forward` attends a query over given keys/values."""

    def __init__(self, d_model: int, n_heads: int, dropout: float, kdim: int | None = None):
        super().__init__()
        assert d_model % n_heads == 0, "d_model must be divisible by n_heads"
        self.n_heads = n_heads
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(kdim or d_model, d_model)  # kdim: a memory of another width
        self.v_proj = nn.Linear(kdim or d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        return x.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2)  # (B, H, T, Dh)

    def kv(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values (B, H, S, Dh) of the memory (B, S, kdim)."""
        return self._split(self.k_proj(memory)), self._split(self.v_proj(memory))

    def forward(self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                mask: torch.Tensor | None = None, causal: bool = False) -> torch.Tensor:
        """x (B, T, D) attends over k, v (B, H, S, Dh); mask (B, 1, 1, S) is True where allowed."""
        B, T, D = x.shape
        q = self._split(self.q_proj(x))  # (B, H, T, Dh)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=causal,
            dropout_p=self.dropout if self.training else 0.0)  # (B, H, T, Dh)
        return self.out_proj(y.transpose(1, 2).reshape(B, T, D))  # (B, T, D)


ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu,  # BERT's
               "gelu_new": lambda x: F.gelu(x, approximate="tanh")}  # GPT-2's


class FeedForward(nn.Module):
    """fc2(activation(fc1(x))): ReLU, or the GELU of a pre-trained model whose weights a layer
    takes (`activation`, a key of ACTIVATIONS)."""

    def __init__(self, d_model: int, ffn_dim: int, activation_dropout: float):
        super().__init__()
        self.fc1 = nn.Linear(d_model, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, d_model)
        self.drop = nn.Dropout(activation_dropout)
        self.activation = "relu"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.drop(ACTIVATIONS[self.activation](self.fc1(x))))


class Encoded(NamedTuple):
    """An encoder's output: what the decoder attends to, a LENGTH token's final state, and
    other states a decoder may attend to beside the memory (`context`, by name: BERT-fused's
    BERT output and its mask), batch dimension first."""

    memory: torch.Tensor  # (B, S, D)
    mask: torch.Tensor  # (B, 1, 1, S) True at real source tokens
    length: torch.Tensor | None = None  # (B, D) when the encoder predicts target lengths
    context: dict[str, torch.Tensor] | None = None


class Block(nn.Module):
    """Residual plumbing shared by both layer types: post-norm LN(x + f(x)) or pre-norm
    x + f(LN(x)); `_in` gives f its input, `_out` closes the residual."""

    compiled_in_training = True  # Model.compile_for_training compiles each layer

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.pre_norm = cfg.pre_norm
        self.drop = nn.Dropout(cfg.dropout)

    def _in(self, norm: nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
        return norm(x) if self.pre_norm else x

    def _out(self, norm: nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
        return x if self.pre_norm else norm(x)


class EncoderLayer(Block):
    def __init__(self, cfg: TransformerConfig):
        super().__init__(cfg)
        self.self_attn = MultiheadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout)
        self.self_attn_norm = nn.LayerNorm(cfg.d_model)
        self.ffn = FeedForward(cfg.d_model, cfg.ffn_dim, cfg.activation_dropout)
        self.ffn_norm = nn.LayerNorm(cfg.d_model)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """x (B, S, D); src_mask (B, 1, 1, S) True at real tokens."""
        h = self._in(self.self_attn_norm, x)
        x = self._out(self.self_attn_norm,
                      x + self.drop(self.self_attn(h, *self.self_attn.kv(h), mask=src_mask)))
        h = self._in(self.ffn_norm, x)
        return self._out(self.ffn_norm, x + self.drop(self.ffn(h)))  # (B, S, D)


class DecoderLayer(Block):
    def __init__(self, cfg: TransformerConfig, memory_dim: int | None = None):
        super().__init__(cfg)
        self.self_attn = MultiheadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout)
        self.self_attn_norm = nn.LayerNorm(cfg.d_model)
        self.cross_attn = MultiheadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout,
                                             kdim=memory_dim)
        self.cross_attn_norm = nn.LayerNorm(cfg.d_model)
        self.ffn = FeedForward(cfg.d_model, cfg.ffn_dim, cfg.activation_dropout)
        self.ffn_norm = nn.LayerNorm(cfg.d_model)

    def memory_state(self, encoded: Encoded) -> dict[str, torch.Tensor]:
        """What the cross-attention sub-layer reads of the encoder's output, computed once
        per source (and kept for incremental decoding), batch dimension first: here the
        memory's keys and values (B, H, S, Dh). A layer attending to more than the memory
        (BERT-fused) extends it and `attend_memory`."""
        k, v = self.cross_attn.kv(encoded.memory)
        return {"k": k, "v": v}

    def attend_memory(self, h: torch.Tensor, memory: dict[str, torch.Tensor],
                      src_mask: torch.Tensor) -> torch.Tensor:
        """The cross-attention sub-layer's output for h (B, T, D), after dropout."""
        return self.drop(self.cross_attn(h, memory["k"], memory["v"], mask=src_mask))

    def forward(self, x: torch.Tensor, memory: dict[str, torch.Tensor], src_mask: torch.Tensor,
                cache: tuple[torch.Tensor, torch.Tensor] | None = None,
                tgt_mask: torch.Tensor | None = None,
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """x (B, T, D); memory: `memory_state` of the encoder output; src_mask (B, 1, 1, S).

        Without `cache` this is the full (training) pass: causal self-attention over x. With
        `cache` = (k, v) (B, H, t, Dh) of the t earlier positions, x holds the next position(s)
        and attends over cache + itself. With `tgt_mask` (B, 1, 1, T), True at real target
        tokens, self-attention sees every real position (the non-causal decoder of a
        conditional masked LM). Returns x and the extended self-attention (k, v).
        """
        h = self._in(self.self_attn_norm, x)
        k, v = self.self_attn.kv(h)  # (B, H, T, Dh)
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        causal = cache is None and tgt_mask is None
        x = self._out(self.self_attn_norm,
                      x + self.drop(self.self_attn(h, k, v, mask=tgt_mask, causal=causal)))
        h = self._in(self.cross_attn_norm, x)
        x = self._out(self.cross_attn_norm, x + self.attend_memory(h, memory, src_mask))
        h = self._in(self.ffn_norm, x)
        return self._out(self.ffn_norm, x + self.drop(self.ffn(h))), (k, v)  # (B, T, D)


def fairseq_init(*modules: nn.Module) -> None:
    """fairseq's initialisation, exactly, applied to `modules` in order (the order decides
    which random numbers each gets): attention projections xavier-uniform (q/k/v with gain
    1/sqrt(2) when they read the model's own width, as fairseq's MultiheadAttention with
    qkv_same_dim), the output projection's bias zero, q/k/v biases and the feed-forward layers
    left at PyTorch's nn.Linear default (fairseq builds them as plain nn.Linear); embeddings
    N(0, d^-0.5) with a zero pad row. Measured on the toy world (benchmarks/parity, 3 seeds):
    xavier-initialised feed-forward layers with zero biases ended the default's 288 updates
    with a 7% higher valid loss."""
    def init(module: nn.Module) -> None:
        if isinstance(module, MultiheadAttention):
            same_dim = module.k_proj.in_features == module.q_proj.in_features
            for proj in (module.q_proj, module.k_proj, module.v_proj):
                nn.init.xavier_uniform_(proj.weight, gain=1 / math.sqrt(2) if same_dim else 1.0)
            nn.init.xavier_uniform_(module.out_proj.weight)
            nn.init.zeros_(module.out_proj.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=module.embedding_dim ** -0.5)
            if module.padding_idx is not None:
                nn.init.zeros_(module.weight[module.padding_idx])

    for module in modules:
        module.apply(init)


def embedding(vocab: Vocab, d_model: int) -> nn.Embedding:
    return nn.Embedding(vocab.size, d_model, padding_idx=vocab.pad)


class Embedder(nn.Module):
    """Scaled token embeddings plus sinusoidal positions, then dropout (fairseq's); or, for a
    stack initialised from a pre-trained model (`take_pretrained`), its own input: unscaled
    embeddings plus its learned positions, then its LayerNorm (BERT's) if it has one."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.scale = math.sqrt(cfg.d_model)
        self.max_positions = cfg.max_positions
        self.register_buffer("positions", sinusoids(cfg.max_positions, cfg.d_model),
                             persistent=False)  # (P, D), derived, so not saved
        self.norm: nn.Module = nn.Identity()
        self.drop = nn.Dropout(cfg.dropout)

    def take_pretrained(self, positions: torch.Tensor, norm: nn.LayerNorm | None) -> None:
        """Learned positions (P, D) (a copy, trained from here) and the input LayerNorm."""
        del self.positions
        self.max_positions = min(self.max_positions, positions.size(0))
        self.positions = nn.Parameter(positions[:self.max_positions].detach().clone())
        self.scale = 1.0
        if norm is not None:
            self.norm = norm

    def forward(self, embed: nn.Embedding, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        """ids (B, T) at positions start.. -> (B, T, D)."""
        end = start + ids.size(1)
        if end > self.max_positions:
            raise TooLong(end, self.max_positions)
        return self.drop(self.norm(self.scale * embed(ids) + self.positions[start:end]))


class TransformerEncoder(nn.Module):
    """Embeddings and a stack of encoder layers (then a LayerNorm when pre-norm).

    With `embed_lengths` (Mask-Predict's LENGTH token; a parallel-decoding method sets it
    after initialising the rest, as Mask-Predict does), that table's first row is put in front
    of the embedded source, unscaled and without a position; its final state predicts the
    target length and is left out of the memory."""

    def __init__(self, cfg: TransformerConfig, embed: nn.Embedding,
                 layers: list[EncoderLayer] | None = None):
        """`layers`: the stack, when a method builds its own (EncoderLayer subclasses)."""
        super().__init__()
        self.embed = embed
        self.embedder = Embedder(cfg)
        self.layers = nn.ModuleList(layers if layers is not None else
                                    (EncoderLayer(cfg) for _ in range(cfg.encoder_layers)))
        # pre-norm stacks end un-normalised, so fairseq adds a final LayerNorm to each
        self.norm = nn.LayerNorm(cfg.d_model) if cfg.pre_norm else nn.Identity()
        self.embed_lengths: nn.Embedding | None = None

    def embed_source(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S) -> the embedded source (B, S, D), after the LENGTH token when there is
        one (B, 1 + S, D), and its attention mask (B, 1, 1, S or 1 + S)."""
        keep = src != self.embed.padding_idx  # (B, S)
        x = self.embedder(self.embed, src)  # (B, S, D)
        if self.embed_lengths is None:
            return x, keep[:, None, None, :]
        length = self.embed_lengths.weight[:1].expand(src.size(0), 1, -1)  # (B, 1, D)
        keep = torch.cat([torch.ones_like(keep[:, :1]), keep], dim=1)
        return torch.cat([length, x], dim=1), keep[:, None, None, :]

    def finish(self, x: torch.Tensor, mask: torch.Tensor,
               context: dict[str, torch.Tensor] | None = None) -> Encoded:
        """The last layer's states and mask (as `embed_source` made them) -> the output."""
        x = self.norm(x)
        if self.embed_lengths is None:
            return Encoded(x, mask, None, context)
        return Encoded(x[:, 1:], mask[..., 1:], x[:, 0], context)

    def forward(self, src: torch.Tensor) -> Encoded:
        x, mask = self.embed_source(src)
        for layer in self.layers:
            x = layer(x, mask)
        return self.finish(x, mask)


class TransformerDecoder(nn.Module):
    """Embeddings, decoder layers (self-attention causal, or over every real target position
    for a conditional masked LM), final LayerNorm when pre-norm, and the output projection
    tied to the embeddings (no bias).

    Incremental state (`start`, `step`): a flat dict of tensors whose first dim is the batch:
      "source" (B,) the source sentence each row decodes (see `reorder`);
      "src_mask" (B, S) True at real source tokens;
      "memory{i}.<name>": layer i's `memory_state` of the encoder output (its keys and
      values "memory{i}.k", "memory{i}.v" (B, H, S, Dh));
      "self_k{i}", "self_v{i}" (B, H, t, Dh) layer i's self-attention cache of the t fed
      tokens, whose length t is also the position of the next token.
    """

    def __init__(self, cfg: TransformerConfig, embed: nn.Embedding, causal: bool = True,
                 memory_dim: int | None = None, layers: list[DecoderLayer] | None = None):
        """`memory_dim`: the memory's width when it differs from d_model (a BERT encoder);
        cross-attention projects it (fairseq's kdim/vdim). `layers`: the stack, when a method
        builds its own (DecoderLayer subclasses)."""
        super().__init__()
        self.embed = embed
        self.causal = causal
        self.embedder = Embedder(cfg)
        self.max_positions = cfg.max_positions
        self.layers = nn.ModuleList(layers if layers is not None else
                                    (DecoderLayer(cfg, memory_dim)
                                     for _ in range(cfg.decoder_layers)))
        self.norm = nn.LayerNorm(cfg.d_model) if cfg.pre_norm else nn.Identity()

    def project(self, states: torch.Tensor) -> torch.Tensor:
        """The output layer: states (..., D) -> logits (..., V), tied to the embeddings."""
        return F.linear(states, self.embed.weight)

    def states(self, tokens: torch.Tensor, encoded: Encoded,
               memory: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        """tokens (B, T) -> the states the output layer reads (B, T, D), every position at
        once (teacher forcing): the last layer's, after the final norm of a pre-norm stack.
        `memory`: `memory_states(encoded)` when computed already (mask-predict's iterations
        over one source)."""
        tgt_mask = None if self.causal else (tokens != self.embed.padding_idx)[:, None, None, :]
        x = self.embedder(self.embed, tokens)
        for i, layer in enumerate(self.layers):
            x, _ = layer(x, layer.memory_state(encoded) if memory is None
                         else layer_memory(memory, i), encoded.mask, tgt_mask=tgt_mask)
        return self.norm(x)

    def forward(self, tokens: torch.Tensor, encoded: Encoded,
                memory: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        """tokens (B, T) -> logits (B, T, V), every position at once (teacher forcing)."""
        return self.project(self.states(tokens, encoded, memory))

    def memory_states(self, encoded: Encoded) -> dict[str, torch.Tensor]:
        """Every layer's `memory_state` of the encoder output, as "memory{i}.<name>"."""
        return {f"memory{i}.{name}": value for i, layer in enumerate(self.layers)
                for name, value in layer.memory_state(encoded).items()}

    def start(self, encoded: Encoded) -> dict[str, torch.Tensor]:
        mask = encoded.mask[:, 0, 0, :]  # (B, S)
        state = {"source": torch.arange(mask.size(0), device=mask.device), "src_mask": mask,
                 **self.memory_states(encoded)}
        for i in range(len(self.layers)):
            # empty caches (B, H, 0, Dh) in the projections' dtype (bf16 under autocast)
            k, v = state[f"memory{i}.k"], state[f"memory{i}.v"]
            state[f"self_k{i}"], state[f"self_v{i}"] = k[:, :, :0], v[:, :, :0]
        return state

    def step(self, tokens: torch.Tensor, state: dict[str, Any]) -> torch.Tensor:
        """The last tokens (B,) -> logits (B, V) of the next; extends the caches in state."""
        pos = state["self_k0"].size(2)  # tokens fed so far = position of this one
        src_mask = state["src_mask"][:, None, None, :]  # (B, 1, 1, S)
        x = self.embedder(self.embed, tokens[:, None], start=pos)  # (B, 1, D)
        for i, layer in enumerate(self.layers):
            cache = (state[f"self_k{i}"], state[f"self_v{i}"])
            x, (state[f"self_k{i}"], state[f"self_v{i}"]) = layer(x, layer_memory(state, i),
                                                                  src_mask, cache)
        return self.project(self.norm(x))[:, 0]


def layer_memory(state: dict[str, torch.Tensor], i: int) -> dict[str, torch.Tensor]:
    """Layer i's entries "memory{i}.<name>" of a state, by <name>."""
    prefix = f"memory{i}."
    return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}


def reorder(state: dict[str, Any], index: torch.Tensor) -> dict[str, Any]:
    """Rows `index` of every tensor in a decoding state.

    A state with "source" (`TransformerDecoder.start`) holds, besides the self-attention caches
    ("self_*"), rows that depend on the source sentence alone (the memory's keys and values,
    masks): when `index` keeps every row on a row of the same sentence, as beam search does
    until a sentence finishes, those rows already hold their values and are not copied."""
    source = state.get("source")
    if (source is not None and index.size(0) == source.size(0)
            and torch.equal(source.index_select(0, index), source)):
        return {k: v.index_select(0, index) if k.startswith("self_") else v
                for k, v in state.items()}
    return {k: v.index_select(0, index) for k, v in state.items()}


class EncoderDecoder(Model):
    """An encoder and an autoregressive decoder trained with label-smoothed cross-entropy:
    the model of every autoregressive method (the `Autoregressive` hooks, for beam search).

    `encoder(src) -> Encoded`; `decoder(tokens, encoded) -> logits` with
    `decoder.start` / `decoder.step` for incremental decoding (`TransformerDecoder`)."""

    decoding = "at"

    def __init__(self, encoder: nn.Module, decoder: TransformerDecoder, settings: SizedSettings,
                 src_vocab: Vocab, tgt_vocab: Vocab, source_bos: bool):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
        self.settings = settings
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.source_bos = source_bos
        self.max_positions = decoder.max_positions

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """src (B, S), tgt_in (B, T) -> logits (B, T, V) (teacher forcing)."""
        return self.decoder(tgt_in, self.encoder(src))

    def losses(self, batch: Batch, progress: Progress | None = None) -> Losses:
        return self.token_losses(self(batch.src, batch.tgt_in), batch)

    def token_losses(self, logits: torch.Tensor, batch: Batch) -> Losses:
        """Label-smoothed cross-entropy of teacher-forced logits (B, T, V) against the batch's
        targets: the term "tokens" (a method adding terms of its own starts from it)."""
        target = batch.tgt_out.flatten()  # (B*T,)
        smoothed_nll = compiled_smoothed_nll() if self.compiled else smoothed_nll_of_logits
        loss_sum, nll_sum = smoothed_nll(logits.flatten(0, 1), target,
                                         self.settings.label_smoothing, self.tgt_vocab.pad)
        ntokens = (target != self.tgt_vocab.pad).sum()  # on the device: no wait for the GPU
        return Losses({"tokens": loss_sum}, ntokens, {"nll": nll_sum.detach().double() / ntokens})

    def encode(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        return self.decoder.start(self.encoder(src))

    def decode_step(self, tokens: torch.Tensor, state: dict[str, Any]) -> torch.Tensor:
        logits = self.decoder.step(tokens, state)  # (B, V)
        return F.log_softmax(logits, dim=-1, dtype=torch.float32)

    def reorder_state(self, state: dict[str, Any], index: torch.Tensor) -> dict[str, Any]:
        return reorder(state, index)


class Transformer(Method):
    """The baseline: a Transformer encoder and decoder, fairseq-initialised."""

    settings = TransformerSettings
    autoregressive = EncoderDecoder

    @classmethod
    def build(cls, cfg: Mapping[str, Any], src_vocab: Vocab, tgt_vocab: Vocab,
              pretrained: Mapping[str, Any] | None = None,
              weights: bool = True) -> EncoderDecoder:
        settings = cls.read_settings(cfg)
        arch = settings.architecture
        if settings.share_embeddings and (settings.vocabulary == "sides"
                                          or src_vocab != tgt_vocab):
            raise InputError("share_embeddings needs one vocabulary for both sides "
                             "(vocabulary: joint, or a checkpoint's)")
        # built and initialised in fairseq's order, so a seed gives fairseq's weights
        embeds = [embedding(src_vocab, arch.d_model)]
        if not settings.share_embeddings:
            embeds.append(embedding(tgt_vocab, arch.d_model))
        encoder = TransformerEncoder(arch, embeds[0])
        decoder = TransformerDecoder(arch, embeds[-1])
        fairseq_init(*embeds, encoder.layers, decoder.layers)
        return cls.autoregressive(encoder, decoder, settings, src_vocab, tgt_vocab,
                                  settings.src_bos)
