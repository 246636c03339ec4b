"""An LSTM encoder-decoder with attention: C-MLM's RNN baseline and RNN student (`003` Table 2).

The paper trains "RNN Seq2Seq" with OpenNMT-py and gives no architecture; we take OpenNMT-py's
RNN defaults where it has them and say where we chose:
- encoder: a bidirectional LSTM (OpenNMT-py's `brnn`, which its IWSLT recipes use), each
  direction half the hidden size, its final states (directions joined) starting the decoder;
- decoder: an LSTM with input feeding (the previous attentional state joins the next input)
  and Luong's global attention, "general" score h_t^T W h_s; the attentional state
  tanh(W_c [c_t; h_t]) feeds the output layer;
- 2 layers, 500 units, embeddings 500, dropout 0.3 between layers and on embeddings and the
  attentional state, parameters uniform in [-0.1, 0.1] (OpenNMT-py's param_init), label
  smoothing 0.1 as every model of the paper.

The model plugs into the shared `EncoderDecoder` (beam search, the trainer's losses, a BERT-KD
student's soft-target term) through the decoder interface the Transformer's has:
`decoder(tokens, encoded)`, `decoder.start(encoded)` and `decoder.step(tokens, state)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmtbench.data.tokenization import Vocab
from nmtbench.errors import InputError
from nmtbench.methods.transformer import Encoded, EncoderDecoder
from nmtbench.parts.contract import Method, MethodSettings, method_settings

PARAM_INIT = 0.1  # OpenNMT-py's -param_init


class RNNShape(Protocol):
    """The RNN's sizes: the settings of the RNN, and of a BERT-KD student."""

    rnn_embed: int
    rnn_hidden: int  # the decoder's; each encoder direction has half
    rnn_layers: int


@method_settings("rnn")
class RNNSettings(MethodSettings):
    """The RNN's settings."""


class RNNEncoder(nn.Module):
    def __init__(self, vocab: Vocab, cfg: RNNShape, dropout: float):
        super().__init__()
        if cfg.rnn_hidden % 2:
            raise InputError(f"rnn_hidden {cfg.rnn_hidden}: the bidirectional encoder halves "
                             "it, so it must be even")
        self.pad = vocab.pad
        self.embed = nn.Embedding(vocab.size, cfg.rnn_embed, padding_idx=vocab.pad)
        self.lstm = nn.LSTM(cfg.rnn_embed, cfg.rnn_hidden // 2, cfg.rnn_layers,
                            batch_first=True, bidirectional=True,
                            dropout=dropout if cfg.rnn_layers > 1 else 0.0)
        self.drop = nn.Dropout(dropout)

    def forward(self, src: torch.Tensor) -> Encoded:
        real = src != self.pad
        packed = pack_padded_sequence(self.drop(self.embed(src)), real.sum(1).cpu(),
                                      batch_first=True, enforce_sorted=False)
        out, (h, c) = self.lstm(packed)
        memory, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))

        def joined(state: torch.Tensor) -> torch.Tensor:  # (2L, B, H/2) -> (B, L, H)
            layers2, batch, half = state.shape
            return state.view(layers2 // 2, 2, batch, half).permute(2, 0, 1, 3).reshape(
                batch, layers2 // 2, 2 * half)

        return Encoded(memory, real[:, None, None, :],
                       context={"h": joined(h), "c": joined(c)})


class RNNDecoder(nn.Module):
    def __init__(self, vocab: Vocab, cfg: RNNShape, dropout: float, max_positions: int):
        super().__init__()
        hidden = cfg.rnn_hidden
        self.max_positions = max_positions
        self.embed = nn.Embedding(vocab.size, cfg.rnn_embed, padding_idx=vocab.pad)
        self.lstm = nn.LSTM(cfg.rnn_embed + hidden, hidden, cfg.rnn_layers, batch_first=True,
                            dropout=dropout if cfg.rnn_layers > 1 else 0.0)
        self.score = nn.Linear(hidden, hidden, bias=False)  # "general": h_t^T W h_s
        self.combine = nn.Linear(2 * hidden, hidden, bias=False)  # W_c [c_t; h_t]
        self.output = nn.Linear(hidden, vocab.size)
        self.drop = nn.Dropout(dropout)

    def forward(self, tokens: torch.Tensor, encoded: Encoded) -> torch.Tensor:
        """tokens (B, T) -> logits (B, T, V), step by step (input feeding)."""
        state = self.start(encoded)
        return torch.stack([self.step(tokens[:, t], state) for t in range(tokens.size(1))], 1)

    def start(self, encoded: Encoded) -> dict[str, torch.Tensor]:
        context = encoded.context or {}
        memory = encoded.memory
        return {"memory": memory, "keys": self.score(memory), "src_mask": encoded.mask[:, 0, 0],
                "h": context["h"], "c": context["c"],
                "feed": memory.new_zeros(memory.size(0), self.combine.out_features)}

    def step(self, tokens: torch.Tensor, state: dict[str, Any]) -> torch.Tensor:
        """The last tokens (B,) -> logits (B, V) of the next; updates the state."""
        x = torch.cat([self.drop(self.embed(tokens)), state["feed"]], dim=-1)[:, None]
        hidden = (state["h"].transpose(0, 1).contiguous(),
                  state["c"].transpose(0, 1).contiguous())
        out, (h, c) = self.lstm(x, hidden)
        query = out[:, 0]  # (B, H)
        scores = torch.einsum("bsh,bh->bs", state["keys"], query)
        weights = F.softmax(scores.masked_fill(~state["src_mask"], float("-inf")), dim=-1)
        attended = torch.einsum("bs,bsh->bh", weights, state["memory"])
        feed = torch.tanh(self.combine(torch.cat([attended, query], dim=-1)))
        state.update(h=h.transpose(0, 1), c=c.transpose(0, 1), feed=feed)
        return self.output(self.drop(feed))


def rnn_parts(cfg: RNNShape, dropout: float, max_positions: int, src_vocab: Vocab,
              tgt_vocab: Vocab) -> tuple[RNNEncoder, RNNDecoder]:
    """Encoder and decoder, initialised as OpenNMT-py does (uniform, +-param_init)."""
    encoder = RNNEncoder(src_vocab, cfg, dropout)
    decoder = RNNDecoder(tgt_vocab, cfg, dropout, max_positions)
    for p in (*encoder.parameters(), *decoder.parameters()):
        nn.init.uniform_(p, -PARAM_INIT, PARAM_INIT)
    for embed, vocab in ((encoder.embed, src_vocab), (decoder.embed, tgt_vocab)):
        with torch.no_grad():
            embed.weight[vocab.pad].zero_()
    return encoder, decoder


class RNN(Method):
    """The RNN baseline (`rnn`)."""

    settings = RNNSettings
    autoregressive = EncoderDecoder

    @classmethod
    def build(cls, cfg: Mapping[str, Any], src_vocab: Vocab, tgt_vocab: Vocab,
              pretrained: Mapping[str, Any] | None = None,
              weights: bool = True) -> EncoderDecoder:
        s = cls.read_settings(cfg)
        encoder, decoder = rnn_parts(s, s.dropout, s.max_positions, src_vocab, tgt_vocab)
        return cls.autoregressive(encoder, decoder, s, src_vocab, tgt_vocab, s.src_bos)
