"""Autoregressive decoding shared by every method that decodes `at`.

`beam_search` drives a model only through the contract's incremental hooks (`encode`,
`decode_step`, `reorder_state`), so one implementation serves every autoregressive method and its
results are comparable across methods. It follows fairseq's `SequenceGenerator` (the papers decode
with it):

- each step, every live hypothesis is extended by every token; per sentence the 2*beam best
  extensions by cumulative log-prob are kept;
- an extension ending in EOS that ranks among the `beam` best is *finished*: its score is
  normalised by the length penalty (length counts EOS) and it is stored, up to `beam` per sentence;
- the `beam` best extensions not ending in EOS stay live (pruning uses raw cumulative scores);
- a sentence is done once it holds `beam` finished hypotheses (fairseq's rule: no check whether a
  live hypothesis could still beat them), or when it reaches its maximum length, where EOS is the
  only allowed token. Done sentences leave the batch;
- the answer is the finished hypothesis with the best normalised score.

Choices of ours: the maximum output length is per sentence, int(max_len_a * src_len + max_len_b)
tokens before EOS with src_len its non-pad tokens (fairseq uses the batch's longest source), capped
at `model.max_positions - 1` when the model has that attribute; BOS and pad are never generated.
"""

from __future__ import annotations

import torch

from nmtbench.data.tokenization import Vocab
from nmtbench.parts.contract import Autoregressive, evaluating, without_grad

LENPEN_FORMS = ("fairseq", "gnmt")


def length_penalty(length, lenpen: float, form: str):
    """Divisor of a finished hypothesis' log-prob: len^a (fairseq) or ((5+len)/6)^a (GNMT, Wu et
    al. 2016); beam search's `length` counts the EOS token, mask-predict's does not (lengths
    may be a tensor)."""
    return length ** lenpen if form == "fairseq" else ((5 + length) / 6) ** lenpen


def beam_search(model: Autoregressive, src: torch.Tensor, *, vocab: Vocab, beam: int,
                max_len_a: float = 1.2, max_len_b: int = 10, lenpen: float = 1.0,
                lenpen_form: str = "fairseq") -> list[list[int]]:
    """Best hypothesis (token ids, no BOS/EOS) for each source row of src (B, S), in the
    target `vocab` (its BOS starts, its EOS ends; its pad fills short source rows).

    beam=1 is greedy decoding. The model is put in eval mode for the search and restored after.
    """
    if lenpen_form not in LENPEN_FORMS:
        raise ValueError(f"unknown lenpen_form {lenpen_form!r}; known: {', '.join(LENPEN_FORMS)}")
    if beam < 1:
        raise ValueError(f"beam must be >= 1, got {beam}")
    with evaluating(model), without_grad(src.device):
        return _search(model, src, beam, vocab, max_len_a, max_len_b, lenpen, lenpen_form)


def _search(model: Autoregressive, src: torch.Tensor, K: int, vocab: Vocab, max_len_a: float,
            max_len_b: int, lenpen: float, form: str) -> list[list[int]]:
    bos, eos, pad = vocab.bos, vocab.eos, vocab.pad
    B, device = src.size(0), src.device
    max_lens = [int(max_len_a * n + max_len_b) for n in (src != pad).sum(1).tolist()]
    cap = getattr(model, "max_positions", None)
    if cap is not None:
        max_lens = [min(m, cap - 1) for m in max_lens]

    active = list(range(B))  # original sentence id of each group of K rows in the live batch
    state = model.reorder_state(model.encode(src),
                                torch.arange(B, device=device).repeat_interleave(K))
    tokens = torch.full((B * K,), bos, dtype=torch.long, device=device)  # (n*K,) last token fed
    history = torch.empty(B * K, 0, dtype=torch.long, device=device)  # (n*K, step) tokens so far
    scores = torch.full((B, K), float("-inf"), device=device)  # (n, K) cumulative log-probs
    scores[:, 0] = 0.0  # one start hypothesis per sentence, so the first step has no duplicates
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(B)]
    # ids never generated (GPT-2's <|endoftext|> is BOS and EOS: generated, it ends)
    never = torch.tensor([pad] + [bos] * (bos != eos), device=device)

    for step in range(max(max_lens) + 1):
        n = len(active)
        lprobs = model.decode_step(tokens, state).float()  # (n*K, V)
        V = lprobs.size(1)
        lprobs = lprobs.index_fill(1, never, float("-inf"))
        at_max = [max_lens[b] <= step for b in active]
        if any(at_max):  # those sentences may only end
            only_eos = torch.full_like(lprobs, float("-inf"))
            only_eos[:, eos] = lprobs[:, eos]
            rows_at_max = torch.tensor(at_max, device=device).repeat_interleave(K)[:, None]
            lprobs = torch.where(rows_at_max, only_eos, lprobs)

        cand = (scores.view(-1, 1) + lprobs).view(n, K * V)  # (n, K*V)
        top, idx = cand.topk(2 * K, dim=1)  # (n, 2K) best first
        from_beam, tok = idx // V, idx % V  # (n, 2K)
        is_eos = tok == eos

        for i, j in (is_eos[:, :K] & top[:, :K].isfinite()).nonzero().tolist():
            b = active[i]
            if len(finished[b]) < K:
                score = top[i, j].item() / length_penalty(step + 1, lenpen, form)
                finished[b].append((score, history[i * K + from_beam[i, j]].tolist()))

        scores, pick = top.masked_fill(is_eos, float("-inf")).topk(K, dim=1)  # (n, K)
        rows = torch.arange(n, device=device)[:, None] * K + from_beam.gather(1, pick)  # (n, K)
        tokens = tok.gather(1, pick)  # (n, K)

        keep = [i for i, b in enumerate(active) if len(finished[b]) < K and step < max_lens[b]]
        if not keep:
            break
        if len(keep) < n:
            kept = torch.tensor(keep, device=device)
            rows, tokens, scores = rows[kept], tokens[kept], scores[kept]
            active = [active[i] for i in keep]
        rows = rows.view(-1)  # (n'*K,) rows of the previous live batch each new row extends
        history = torch.cat([history[rows], tokens.view(-1, 1)], dim=1)
        state = model.reorder_state(state, rows)
        tokens = tokens.view(-1)

    return [max(hyps, key=lambda h: h[0])[1] if hyps else [] for hyps in finished]
