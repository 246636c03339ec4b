"""Training losses shared by the methods.

`label_smoothed_nll` is fairseq's `label_smoothed_cross_entropy` criterion (Szegedy et al. 2016 as
fairseq implements it), so every method's loss and logged nll mean the same thing as the papers'.
"""

from __future__ import annotations

from functools import cache

import torch
import torch.nn.functional as F


def label_smoothed_nll(lprobs: torch.Tensor, target: torch.Tensor, epsilon: float,
                       ignore_index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed label-smoothed loss and summed nll (natural log) over the non-ignored positions.

    lprobs (N, V) are log-probabilities, target (N,) the gold ids. fairseq's formula: with
    eps_i = epsilon / (V - 1), loss = (1 - epsilon - eps_i) * nll + eps_i * smooth, where
    smooth = -sum_v lprobs[v]; i.e. the gold class gets weight 1 - epsilon and every other class
    epsilon / (V - 1). Positions whose target is `ignore_index` (padding) contribute nothing.
    """
    target = target.unsqueeze(-1)  # (N, 1)
    nll = -lprobs.gather(dim=-1, index=target).squeeze(-1)  # (N,)
    smooth = -lprobs.sum(dim=-1)  # (N,)
    keep = target.squeeze(-1) != ignore_index  # (N,)
    nll = nll.masked_fill(~keep, 0.0).sum()
    smooth = smooth.masked_fill(~keep, 0.0).sum()
    eps_i = epsilon / (lprobs.size(-1) - 1)
    loss = (1.0 - epsilon - eps_i) * nll + eps_i * smooth
    return loss, nll


def smoothed_nll_of_logits(logits: torch.Tensor, target: torch.Tensor, epsilon: float,
                           ignore_index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`label_smoothed_nll` of logits (N, V) in any float dtype, log-softmaxed in fp32."""
    return label_smoothed_nll(F.log_softmax(logits, dim=-1, dtype=torch.float32), target,
                              epsilon, ignore_index)


@cache
def compiled_smoothed_nll():
    """`smoothed_nll_of_logits` through torch.compile: on a GPU one pass over the bf16 logits
    forward and one backward, where eager materialises fp32 log-probabilities and their
    gradient (measured on an H200 at 32k tokens x 30k words: 7.0 ms against 16.9, forward
    and backward). Made at first use, so importing this module does not load the compiler."""
    return torch.compile(smoothed_nll_of_logits, dynamic=True)
