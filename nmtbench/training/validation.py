"""What a run is scored on after each epoch: the validation loss (which picks best.pt and
stops training early) and, for the curve figures, the greedy BLEU of the valid set."""

from __future__ import annotations

from typing import Any

import torch

from nmtbench.devices import autocast
from nmtbench.evaluation.metrics import multi_bleu_perl
from nmtbench.evaluation.translate import translate_lines
from nmtbench.fileio import read_lines
from nmtbench.parts.batches import Bitext
from nmtbench.parts.contract import Model
from nmtbench.run_paths import RunPaths
from nmtbench.training.distributed import World
from nmtbench.workflow.train_settings import TrainConfig


@torch.no_grad()
def validation_loss(model: Model, data: Bitext, tc: TrainConfig, world: World,
                    device: torch.device) -> float:
    """Mean per-token loss on the validation set (label-smoothed, like fairseq's); each
    process scores its share of the batches."""
    model.eval()
    total, tokens = 0.0, 0
    batches = data.batches(tc.max_tokens, multiple=tc.batch_size_multiple,
                           max_sentences=tc.max_sentences)
    for indices in batches[world.rank::world.size]:
        batch = data.collate(indices).to(device)
        with autocast(device):
            loss, losses = model.loss(batch)
        total += float(loss) * float(losses.ntokens)
        tokens += int(losses.ntokens)
    total, tokens = world.all_reduce_sum([total, tokens], device)
    return total / max(tokens, 1)


@torch.no_grad()
def valid_bleu(model: Model, src_tok: Any, tgt_tok: Any, paths: RunPaths) -> float:
    """Tokenized BLEU of greedy decoding (mask-predict: one length candidate) on the valid
    set (case-sensitive), like fairseq's --eval-bleu; the curve figures plot it against
    epochs or steps."""
    model.eval()
    hyps = translate_lines(model, src_tok, tgt_tok, read_lines(paths.valid_src), beam=1,
                           length_beam=1)
    refs = read_lines(paths.valid_tgt)
    return multi_bleu_perl(lowercase=False).corpus_score(hyps, [refs]).score
