"""How a BERT pre-trained in the DAG improves with its updates: held-out masked accuracy every
`--every` updates of one pre-training, so that a profile chooses its `max_updates` from a
measured curve rather than a guess.

    python benchmarks/pretrain_curve.py --name m30k-bert-de \
        --corpus data/multi30k-de-en/prepared/train.src \
        --tokenizer data/multi30k-de-en/tokenizer/src \
        --settings '{"model": "bert", "d_model": 256, "ffn_dim": 1024, "layers": 3, ...}'

writes results/pretrain-curve-<name>.md and .json. The run trains exactly as `nmtbench
pretrain` does (nmtbench.training.pretraining, same batches, masks and schedule), and scores the
held-out sentences as its summary does. Its rate decays linearly to 0 at `max_updates`, so the
accuracy at an earlier point is that of a run still at a higher rate: a lower bound for a run
that ends (and decays) there.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import torch

from nmtbench.data.tokenization import load_tokenizer
from nmtbench.fileio import write_json
from nmtbench.training.curves import Curves
from nmtbench.training.pretraining import (
    Batcher,
    build_model,
    heldout_scores,
    split_corpus,
    train_updates,
)
from nmtbench.workflow.pretrain_settings import PretrainConfig

RESULTS = Path(__file__).resolve().parent.parent / "results"


def measure(corpus: list[str], tokenizer: str, settings: dict, every: int,
            train_only: list[str] | None = None) -> dict:
    """The held-out scores every `every` updates of one pre-training (`train_only`: corpora
    read for training only, as a pretraining entry's extra_corpora), with the seconds spent
    training up to each point (evaluation excluded)."""
    cfg = PretrainConfig.from_dict({**settings, "log_interval": every})
    torch.manual_seed(cfg.seed)
    tok = load_tokenizer(tokenizer)
    name, train, heldout, _ = split_corpus(corpus, tok, cfg, train_only)
    model = build_model(cfg, tok)
    batcher = Batcher(cfg, tok)
    points, spent = [], {"eval": 0.0}
    start = time.perf_counter()

    def score(step: int) -> None:
        tick = time.perf_counter()
        trained = tick - start - spent["eval"]
        scores = heldout_scores(model, batcher, heldout, cfg.max_tokens, cfg.seed)
        spent["eval"] += time.perf_counter() - tick
        points.append({"updates": step, **scores, "train_seconds": round(trained, 1)})
        print(json.dumps(points[-1]), flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        curves = Curves(Path(tmp), True, None, {}, name=name)
        try:
            _, epochs = train_updates(model, batcher, train, cfg, curves, f"curve {name}",
                               on_log=score)
        finally:
            curves.close()
    return {"corpus": name, "settings": asdict(cfg),
            "train_sentences": len(train), "heldout_sentences": len(heldout),
            "epochs": epochs, "points": points}


def markdown(name: str, result: dict, command: str) -> str:
    rows = [f"| {p['updates']} | {100 * p['accuracy']:.1f}% | {p['perplexity']:.1f} | "
            f"{p['train_seconds']:.0f} |" for p in result["points"]]
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=RESULTS.parent).stdout.strip()
    return "\n".join([
        f"# Pre-training curve: {name}", "",
        f"Corpus: {result['corpus']} ({result['train_sentences']} training sentences, the last "
        f"{result['heldout_sentences']} held out). Held-out accuracy: tokens given as [MASK] "
        "predicted correctly. One run; its rate decays linearly to 0 at the last update, so an "
        "earlier point is a lower bound for a run that ends there.", "",
        "| updates | held-out accuracy | held-out perplexity | training seconds |",
        "|---|---|---|---|", *rows, "",
        f"Settings: `{json.dumps(result['settings'], sort_keys=True)}`", "",
        f"- command: `{command}`", f"- git commit: {commit}",
        f"- platform: {platform.platform()}; torch {torch.__version__}; "
        f"threads {torch.get_num_threads()}", ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True, help="the checkpoint's name in the config")
    parser.add_argument("--corpus", nargs="+", required=True)
    parser.add_argument("--train-only", nargs="+", default=None,
                        help="corpora read for training only (a pretraining entry's "
                             "extra_corpora, as the workflow makes them)")
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--settings", required=True, help="PretrainConfig fields as JSON")
    parser.add_argument("--every", type=int, default=250, help="updates between scores")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    result = measure(args.corpus, args.tokenizer, json.loads(args.settings), args.every,
                     args.train_only)
    command = "python benchmarks/pretrain_curve.py " + " ".join(
        f"--{k} {json.dumps(v) if k == 'settings' else v}" for k, v in (
            ("name", args.name), ("corpus", " ".join(args.corpus)),
            ("train-only", " ".join(args.train_only or [])),
            ("tokenizer", args.tokenizer), ("settings", json.loads(args.settings)),
            ("every", args.every)) if v)
    out = RESULTS / f"pretrain-curve-{args.name}"
    write_json(out.with_suffix(".json"), result)
    out.with_suffix(".md").write_text(markdown(args.name, result, command))
    print(f"wrote {out}.md and .json")


if __name__ == "__main__":
    main()
