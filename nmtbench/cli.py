"""`python -m nmtbench <command>`: the commands the workflow's rules run (and users may too).

Heavy imports happen inside each command so that `score` and `--help` start fast.
Bad input ends with one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from nmtbench.errors import InputError


def _threads(n: int | None) -> None:
    if n:
        import torch

        torch.set_num_threads(n)


def cmd_toyworld(args: argparse.Namespace) -> None:
    from nmtbench.toyworld import WorldConfig, generate

    world = json.loads(args.world) if args.world else {}
    sizes = {k: world.pop(k) for k in ("train_pairs", "valid_pairs", "test_pairs",
                                       "mono_sentences") if k in world}
    try:
        cfg = WorldConfig(**world)
    except TypeError as err:
        raise InputError(f"toy world config: {err}") from None
    counts = generate(args.out, cfg, **sizes)
    logging.info("toy world written to %s: %s", args.out, counts)


def cmd_tokenizer(args: argparse.Namespace) -> None:
    from nmtbench.tokenization import train_wordpiece

    train_wordpiece(args.corpus, args.out, args.vocab_size, lowercase=args.lowercase)


def cmd_train(args: argparse.Namespace) -> None:
    from nmtbench.trainer import Trainer

    _threads(args.threads)
    paths = {k: getattr(args, k) for k in ("train_src", "train_tgt", "valid_src", "valid_tgt",
                                           "src_tokenizer", "tgt_tokenizer")}
    summary = Trainer(args.run_dir, json.loads(args.config), paths, device=args.device).run()
    logging.info("training finished: %s", summary)


def cmd_decode(args: argparse.Namespace) -> None:
    from nmtbench.fileio import write_json
    from nmtbench.translate import translate_file

    _threads(args.threads)
    info = translate_file(args.run_dir, args.src, args.out, beam=args.beam, lenpen=args.lenpen,
                          lenpen_form=args.lenpen_form, max_len_a=args.max_len_a,
                          max_len_b=args.max_len_b, batch_size=args.batch_size,
                          checkpoint=args.checkpoint, average_last=args.average_last,
                          device=args.device)
    if args.info:
        write_json(args.info, info)


def cmd_evaluate(args: argparse.Namespace) -> None:
    from nmtbench.evaluate import evaluate_run

    metrics = evaluate_run(args.run_dir, args.split, args.hyp, args.ref, args.out,
                           lowercase=args.lowercase, detok_lang=args.detok_lang,
                           raw_ref_path=args.raw_ref)
    logging.info("BLEU %s", metrics["bleu"])


def cmd_score(args: argparse.Namespace) -> None:
    from nmtbench.metrics import score_files

    print(json.dumps(score_files(args.hyp, args.ref, lowercase=args.lowercase,
                                 detok_lang=args.detok_lang)))


def cmd_report(args: argparse.Namespace) -> None:
    import yaml

    from nmtbench.report import write_tables

    if args.config:
        config = json.loads(args.config)
    else:
        try:
            config = yaml.safe_load(Path(args.configfile).read_text())
        except (OSError, yaml.YAMLError) as err:
            raise InputError(f"{args.configfile}: cannot read config ({err})") from None
    run_dirs = [Path(p).resolve() for p in args.runs] if args.runs else sorted(
        p.parent.resolve() for p in Path(args.results, "runs").glob("*/*/seed*/metrics.json"))
    write_tables(config, run_dirs, Path(args.out), root=Path(args.root))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nmtbench", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("toyworld", help="generate the toy-world corpora")
    s.add_argument("--out", required=True)
    s.add_argument("--world", help="JSON object: WorldConfig fields and split sizes")
    s.set_defaults(func=cmd_toyworld)

    s = sub.add_parser("tokenizer", help="train a WordPiece vocabulary (HF format)")
    s.add_argument("--corpus", nargs="+", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--vocab-size", type=int, required=True)
    s.add_argument("--lowercase", action="store_true")
    s.set_defaults(func=cmd_tokenizer)

    s = sub.add_parser("train", help="train (or resume) one run")
    s.add_argument("--run-dir", required=True)
    s.add_argument("--config", required=True, help="the resolved experiment config as JSON")
    for name in ("train-src", "train-tgt", "valid-src", "valid-tgt", "src-tokenizer",
                 "tgt-tokenizer"):
        s.add_argument(f"--{name}", required=True)
    s.add_argument("--device", default="auto")
    s.add_argument("--threads", type=int)
    s.set_defaults(func=cmd_train)

    s = sub.add_parser("decode", help="translate a file with a trained run")
    s.add_argument("--run-dir", required=True)
    s.add_argument("--src", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--info", help="write the decoding settings and time as JSON here")
    s.add_argument("--beam", type=int, default=5)
    s.add_argument("--lenpen", type=float, default=1.0)
    s.add_argument("--lenpen-form", choices=["fairseq", "gnmt"], default="fairseq")
    s.add_argument("--max-len-a", type=float, default=1.2)
    s.add_argument("--max-len-b", type=int, default=10)
    s.add_argument("--batch-size", type=int, default=64)
    s.add_argument("--checkpoint", choices=["best", "last"], default="best")
    s.add_argument("--average-last", type=int, default=0,
                   help="average the last k epoch checkpoints instead")
    s.add_argument("--device", default="auto")
    s.add_argument("--threads", type=int)
    s.set_defaults(func=cmd_decode)

    s = sub.add_parser("evaluate", help="score a run's hypotheses into metrics.json")
    s.add_argument("--run-dir", required=True)
    s.add_argument("--split", required=True)
    s.add_argument("--hyp", required=True)
    s.add_argument("--ref", required=True, help="tokenized reference")
    s.add_argument("--raw-ref", help="untokenized reference for sacreBLEU, if the data has one")
    s.add_argument("--out", required=True)
    s.add_argument("--lowercase", action="store_true")
    s.add_argument("--detok-lang", default="en")
    s.set_defaults(func=cmd_evaluate)

    s = sub.add_parser("score", help="BLEU of your own output: tokenized and sacreBLEU")
    s.add_argument("--hyp", required=True)
    s.add_argument("--ref", required=True)
    s.add_argument("--lowercase", action="store_true", help="case-insensitive")
    s.add_argument("--detok-lang", help="Moses-detokenize both files before sacreBLEU")
    s.set_defaults(func=cmd_score)

    s = sub.add_parser("report", help="rebuild results/tables.md from run directories")
    s.add_argument("--configfile", default="config/config.yaml")
    s.add_argument("--config", help="the workflow config as JSON (instead of --configfile)")
    s.add_argument("--results", default="results")
    s.add_argument("--runs", nargs="*", help="run directories (default: all with metrics.json)")
    s.add_argument("--out", default="results/tables.md")
    s.add_argument("--root", default=".", help="repository root, for the commit in provenance")
    s.set_defaults(func=cmd_report)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        args.func(args)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except FloatingPointError as err:  # diverged training: the last good checkpoint is kept
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0
