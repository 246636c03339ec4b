"""Mask-predict decoding (Ghazvininejad et al. 2019) shared by every model that decodes
`nat`, so CMLM, AB-Net and AB-Net-Enc are decoded by one implementation.

The model is driven through three hooks: `encode(src)` returns a state whose
"length_lprobs" (B, L) scores every target length, `predict(tokens, state)` returns log-probs
(B, T, V) for every position of a partly masked target, and `reorder_state` selects rows.

Per source sentence:
- the `length_beam` most probable lengths each start a candidate [BOS] MASK x n [EOS];
- iteration 0 predicts every position; iteration t = 1..T-1 re-masks the
  n * (T - t) / T (rounded down) tokens of lowest probability and predicts them again,
  the other tokens keeping their tokens and probabilities (linear decay, as Mask-Predict);
- a candidate stops early when an iteration leaves its tokens unchanged (AB-Net section 3.3);
- the answer is the candidate with the highest summed token log-probability over a length
  penalty of its |y| tokens: |y|^lenpen (`fairseq`; lenpen 1, the default, is Mask-Predict's
  average log-probability) or ((5 + |y|) / 6)^lenpen (`gnmt`: AB-Net's authors rank with it at
  lenpen 1.1, in their released generator, `sequence_generator_with_bert.py`).

Choices of ours: length 0 is never proposed (a target has at least one token); a position is
never filled with pad, BOS, EOS or MASK; only unfinished candidates are run through the model,
so a batch costs as much as its slowest candidate, not T full passes; and only the re-masked
positions reach the output layer (the others' vocabulary-wide products would be discarded).
"""

from __future__ import annotations

import torch

from nmtbench.data.tokenization import Vocab
from nmtbench.parts.beam_search import LENPEN_FORMS, length_penalty
from nmtbench.parts.contract import NonAutoregressive, evaluating, without_grad


def mask_predict(model: NonAutoregressive, src: torch.Tensor, *, vocab: Vocab, length_beam: int,
                 iterations: int, lenpen: float = 1.0, lenpen_form: str = "fairseq"
                 ) -> list[list[int]]:
    """Best hypothesis (token ids, no BOS/EOS) for each source row of src (B, S), in the
    target `vocab` (its BOS, EOS, pad and mask); candidates ranked under the length penalty
    (`lenpen`, `lenpen_form`).

    The model is put in eval mode for the search and restored after.
    """
    if length_beam < 1 or iterations < 1:
        raise ValueError(f"length_beam and iterations must be >= 1, got {length_beam}, "
                         f"{iterations}")
    if lenpen_form not in LENPEN_FORMS:
        raise ValueError(f"unknown lenpen_form {lenpen_form!r}; known: {', '.join(LENPEN_FORMS)}")
    with evaluating(model), without_grad(src.device):
        return _decode(model, src, length_beam, iterations, vocab, lenpen, lenpen_form)


def _decode(model: NonAutoregressive, src: torch.Tensor, K: int, T: int, vocab: Vocab,
            lenpen: float, lenpen_form: str) -> list[list[int]]:
    bos, eos, pad, mask = vocab.bos, vocab.eos, vocab.pad, vocab.mask
    B, device = src.size(0), src.device
    state = model.encode(src)
    length_lprobs = state["length_lprobs"].float().clone()  # (B, L)
    length_lprobs[:, 0] = float("-inf")
    K = min(K, length_lprobs.size(1) - 1)
    lengths = length_lprobs.topk(K, dim=1).indices.view(-1)  # (B*K,) candidate lengths
    state = model.reorder_state(state, torch.arange(B, device=device).repeat_interleave(K))

    N = B * K
    positions = torch.arange(int(lengths.max()) + 2, device=device)  # [BOS] y [EOS]
    content = (positions >= 1) & (positions <= lengths[:, None])  # (N, T)
    tokens = torch.full(content.shape, pad, dtype=torch.long, device=device)
    tokens[:, 0] = bos
    tokens[torch.arange(N, device=device), lengths + 1] = eos
    tokens[content] = mask
    token_lprobs = torch.zeros(content.shape, device=device)  # of the tokens in place
    done = torch.zeros(N, dtype=torch.bool, device=device)
    never = torch.tensor([pad, bos, eos, mask], device=device)

    for t in range(T):
        rows = (~done).nonzero().squeeze(1)  # unfinished candidates
        if rows.numel() == 0:
            break
        if t == 0:
            remask = content.clone()
        else:
            n = (lengths[rows].float() * (T - t) / T).long()  # (R,)
            lowest_first = token_lprobs[rows].masked_fill(~content[rows], float("inf"))
            rank = lowest_first.argsort(dim=1, stable=True).argsort(dim=1)  # (R, T)
            remask = torch.zeros_like(content)
            remask[rows] = rank < n[:, None]
        before = tokens[rows].clone()
        tokens = tokens.masked_fill(remask, mask)
        rows_state = state if rows.numel() == N else model.reorder_state(state, rows)
        part = remask[rows]  # (R, T)
        lprobs = model.predict(tokens[rows], rows_state, positions=part).float()  # (M, V)
        best_lprob, best = lprobs.index_fill(1, never, float("-inf")).max(dim=1)  # (M,)
        new_tokens, new_lprobs = tokens[rows], token_lprobs[rows]
        new_tokens[part], new_lprobs[part] = best, best_lprob
        tokens[rows], token_lprobs[rows] = new_tokens, new_lprobs
        if t > 0:
            done[rows] = (new_tokens == before).all(dim=1)

    penalty = length_penalty(lengths.double(), lenpen, lenpen_form)  # (N,)
    score = (token_lprobs * content).sum(1).double() / penalty  # (N,)
    pick = score.view(B, K).argmax(dim=1)  # (B,)
    chosen = torch.arange(B, device=device) * K + pick
    return [tokens[i, 1: int(lengths[i]) + 1].tolist() for i in chosen.tolist()]
