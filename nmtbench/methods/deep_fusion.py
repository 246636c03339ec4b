"""Deep fusion (Weng et al., AAAI 2022, `001`): a pre-trained model (PTM) replaces the encoder,
a layer-wise coordinator feeds each decoder layer its own mix of the PTM's layers, and
partitioned multi-task training keeps the PTM from forgetting.

- The PTM's N x M layers are split into N groups of M. The coordinator aggregates each group,
  R^A_n = LN(FFN(R^P_n,1 + ... + R^P_n,M)) (Eq. 10); decoder layer n cross-attends
  C_n = FFN(sum_k alpha_nk R^A_k) (Eq. 11), alpha_n = softmax_k(e_nk) with e_nk =
  FFN(mean(R^A_n) * mean(R^A_k)) (Eq. 12-13; means over the source's real tokens). The decoder
  has N layers (`decoder_layers` must be the PTM's depth / `group_size`).
- Partitioned multi-task training, L = L_T + L_TWP + L_TSP + L_MLM (Eq. 18), each a named
  loss term (`losses` lists the ones on) confined to its part (Figure 2; tests/methods/
  test_deep_fusion.py checks each): the translation loss "tokens" (and NAT's "length") moves
  the decoder and the coordinator, target-words prediction "twp" (Eq. 15: the target's words
  from the mean-pooled top group) and target-sentence prediction "tsp" (Eq. 17: contrastive,
  cosine similarity) the coordinator and the PTM, the masked LM "mlm" (Eq. 8) the PTM only.
  Each term reads the parts outside its partition detached.
  `partitioned: false` lets every loss move everything ("optimise theta_P by all tasks");
  `freeze_ptm` fixes the PTM for all tasks; `ptm_pretrained: false` starts it from random
  weights (Table 6).
- With `decoding: nat` the decoder is non-causal and the model a conditional masked LM
  (`nmtbench.methods.cmlm`, Table 3): a LENGTH token goes in front of the PTM's embedded source and
  its coordinated state predicts the target length, part of the translation loss.

Details the paper leaves to us, and what we chose:
- the aggregation's FFN (Eq. 10) is Linear-ReLU-Linear with an inner width
  `coordinator_ffn_dim` (default: the PTM's width) and keeps the PTM's width; the "FFN"s of
  Eq. 11 (the mapping into the decoder's width, one shared by the decoder layers, as Eq. 11
  writes it) and Eq. 13 (a score from the elementwise product of two pooled vectors) are linear
  maps (xavier), as the paper calls Eq. 17's linear g an FFN. Measured on the toy world
  (translation loss alone, PTM tuned by it, best valid loss after 10 epochs): a
  Linear-ReLU-Linear mapping with PyTorch's initialisation 3.30, the same with a LayerNorm after
  it 2.02, the linear map 1.76, the decoder reading the PTM's top layer directly 1.65;
- TWP scores the mapped top group, FFN(R^A_N) pooled, against the decoder's target embeddings
  (read detached: they are the decoder's), so TWP adds no parameters; its loss is the
  negative log-likelihood, under that one distribution, of each word of the target's bag of
  words (Eq. 15: an unordered set, so a repeated word counts once; EOS is not a word);
- TSP: g(x) = W mean(R^A_N(x)), and g(y) the same of the PTM reading y ([CLS] y [SEP]): where
  both sides read one vocabulary (`vocabulary` other than `sides`: the PTM's, as
  config/paper.yaml sets it), through the PTM's own word embeddings, exactly as it reads x;
  where the target has its own vocabulary (the toy world), the target's words have no place
  in the PTM's, so they come through the decoder's target embeddings (detached) mapped by a
  linear layer of its own to the PTM's width. Either way order-aware, so swapped negatives
  differ. Each source gets B negatives (the paper's count, B the batch's sentences): half
  (rounded down) of the batch's other targets, drawn at random, and half (rounded up)
  synthetic corruptions, its own target's always among them (the "similar words but no
  correct semantic" negative the text describes), the others corruptions of other targets. A
  corruption picks 50% of the words (at least one) and swaps, replaces (with a random target
  word) or deletes each, uniformly. Eq. 17 as printed sums only the negatives below the line;
  we add the target, as the contrastive loss it cites (Khosla et al. 2020) does, so the loss
  is a cross-entropy over the target and its B negatives, over cosine similarities without a
  temperature (Eq. 17 has none);
- the masked LM is BERT's (15% of the source's word pieces chosen, 80/10/10) on the same batch
  of sources, with the checkpoint's own masked-LM head;
- the losses are added as the paper writes, each a mean over its own units (target tokens,
  sentences, masked tokens): the trainer divides the sum of terms by the batch's target
  tokens, so "twp" is summed over target tokens and "tsp" and "mlm" are their means times that
  number;
- a PTM narrower or wider than the decoder is bridged by the mapping FFN (Eq. 11's purpose);
- `share_embeddings` makes the PTM's word embeddings the decoder's target embeddings and output
  layer, with `vocabulary` naming the PTM so that both sides read its WordPiece. This is how we
  read Table 1's 171M "#Param" (docs/papers/deepfusion2022.md): mBERT with its vocabulary
  trimmed to the training data's 30k most frequent pieces (config `trimmed`) and shared with
  the target gives 174.1M, a separate 30k target vocabulary 197.7M, full mBERT 266.6M. The
  shared table is both the PTM's and the decoder's, so the translation loss moves it too: the
  one parameter outside the partition of Figure 2, which the paper's counts imply but its text
  does not discuss.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from nmtbench.data.tokenization import Vocab
from nmtbench.errors import InputError
from nmtbench.methods.cmlm import CMLM, ConditionalMaskedLM
from nmtbench.methods.transformer import (
    ACTIVATIONS,
    DecoderLayer,
    Encoded,
    EncoderDecoder,
    SizedSettings,
    TransformerConfig,
    TransformerDecoder,
    embedding,
    fairseq_init,
)
from nmtbench.parts.contract import (
    Batch,
    Losses,
    Method,
    Progress,
    mark_pretrained,
    method_settings,
)
from nmtbench.parts.pretrained import check_vocab, load_model

LOSSES = ("t", "twp", "tsp", "mlm")


def ffn(d_in: int, d_hidden: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, d_hidden), nn.ReLU(), nn.Linear(d_hidden, d_out))


def masked_mean(h: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """h (B, S, H) averaged over the real positions keep (B, S) -> (B, H)."""
    keep = keep.to(h.dtype)[..., None]
    return (h * keep).sum(1) / keep.sum(1).clamp(min=1)


class Coordinator(nn.Module):
    """Eq. 10-13: the aggregation layer of each group, the layer-wise attention of each decoder
    layer over the aggregated groups, and the mapping FFN into the decoder's width."""

    def __init__(self, groups: int, ptm_dim: int, d_dec: int, ffn_dim: int):
        super().__init__()
        self.aggregate = nn.ModuleList(ffn(ptm_dim, ffn_dim, ptm_dim) for _ in range(groups))
        self.aggregate_norm = nn.ModuleList(nn.LayerNorm(ptm_dim) for _ in range(groups))
        # Eq. 13's and Eq. 11's "FFN"s are linear maps, as the paper calls g's of Eq. 17
        # e_nk (with one group there is nothing to weigh: alpha = 1)
        self.score = nn.Linear(ptm_dim, 1) if groups > 1 else None
        self.map = nn.Linear(ptm_dim, d_dec)  # the mapping function into the decoder
        for linear in (self.score, self.map):
            if linear is not None:
                nn.init.xavier_uniform_(linear.weight)
                nn.init.zeros_(linear.bias)

    def group(self, n: int, layers: list[torch.Tensor]) -> torch.Tensor:
        """R^A_n (B, S, H) of the group's layer outputs (Eq. 10)."""
        return self.aggregate_norm[n](self.aggregate[n](torch.stack(layers).sum(0)))

    def attention(self, pooled: torch.Tensor) -> torch.Tensor:
        """alpha (B, N, N) from the pooled groups (B, N, H): row n weighs the groups for
        decoder layer n (Eq. 12-13), summing to 1."""
        if self.score is None:
            return pooled.new_ones(pooled.size(0), 1, 1)
        e = self.score(pooled[:, :, None, :] * pooled[:, None, :, :])[..., 0]  # (B, N, N)
        return e.float().softmax(dim=-1).to(pooled.dtype)

    def forward(self, groups: list[list[torch.Tensor]], keep: torch.Tensor,
                ) -> list[torch.Tensor]:
        """The PTM's layer outputs in N groups, keep (B, S) -> C_n (B, S, D) of every decoder
        layer n."""
        aggregated = torch.stack([self.group(n, layers) for n, layers in enumerate(groups)],
                                 dim=1)  # (B, N, S, H)
        pooled = torch.stack([masked_mean(aggregated[:, n], keep) for n in range(len(groups))],
                             dim=1)  # (B, N, H)
        alpha = self.attention(pooled)
        mixed = torch.einsum("bnk,bksh->bnsh", alpha, aggregated)  # (B, N, S, H)
        return list(self.map(mixed).unbind(1))


class CoordinatedDecoderLayer(DecoderLayer):
    """Decoder layer n: cross-attends its own coordinated representation C_n (Eq. 14)."""

    def __init__(self, cfg: TransformerConfig, index: int):
        super().__init__(cfg)
        self.index = index

    def memory_state(self, encoded: Encoded) -> dict[str, torch.Tensor]:
        k, v = self.cross_attn.kv(encoded.context[f"coordinated{self.index}"])
        return {"k": k, "v": v}


class PTMEncoder(nn.Module):
    """The PTM (a BERT with its masked-LM head) and the coordinator: the encoder of the
    translation model. With `length_classes`, a LENGTH token (its own vector) goes in front of
    the embedded source and its coordinated state predicts the target length against
    `embed_lengths` (the decoder's width)."""

    def __init__(self, mlm: nn.Module, coordinator: Coordinator, group_size: int,
                 src_vocab: Vocab, d_dec: int, length_classes: int, detach_ptm: bool):
        super().__init__()
        self.mlm = mlm
        self.coordinator = coordinator
        self.group_size = group_size
        self.pad = src_vocab.pad
        self.detach_ptm = detach_ptm  # the partition: translation does not move the PTM
        width = mlm.config.hidden_size
        self.embed_lengths = self.length_token = None
        if length_classes:
            self.length_token = nn.Parameter(torch.randn(1, 1, width) * 0.02)
            self.embed_lengths = nn.Embedding(length_classes, d_dec)
            nn.init.normal_(self.embed_lengths.weight, mean=0.0, std=d_dec ** -0.5)

    @property
    def ptm(self) -> nn.Module:
        return self.mlm.bert

    def layers(self, h: torch.Tensor, keep: torch.Tensor) -> list[torch.Tensor]:
        """Every PTM layer's output over embedded inputs h (B, S, H), keep (B, S)."""
        mask, out = keep[:, None, None, :], []
        for layer in self.ptm.encoder.layer:
            h = layer(h, mask)
            out.append(h)
        return out

    def grouped(self, states: list[torch.Tensor]) -> list[list[torch.Tensor]]:
        m = self.group_size
        return [states[i:i + m] for i in range(0, len(states), m)]

    def run(self, src: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """The PTM over src (B, S) [CLS] x [SEP] (after a LENGTH token): its layers' outputs
        and the mask of real positions."""
        keep = src != self.pad
        h = self.ptm.embeddings(input_ids=src)
        if self.length_token is not None:
            h = torch.cat([self.length_token.to(h.dtype).expand(src.size(0), 1, -1), h], 1)
            keep = torch.cat([torch.ones_like(keep[:, :1]), keep], dim=1)
        return self.layers(h, keep), keep

    def coordinate(self, states: list[torch.Tensor], keep: torch.Tensor) -> Encoded:
        """What the decoder reads of the PTM's layer outputs: C_n of every layer n
        ("coordinated{n}" in the context; C_N is also the memory), after the partition's
        detach."""
        if self.detach_ptm:
            states = [h.detach() for h in states]
        coordinated = self.coordinator(self.grouped(states), keep)
        if self.length_token is None:
            return Encoded(coordinated[-1], keep[:, None, None, :], None,
                           {f"coordinated{n}": c for n, c in enumerate(coordinated)})
        # the LENGTH position predicts the length and is no memory
        return Encoded(coordinated[-1][:, 1:], keep[:, None, None, 1:], coordinated[-1][:, 0],
                       {f"coordinated{n}": c[:, 1:] for n, c in enumerate(coordinated)})

    def forward(self, src: torch.Tensor) -> Encoded:
        return self.coordinate(*self.run(src))


def corrupt(target: torch.Tensor, content: torch.Tensor, vocab: Vocab,
            generator: torch.Generator | None = None) -> torch.Tensor:
    """TSP's synthetic negatives: in each row of target (B, T), half of the content words (at
    least one; content (B, T) marks them) are chosen and each swapped with another chosen
    word, replaced by a random word, or deleted, uniformly; rows keep their padding."""
    rows = []
    for ids, words in zip(target.tolist(), content.tolist(), strict=True):
        positions = [i for i, w in enumerate(words) if w]
        chosen = torch.randperm(len(positions), generator=generator)[
            :max(1, (len(positions) + 1) // 2)].tolist() if positions else []
        ops = torch.randint(3, (len(chosen),), generator=generator).tolist()
        picked = [positions[c] for c in chosen]
        swaps = [p for p, op in zip(picked, ops, strict=True) if op == 0]
        for a, b in zip(swaps[0::2], swaps[1::2], strict=False):
            ids[a], ids[b] = ids[b], ids[a]
        lone = swaps[-1:] if len(swaps) % 2 else []  # no partner: replaced instead
        for p, op in zip(picked, ops, strict=True):
            if op == 1 or p in lone:
                ids[p] = _random_word(vocab, ids[p], generator)
        deleted = {p for p, op in zip(picked, ops, strict=True) if op == 2}
        kept = [t for i, t in enumerate(ids) if i not in deleted and t != vocab.pad]
        rows.append(kept)
    longest = max(len(r) for r in rows)
    return torch.tensor([r + [vocab.pad] * (longest - len(r)) for r in rows],
                        dtype=target.dtype, device=target.device)


def tsp_negatives(batch: int, device: torch.device | None = None,
                  generator: torch.Generator | None = None) -> torch.Tensor:
    """Which of the 2B candidates (the batch's targets, then one corruption of each) are each
    source's B negatives (B, 2B): B // 2 other targets at random, and the corruption of its own
    target with B - B // 2 - 1 corruptions of other targets at random."""
    allowed = torch.zeros(batch, 2 * batch, dtype=torch.bool)
    for i in range(batch):
        others = torch.tensor([j for j in range(batch) if j != i], dtype=torch.long)
        order = others[torch.randperm(len(others), generator=generator)]
        allowed[i, order[:batch // 2]] = True
        allowed[i, batch + i] = True
        order = others[torch.randperm(len(others), generator=generator)]
        allowed[i, batch + order[:batch - batch // 2 - 1]] = True
    return allowed.to(device)


def bag_of_words(target: torch.Tensor, vocab: Vocab, size: int) -> torch.Tensor:
    """(B, size) True at each distinct word of each target row (B, T): pad, BOS and EOS are
    not words."""
    bag = torch.zeros(target.size(0), size, dtype=torch.bool, device=target.device)
    bag.scatter_(1, target, True)
    bag[:, [vocab.pad, vocab.bos, vocab.eos]] = False
    return bag


def _random_word(vocab: Vocab, avoid: int, generator: torch.Generator | None) -> int:
    """A random non-special word id other than `avoid`."""
    special = {vocab.pad, vocab.bos, vocab.eos, vocab.unk, vocab.mask}
    while True:
        word = int(torch.randint(vocab.size, (), generator=generator))
        if word not in special and word != avoid:
            return word


def bert_masking(src: torch.Tensor, vocab: Vocab, prob: float,
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masked-LM input: `prob` of the word pieces (not [CLS], [SEP], padding) chosen
    (at least one per batch), 80% of them [MASK], 10% a random piece, 10% kept. Returns the
    input and the chosen positions."""
    words = (src != vocab.pad) & (src != vocab.bos) & (src != vocab.eos)
    chosen = (torch.rand(src.shape, device=src.device) < prob) & words
    if not chosen.any():
        chosen = words & (torch.cumsum(words.flatten(), 0) == 1).view_as(words)
    u = torch.rand(src.shape, device=src.device)
    noisy = src.masked_fill(chosen & (u < 0.8), vocab.mask)
    random = torch.randint_like(src, vocab.size)
    return torch.where(chosen & (u >= 0.9), random, noisy), chosen


class DeepFusionTasks:
    """Partitioned multi-task training (Eq. 15-18) over a `PTMEncoder` and a decoder: mixed
    into the autoregressive and the parallel model class."""

    encoder: PTMEncoder
    decoder: TransformerDecoder
    settings: DeepFusionSettings
    src_vocab: Vocab
    tgt_vocab: Vocab

    def add_task_heads(self) -> None:
        if "tsp" not in self.settings.losses:
            return
        width, d_dec = self.encoder.ptm.config.hidden_size, self.decoder.embed.embedding_dim
        self.tsp_project = nn.Linear(width, width)  # g(.) of Eq. 17
        nn.init.xavier_uniform_(self.tsp_project.weight)
        if self.settings.vocabulary == "sides":  # target words into the PTM's width
            self.tsp_embed = nn.Linear(d_dec, width, bias=False)
            nn.init.xavier_uniform_(self.tsp_embed.weight)

    def fixed(self, t: torch.Tensor) -> torch.Tensor:
        """A tensor of another part, as the partition lets a task read it."""
        return t.detach() if self.settings.partitioned else t

    def task_losses(self, batch: Batch, states: list[torch.Tensor], keep: torch.Tensor,
                    losses: Losses) -> Losses:
        """Adds the terms "twp", "tsp" and "mlm" that `losses` names to the translation's,
        given the PTM's layer outputs over the batch's sources. In training only: the
        validation loss, which picks the best checkpoint, is the translation's (the tasks'
        random masks and negatives would make it noisy)."""
        if not self.training:
            return losses
        on, ntokens = set(self.settings.losses), losses.ntokens
        if on & {"twp", "tsp"}:
            r_top = self.top_group(states, keep)  # (B, H)
        if "twp" in on:  # Eq. 15: the target's bag of words under one distribution
            logits = F.linear(self.encoder.coordinator.map(r_top),
                              self.fixed(self.decoder.embed.weight))
            bag = bag_of_words(batch.tgt_out, self.tgt_vocab, logits.size(-1))  # (B, V)
            twp = -logits.float().log_softmax(-1)[bag].sum()
            losses.terms["twp"] = twp
            losses.stats["twp_nll"] = twp.item() / max(int(bag.sum()), 1)
        if "tsp" in on:  # Eq. 17
            tsp, accuracy = self.target_sentence_prediction(batch, r_top)
            losses.terms["tsp"] = tsp * ntokens
            losses.stats |= {"tsp": tsp.item(), "tsp_accuracy": accuracy}
        if "mlm" in on and self.encoder.mlm.cls.predictions.bias.requires_grad:  # Eq. 8
            noisy, chosen = bert_masking(batch.src, self.src_vocab, self.settings.mask_prob)
            masked_states, _ = self.encoder.run(noisy)
            top = masked_states[-1][:, -noisy.size(1):]  # after a LENGTH token
            mlm = F.cross_entropy(self.encoder.mlm.cls(top[chosen]).float(), batch.src[chosen])
            losses.terms["mlm"] = mlm * ntokens
            losses.stats["mlm_nll"] = mlm.item()
        return losses

    def top_group(self, states: list[torch.Tensor], keep: torch.Tensor) -> torch.Tensor:
        """mean(R^A_N) (B, H): the top group's aggregation, pooled (Eq. 16)."""
        groups = self.encoder.grouped(states)
        aggregated = self.encoder.coordinator.group(len(groups) - 1, groups[-1])
        return masked_mean(aggregated, keep)

    def sentence_vectors(self, targets: torch.Tensor) -> torch.Tensor:
        """g(y) (N, H) of target sentences y [SEP] (N, T): the PTM reads [CLS] y [SEP], by
        their ids where it shares the target's vocabulary, else through the decoder's target
        embeddings (fixed) mapped to its width."""
        v = self.tgt_vocab
        targets = F.pad(targets, (1, 0), value=v.bos)
        keep = targets != v.pad
        ptm = self.encoder.ptm
        if self.settings.vocabulary != "sides":
            embedded = ptm.embeddings(input_ids=targets)
        else:
            embedded = ptm.embeddings(inputs_embeds=self.tsp_embed(
                self.fixed(self.decoder.embed.weight)[targets]))
        return self.tsp_project(self.top_group(self.encoder.layers(embedded, keep), keep))

    def target_sentence_prediction(self, batch: Batch, r_top: torch.Tensor,
                                   ) -> tuple[torch.Tensor, float]:
        """The mean of Eq. 17 over the batch: each source against its target and its B
        negatives (`tsp_negatives`); and how often the target wins."""
        v = self.tgt_vocab
        content = (batch.tgt_out != v.pad) & (batch.tgt_out != v.eos)
        corrupted = corrupt(batch.tgt_out, content, v)
        longest = max(batch.tgt_out.size(1), corrupted.size(1))
        candidates = torch.cat([F.pad(t, (0, longest - t.size(1)), value=v.pad)
                                for t in (batch.tgt_out, corrupted)])  # (2B, T)
        x = F.normalize(self.tsp_project(r_top).float(), dim=-1)  # (B, H)
        y = F.normalize(self.sentence_vectors(candidates).float(), dim=-1)  # (2B, H)
        scores = x @ y.T  # cosine similarities (B, 2B)
        gold = torch.arange(x.size(0), device=x.device)
        allowed = tsp_negatives(x.size(0), x.device)
        allowed[gold, gold] = True  # the target itself
        scores = scores.masked_fill(~allowed, float("-inf"))
        return (F.cross_entropy(scores, gold),
                float((scores.argmax(-1) == gold).float().mean()))


class DeepFusionModel(DeepFusionTasks, EncoderDecoder):
    """Deep fusion with an autoregressive decoder (beam search)."""

    def losses(self, batch: Batch, progress: Progress | None = None) -> Losses:
        states, keep = self.encoder.run(batch.src)
        logits = self.decoder(batch.tgt_in, self.encoder.coordinate(states, keep))
        return self.task_losses(batch, states, keep, self.token_losses(logits, batch))


class DeepFusionCMLM(DeepFusionTasks, ConditionalMaskedLM):
    """Deep fusion with a conditional masked LM's decoder (mask-predict)."""

    def losses(self, batch: Batch, progress: Progress | None = None) -> Losses:
        tokens, masked = self.mask_target(batch)
        states, keep = self.encoder.run(batch.src)
        losses = self.masked_losses(tokens, masked, self.encoder.coordinate(states, keep))
        return self.task_losses(batch, states, keep, losses)


def _copy_linear(target: nn.Linear, weight: torch.Tensor, bias: torch.Tensor) -> None:
    with torch.no_grad():
        target.weight.copy_(weight)
        target.bias.copy_(bias)


def _copy_norm(target: nn.LayerNorm, source: nn.LayerNorm) -> None:
    target.eps = source.eps  # BERT's 1e-12
    with torch.no_grad():
        target.weight.copy_(source.weight)
        target.bias.copy_(source.bias)


def decoder_shape(ptm: nn.Module) -> dict[str, Any]:
    """The architecture fields a decoder takes from the pre-trained model it starts from."""
    c = ptm.config
    if c.model_type == "bert":
        return {"d_model": c.hidden_size, "ffn_dim": c.intermediate_size,
                "n_heads": c.num_attention_heads, "pre_norm": False}
    return {"d_model": c.n_embd, "ffn_dim": c.n_inner or 4 * c.n_embd, "n_heads": c.n_head,
            "pre_norm": True}


def take_decoder(decoder: TransformerDecoder, ptm: nn.Module) -> None:
    """Initialise the decoder from a BERT (post-norm) or GPT-2 (pre-norm) of its shape: its
    layer i from the model's layer i (self-attention, FFN, their LayerNorms), its embeddings,
    positions and input LayerNorm (BERT) or final LayerNorm (GPT-2) from the model's. The
    cross-attentions stay new."""
    with torch.no_grad():
        if ptm.config.model_type == "bert":
            emb = ptm.embeddings
            decoder.embed.weight.copy_(emb.word_embeddings.weight[:decoder.embed.num_embeddings])
            positions = emb.position_embeddings.weight + emb.token_type_embeddings.weight[0]
            norm = nn.LayerNorm(emb.LayerNorm.normalized_shape, eps=emb.LayerNorm.eps)
            _copy_norm(norm, emb.LayerNorm)
            decoder.embedder.take_pretrained(positions, norm)
            for layer, source in zip(decoder.layers, ptm.encoder.layer, strict=False):
                a = source.attention
                for proj, src in ((layer.self_attn.q_proj, a.self.query),
                                  (layer.self_attn.k_proj, a.self.key),
                                  (layer.self_attn.v_proj, a.self.value),
                                  (layer.self_attn.out_proj, a.output.dense),
                                  (layer.ffn.fc1, source.intermediate.dense),
                                  (layer.ffn.fc2, source.output.dense)):
                    _copy_linear(proj, src.weight, src.bias)
                _copy_norm(layer.self_attn_norm, a.output.LayerNorm)
                _copy_norm(layer.ffn_norm, source.output.LayerNorm)
                layer.ffn.activation = ptm.config.hidden_act
        else:  # GPT-2: Conv1D weights are (in, out); q, k, v fused in c_attn
            decoder.embed.weight.copy_(ptm.wte.weight[:decoder.embed.num_embeddings])
            decoder.embedder.take_pretrained(ptm.wpe.weight, None)
            for layer, source in zip(decoder.layers, ptm.h, strict=False):
                attn = source.attn.c_attn
                qkv_w, qkv_b = attn.weight.T.chunk(3), attn.bias.chunk(3)
                for proj, w, b in zip((layer.self_attn.q_proj, layer.self_attn.k_proj,
                                       layer.self_attn.v_proj), qkv_w, qkv_b, strict=True):
                    _copy_linear(proj, w, b)
                for proj, src in ((layer.self_attn.out_proj, source.attn.c_proj),
                                  (layer.ffn.fc1, source.mlp.c_fc),
                                  (layer.ffn.fc2, source.mlp.c_proj)):
                    _copy_linear(proj, src.weight.T, src.bias)
                _copy_norm(layer.self_attn_norm, source.ln_1)
                _copy_norm(layer.ffn_norm, source.ln_2)
                layer.ffn.activation = ptm.config.activation_function
            _copy_norm(decoder.norm, ptm.ln_f)
    decoder.max_positions = decoder.embedder.max_positions


def freeze_decoder(decoder: TransformerDecoder) -> None:
    """Everything the pre-trained model gave the decoder stays fixed; the cross-attentions
    (new) train."""
    for name, p in decoder.named_parameters():
        p.requires_grad_(".cross_attn" in name)


@method_settings("deep-fusion")
class DeepFusionSettings(SizedSettings):
    """Deep fusion's settings (no `encoder_layers`: the encoder is the pre-trained model)."""


class DeepFusion(Method):
    """A BERT as the encoder, the layer-wise coordinator and a decoder of N layers."""

    settings = DeepFusionSettings
    autoregressive = DeepFusionModel
    parallel = DeepFusionCMLM

    @classmethod
    def build(cls, cfg: Mapping[str, Any], src_vocab: Vocab, tgt_vocab: Vocab,
              pretrained: Mapping[str, Any] | None = None, weights: bool = True,
              ) -> DeepFusionModel | DeepFusionCMLM:
        s = cls.read_settings(cfg)
        _check(s)
        mlm, ptm_moved = _load_ptm(s, src_vocab, pretrained, weights)
        arch = s.architecture
        dec_ptm = None
        if s.decoder_init:  # the decoder takes its shape from the pre-trained model
            dec_ptm = load_model((pretrained or {}).get("decoder_init", s.decoder_init),
                                 weights=weights)
            _check_decoder_ptm(dec_ptm, s, tgt_vocab)
            arch = replace(arch, **decoder_shape(dec_ptm))
        nat = s.decoding == "nat"
        width = mlm.config.hidden_size
        if s.share_embeddings:
            _check_shared(s, src_vocab, tgt_vocab, width, arch.d_model)
            tgt_embed = mlm.get_input_embeddings()
        else:
            tgt_embed = embedding(tgt_vocab, arch.d_model)
        decoder = TransformerDecoder(arch, tgt_embed, causal=not nat,
                                     layers=[CoordinatedDecoderLayer(arch, n)
                                             for n in range(s.decoder_layers)])
        fairseq_init(*([] if s.share_embeddings else [tgt_embed]), decoder.layers)
        if dec_ptm is not None:
            take_decoder(decoder, dec_ptm)
            if s.freeze_decoder:
                freeze_decoder(decoder)
                mark_pretrained(decoder)  # its fixed weights come from the checkpoint
        coordinator = Coordinator(s.decoder_layers, width, arch.d_model,
                                  s.coordinator_ffn_dim or width)
        encoder = PTMEncoder(mlm, coordinator, s.group_size, src_vocab, arch.d_model,
                             CMLM.length_classes if nat else 0, detach_ptm=s.partitioned)
        if encoder.length_token is not None:  # an input of the PTM: moved by its tasks
            encoder.length_token.requires_grad_(ptm_moved)
        if nat:  # (a pre-trained decoder may hold fewer positions than max_positions)
            model = cls.parallel(encoder, decoder, s, src_vocab, tgt_vocab, source_bos=True,
                                 max_length=min(CMLM.length_classes - 1,
                                                decoder.max_positions - 2))
        else:
            model = cls.autoregressive(encoder, decoder, s, src_vocab, tgt_vocab,
                                       source_bos=True)  # the BERT reads [CLS] x [SEP]
        model.add_task_heads()
        return model


def _load_ptm(s: DeepFusionSettings, src_vocab: Vocab, pretrained: Mapping[str, Any] | None,
              weights: bool) -> tuple[nn.Module, bool]:
    """The PTM with its masked-LM head, trainable as the tasks and settings say, and whether
    a task may move it; its depth must make one group of layers per decoder layer."""
    source = (pretrained or {}).get("src_bert", s.src_bert)
    # our own layer loop passes boolean masks, which the sdpa attention takes as they are
    mlm = load_model(source, weights=weights and s.ptm_pretrained, masked_lm=True,
                     attn_implementation="sdpa")
    if getattr(mlm, "bert", None) is None:
        raise InputError(f"deep-fusion src_bert {s.src_bert!r}: a BERT is needed (its "
                         f"model type is {mlm.config.model_type!r})")
    check_vocab(src_vocab.size, mlm, "source")
    if s.ptm_pretrained:
        mark_pretrained(mlm)
    # the PTM trains when a task may move it; its masked-LM head only with the MLM task
    ptm_moved = not s.partitioned or bool(set(s.losses) & {"twp", "tsp", "mlm"})
    mlm.requires_grad_(ptm_moved and not s.freeze_ptm)
    if "mlm" not in s.losses:
        head = mlm.cls.predictions  # its output layer is the (tied) word embeddings
        head.transform.requires_grad_(False)
        head.bias.requires_grad_(False)
    depth = mlm.config.num_hidden_layers
    if depth % s.group_size or depth // s.group_size != s.decoder_layers:
        raise InputError(f"deep-fusion group_size {s.group_size} and decoder_layers "
                         f"{s.decoder_layers}: the PTM's {depth} layers must make exactly "
                         "one group of group_size layers per decoder layer")
    return mlm, ptm_moved


def _check(s: DeepFusionSettings) -> None:
    """One line for each setting the schema cannot check."""
    if not s.src_bert:
        raise InputError("deep-fusion needs `src_bert` (the pre-trained model); set it in the "
                         "experiment or as the dataset's checkpoints.src")
    unknown = sorted(set(s.losses) - set(LOSSES))
    if unknown or "t" not in s.losses:
        raise InputError(f"deep-fusion losses {s.losses}: the translation loss t and any of "
                         "twp, tsp, mlm")
    if s.freeze_decoder and not s.decoder_init:
        raise InputError("deep-fusion freeze_decoder needs decoder_init (the pre-trained "
                         "model the decoder starts from)")


def _check_shared(s: DeepFusionSettings, src_vocab: Vocab, tgt_vocab: Vocab, width: int,
                  d_dec: int) -> None:
    if s.vocabulary == "sides" or src_vocab != tgt_vocab:
        raise InputError("deep-fusion share_embeddings needs the target to read the PTM's "
                         "vocabulary (vocabulary: the src_bert checkpoint's name)")
    if s.decoder_init:
        raise InputError("deep-fusion share_embeddings and decoder_init: the decoder's "
                         "embeddings would come from two checkpoints; set one")
    if width != d_dec:
        raise InputError(f"deep-fusion share_embeddings: the PTM's width {width} is not the "
                         f"decoder's d_model {d_dec}")


def _check_decoder_ptm(ptm: nn.Module, s: DeepFusionSettings, tgt_vocab: Vocab) -> None:
    c = ptm.config
    if c.model_type not in ("bert", "gpt2"):
        raise InputError(f"deep-fusion decoder_init {s.decoder_init!r}: a BERT or GPT-2 is "
                         f"needed (its model type is {c.model_type!r})")
    activation = c.hidden_act if c.model_type == "bert" else c.activation_function
    if activation not in ACTIVATIONS:
        raise InputError(f"deep-fusion decoder_init {s.decoder_init!r}: activation "
                         f"{activation!r} is not one of {', '.join(ACTIVATIONS)}")
    depth = c.num_hidden_layers if c.model_type == "bert" else c.n_layer
    if depth < s.decoder_layers:
        raise InputError(f"deep-fusion decoder_init {s.decoder_init!r} has {depth} layers, "
                         f"fewer than decoder_layers {s.decoder_layers}")
    if tgt_vocab.size > c.vocab_size:
        raise InputError(f"the target vocabulary has {tgt_vocab.size} entries but "
                         f"decoder_init {s.decoder_init!r} has {c.vocab_size}: tokenize with "
                         "its own")
