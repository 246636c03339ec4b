"""Toy-world pre-training: tiny BERTs (masked LM) and a tiny GPT-2 (causal LM) on one side's
monolingual corpus, saved with `save_pretrained` next to their tokenizer.

The papers start from BERTs pre-trained on billions of words; the toy world stands in with
models pre-trained on its own monolingual text, written in the Hugging Face format so that the
methods load them exactly as they load `bert-base-uncased` (`AutoModel.from_pretrained(dir)`).

Recipe (Devlin et al. 2019, scaled down): 15% of the non-special tokens are selected, of those
80% become [MASK], 10% a random token, 10% stay (`DataCollatorForLanguageModeling`); AdamW with
weight decay 0.01, linear warm-up then linear decay. Choices of ours: no next-sentence task
(the toy corpus has no documents; RoBERTa showed it is not needed), token-based batches of
single sentences, the GPT-2 reads the side's WordPiece vocabulary with [CLS]/[SEP] as its
begin/end tokens. The last `heldout_sentences` lines are held out and scored after training:
masked-token accuracy (BERT) or next-token accuracy and perplexity (GPT-2).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict
from itertools import zip_longest
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from tqdm import tqdm

from nmtbench import layout
from nmtbench.data.tokenization import load_tokenizer, vocab_of
from nmtbench.errors import InputError
from nmtbench.fileio import atomic_directory, read_lines, write_json
from nmtbench.parts.batches import token_batches
from nmtbench.parts.contract import adamw, bert_decay_groups
from nmtbench.parts.pretrained import architecture
from nmtbench.training.curves import Curves
from nmtbench.workflow.pretrain_settings import PretrainConfig

if TYPE_CHECKING:  # imported where used: planning the DAG does not load transformers
    from collections.abc import Callable

    from transformers import PreTrainedTokenizerBase

log = logging.getLogger(__name__)


def build_model(cfg: PretrainConfig, tok: PreTrainedTokenizerBase) -> torch.nn.Module:
    from transformers import BertForMaskedLM, GPT2LMHeadModel

    model = BertForMaskedLM if cfg.model == "bert" else GPT2LMHeadModel
    return model(architecture(cfg, vocab_of(tok)))


class Batcher:
    """Turns a list of token-id sequences into model inputs: MLM-masked for BERT (labels
    -100 except at the selected positions), shifted inside the model for GPT-2 (labels -100
    at padding)."""

    def __init__(self, cfg: PretrainConfig, tok: PreTrainedTokenizerBase):
        from transformers import DataCollatorForLanguageModeling

        self.model, self.pad = cfg.model, tok.pad_token_id
        self.collator = DataCollatorForLanguageModeling(
            tok, mlm=True, mlm_probability=cfg.mask_prob,
            mask_replace_prob=cfg.mask_replace_prob, random_replace_prob=cfg.random_replace_prob)
        self.mask = tok.mask_token_id

    def __call__(self, seqs: list[list[int]]) -> dict[str, torch.Tensor]:
        if self.model == "bert":
            return dict(self.collator([{"input_ids": s} for s in seqs]))
        longest = max(len(s) for s in seqs)
        ids = torch.tensor([s + [self.pad] * (longest - len(s)) for s in seqs])
        mask = torch.tensor([[1] * len(s) + [0] * (longest - len(s)) for s in seqs])
        return {"input_ids": ids, "attention_mask": mask,
                "labels": ids.masked_fill(mask == 0, -100)}


def _encode(lines: list[str], tok: PreTrainedTokenizerBase, max_positions: int,
            where: str) -> tuple[list[list[int]], int]:
    """The lines encoded, less those longer than max_positions, and how many those are (the
    summary records it). Dropping half of them or more is refused, as training refuses it of
    a corpus (nmtbench.parts.batches.Bitext.encode): what is left is another corpus than the
    one the config names."""
    seqs = tok(lines, add_special_tokens=True)["input_ids"]
    kept = [s for s in seqs if len(s) <= max_positions]
    if 2 * len(kept) <= len(seqs):
        raise InputError(f"{where}: {len(seqs) - len(kept)} of {len(seqs)} sentences are "
                         f"longer than max_positions ({max_positions} tokens); raise the "
                         "pre-training setting max_positions")
    if len(kept) < len(seqs):
        log.warning("%s: dropped %d of %d sentences longer than %d tokens", where,
                    len(seqs) - len(kept), len(seqs), max_positions)
    return kept, len(seqs) - len(kept)


@torch.no_grad()
def heldout_scores(model: torch.nn.Module, batcher: Batcher, seqs: list[list[int]],
                   max_tokens: int, seed: int) -> dict[str, float]:
    """Token accuracy and perplexity on held-out sentences, over the positions replaced by
    [MASK] (BERT; not the selected tokens kept or randomised, which the input gives away or
    misleads on, so the figure is the same whatever the replacement shares) or every next token
    (GPT-2); BERT's masks are drawn with a fixed seed."""
    model.eval()
    torch.manual_seed(seed)
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    correct = total = 0
    nll = 0.0
    for indices in token_batches(order, [len(s) for s in seqs], max_tokens):
        batch = batcher([seqs[i] for i in indices])
        logits = model(input_ids=batch["input_ids"],
                       attention_mask=batch["attention_mask"]).logits
        labels = batch["labels"]
        if batcher.model == "gpt2":  # position t predicts token t + 1
            logits, labels = logits[:, :-1], labels[:, 1:]
        scored = labels != -100
        if batcher.model == "bert":
            scored &= batch["input_ids"] == batcher.mask
        correct += int((logits.argmax(-1)[scored] == labels[scored]).sum())
        total += int(scored.sum())
        nll += float(torch.nn.functional.cross_entropy(logits[scored], labels[scored],
                                                       reduction="sum"))
    return {"accuracy": correct / max(total, 1), "perplexity": math.exp(nll / max(total, 1)),
            "scored_tokens": total}


def train_updates(model: torch.nn.Module, batcher: Batcher, train: list[list[int]],
                  cfg: PretrainConfig, curves: Curves, desc: str,
                  on_log: Callable[[int], None] | None = None) -> tuple[int, float]:
    """Train `model` on `train` for `cfg.max_updates` updates (its curves every
    `log_interval` and at the last, where `on_log(step)` is called too: a benchmark measures
    there); the updates made, and the epochs they make."""
    groups = bert_decay_groups(model.parameters())
    optimizer = adamw(groups, cfg.weight_decay, lr=cfg.lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(
        (step + 1) / max(cfg.warmup_updates, 1),
        max(0.0, (cfg.max_updates - step) / max(cfg.max_updates - cfg.warmup_updates, 1))))
    order = sorted(range(len(train)), key=lambda i: len(train[i]))
    lengths = [len(s) for s in train]
    step, epoch = 0, 0
    model.train()
    with tqdm(total=cfg.max_updates, desc=desc, unit="step", mininterval=5,
              disable=None) as bar:
        while step < cfg.max_updates:
            epoch += 1
            for indices in token_batches(order, lengths, cfg.max_tokens, cfg.seed + epoch):
                tick = time.perf_counter()
                loss = model(**batcher([train[i] for i in indices])).loss
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                rates = [g["lr"] for g in optimizer.param_groups]  # this update's
                schedule.step()
                step += 1
                bar.update(1)
                curves.timed(sum(lengths[i] for i in indices), tick)
                if step % cfg.log_interval == 0 or step == cfg.max_updates:  # and the last
                    bar.set_postfix(loss=f"{loss.item():.3f}", epoch=epoch)
                    log.info("step %d epoch %d loss %.4f", step, epoch, loss.item())
                    curves.write(step, {"event": "train", "loss": loss.item(),
                                        "grad_norm": float(grad_norm),
                                        **{f"lr_{g.name}": rate for g, rate
                                           in zip(groups, rates, strict=True)}})
                    if on_log is not None:
                        on_log(step)
                        model.train()
                if step >= cfg.max_updates:
                    break
    return step, round(step / max(len(token_batches(order, lengths, cfg.max_tokens)), 1), 2)


def _in_turn(corpora: list[str | Path]) -> list[str]:
    """The corpora's lines, a line of each in turn."""
    texts = [read_lines(path, allow_empty=False) for path in corpora]
    return [line for group in zip_longest(*texts) for line in group if line is not None]


def split_corpus(corpus: str | Path | list[str | Path], tok: PreTrainedTokenizerBase,
                 cfg: PretrainConfig, train_only: list[str | Path] | None = None,
                 ) -> tuple[str, list[list[int]], list[list[int]], dict[str, int]]:
    """The corpus's name, its training and its held-out sentences (the last
    `heldout_sentences`), encoded, and how many of each were dropped as longer than
    max_positions. Several corpora (a joint vocabulary's two sides) are read a line of each
    in turn, so that the held-out sentences come from all of them. The `train_only` corpora
    (text beyond the dataset's own) go before the training sentences, never among the
    held-out ones: those stay the dataset's last lines, so a BERT's held-out accuracy
    compares with that of one pre-trained without them."""
    corpora = corpus if isinstance(corpus, list) else [corpus]
    lines = _in_turn(corpora)
    name = " + ".join(map(str, corpora))
    if len(lines) <= cfg.heldout_sentences:
        raise InputError(f"{name}: {len(lines)} lines, not more than heldout_sentences "
                         f"({cfg.heldout_sentences})")
    train, dropped = _encode(lines[: -cfg.heldout_sentences], tok, cfg.max_positions, name)
    if train_only:
        extra = " + ".join(map(str, train_only))
        more, more_dropped = _encode(_in_turn(train_only), tok, cfg.max_positions, extra)
        train, dropped = more + train, dropped + more_dropped
        name = f"{name}; for training also {extra}"
    heldout, heldout_dropped = _encode(lines[-cfg.heldout_sentences:], tok, cfg.max_positions,
                                       name)
    return name, train, heldout, {"train": dropped, "heldout": heldout_dropped}


def pretrain(corpus: str | Path | list[str | Path], tokenizer_dir: str | Path, out: str | Path,
             settings: dict[str, Any], wandb_project: str | None = None,
             train_only: list[str | Path] | None = None) -> dict[str, Any]:
    """Pre-train on `corpus` (and `train_only`: `split_corpus`) and write model, tokenizer and
    pretrain_summary.json into `out`, atomically (a killed job leaves no directory that looks
    finished), with the curves of the training (nmtbench.training.curves; also to W&B where
    `wandb_project` names a project)."""
    cfg = PretrainConfig.from_dict(settings)
    torch.manual_seed(cfg.seed)
    tok = load_tokenizer(tokenizer_dir)
    corpus, train, heldout, dropped = split_corpus(corpus, tok, cfg, train_only)
    model = build_model(cfg, tok)
    batcher = Batcher(cfg, tok)
    start = time.perf_counter()
    # trained inside the directory that replaces `out`: the curves are written there
    with atomic_directory(out, layout.PRETRAIN_SUMMARY_NAME) as tmp:
        curves = Curves(tmp, True, wandb_project, asdict(cfg), name=str(out))
        try:
            step, epochs = train_updates(model, batcher, train, cfg, curves,
                                         f"pretrain {cfg.model} {out}")
            seconds = round(time.perf_counter() - start, 2)
            scores = heldout_scores(model, batcher, heldout, cfg.max_tokens, cfg.seed)
            curves.write(step, {"event": "heldout", **scores})
        finally:
            curves.close()
        summary = {
            "model": cfg.model, "settings": asdict(cfg), "corpus": str(corpus),
            "train_sentences": len(train), "heldout_sentences": len(heldout),
            # sentences longer than max_positions, left out of each (at most half of either)
            "dropped_sentences": dropped, "updates": step,
            "epochs": epochs, "seconds": seconds,
            "params": sum(p.numel() for p in model.parameters()), "heldout": scores,
        }
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        write_json(tmp / layout.PRETRAIN_SUMMARY_NAME, summary)
    return summary
