"""`python -m nmtbench <command>`: the commands the workflow's rules run (and users may too).

Heavy imports happen inside each command so that `score` and `--help` start fast.
Bad input (a bad option, file or setting) ends with one line on stderr and exit status 2; a
system failure (disk full, permission denied) with one line and status 1; never a traceback.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import math
import os
import sys
from fnmatch import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nmtbench import layout
from nmtbench.devices import resolve_device
from nmtbench.errors import InputError
from nmtbench.fileio import temp_dir_failure
from nmtbench.run_paths import RunPaths
from nmtbench.workflow import decode_settings
from nmtbench.workflow.decode_settings import at_least
from nmtbench.workflow.metric_registry import BOOTSTRAP_SCORES, DETOK_LANGS

if TYPE_CHECKING:
    from nmtbench.workflow.plan import Plan


class _Parser(argparse.ArgumentParser):
    """A bad command line is one line too (argparse would print the usage above it)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"error: {self.prog}: {message} (see --help)\n")


def json_object(text: str, option: str) -> dict[str, Any]:
    """An option's JSON object, or one line saying what is wrong with it. NaN and Infinity,
    which Python's json accepts, are refused, and so is a number too large for a float
    (1e999, which it reads as infinity): no setting may be one."""
    def not_a_number(constant: str) -> None:
        raise ValueError(f"{constant} is not a finite number")

    def finite(number: str) -> float:
        if not math.isfinite(value := float(number)):
            not_a_number(number)
        return value

    try:
        value = json.loads(text, parse_constant=not_a_number, parse_float=finite)
    except ValueError as err:  # json.JSONDecodeError is one
        raise InputError(f"{option}: invalid JSON ({err})") from None
    if not isinstance(value, dict):
        raise InputError(f"{option}: expected a JSON object, got {type(value).__name__}")
    return value


POSITIVE, NON_NEGATIVE = at_least(1), at_least(0)


# A seed numpy and torch take (config/schema.yaml's $defs.seed range)
seed = at_least(0, 2 ** 32 - 1)
# Fewer resamples give no p-value below 0.05 to trust, more would run for days on a real test
# set (config/schema.yaml has the same range)
BOOTSTRAP_SAMPLES = at_least(10, 100_000)


def _threads(n: int | None) -> None:
    """Use the job's n threads; the processes torchrun starts share them out."""
    if n:
        import torch

        torch.set_num_threads(max(1, n // int(os.environ.get("WORLD_SIZE", "1"))))


TOY_SPLITS = ("train", "valid", "test", "test-official", "mono")  # what `generate` writes
MANIFEST = Path(layout.PREPARED_MANIFEST).name  # and the world it was made with, beside them


def cmd_toyworld(args: argparse.Namespace) -> None:
    from nmtbench.data.toyworld import WorldConfig, generate
    from nmtbench.fileio import refuse_foreign, write_json
    from nmtbench.workflow.config import check_world

    # a directory holding anything else (a run's, a checkpoint's) is not a toy world's
    refuse_foreign(args.out, [*(f"{split}.{side}" for split in TOY_SPLITS
                                for side in ("src", "tgt")), MANIFEST], "toy world")
    world = json_object(args.world, "--world") if args.world else {}
    given = dict(world)
    names = ("train_pairs", "valid_pairs", "test_pairs", "mono_sentences")
    if missing := [k for k in names if k not in world]:
        raise InputError(f"--world: the split sizes {', '.join(missing)} are missing")
    check_world(world, "--world")
    sizes = {k: world.pop(k) for k in (*names, "test_official_pairs") if k in world}
    try:
        counts = generate(args.out, WorldConfig.from_dict(world), **sizes)
    except InputError as err:  # a setting or size of the world, named by its key
        raise InputError(f"--world: {err}") from None
    # last, and what it was given: the report compares it with the config's world now
    write_json(Path(args.out) / MANIFEST, {"kind": "toyworld", "world": given})
    logging.info("toy world written to %s: %s", args.out, counts)


def _toyworld_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("toyworld", help="generate the toy-world corpora")
    s.add_argument("--out", required=True)
    s.add_argument("--world", help="JSON object: WorldConfig fields and split sizes")
    s.set_defaults(func=cmd_toyworld)


def cmd_tokenizer(args: argparse.Namespace) -> None:
    from nmtbench.data.tokenization import train_wordpiece

    train_wordpiece(args.corpus, args.out, args.vocab_size, lowercase=args.lowercase)


def _tokenizer_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("tokenizer", help="train a WordPiece vocabulary (HF format)")
    s.add_argument("--corpus", nargs="+", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--vocab-size", type=at_least(10), required=True)
    s.add_argument("--lowercase", action="store_true")
    s.set_defaults(func=cmd_tokenizer)


def cmd_train(args: argparse.Namespace) -> None:
    from nmtbench.training.trainer import Trainer

    _threads(args.threads)
    paths = RunPaths(args.train_src, args.train_tgt, args.valid_src, args.valid_tgt,
                     args.src_tokenizer, args.tgt_tokenizer,
                     pretrained=_named(args.pretrained, "--pretrained", "ROLE=DIRECTORY"),
                     inputs=_named(args.input, "--input", "NAME=PATH"))
    summary = Trainer(args.run_dir, train_settings(args.config), paths, device=args.device,
                      compile=args.compile, wandb_project=args.wandb_project).run()
    logging.info("training finished: %s", summary)


def _train_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("train", help="train (or resume) one run")
    s.add_argument("--run-dir", required=True)
    s.add_argument("--config", required=True, help="the resolved experiment config as JSON")
    for name in ("train-src", "train-tgt", "valid-src", "valid-tgt", "src-tokenizer",
                 "tgt-tokenizer"):
        s.add_argument(f"--{name}", required=True)
    s.add_argument("--pretrained", action="append", default=[], metavar="ROLE=DIR",
                   help="a checkpoint the method loads, e.g. src_bert=data/pretrained/x")
    s.add_argument("--input", action="append", default=[], metavar="NAME=PATH",
                   help="another run's output the run trains with (its kinds: "
                   "nmtbench.workflow.run_inputs), e.g. "
                   "init_from=results/runs/.../checkpoints/best.pt")
    s.add_argument("--device", default="auto")
    s.add_argument("--compile", action=argparse.BooleanOptionalAction, default=False,
                   help="on a GPU, torch.compile the model's layers and loss (CPU: eager)")
    _wandb_argument(s)
    s.add_argument("--threads", type=POSITIVE)
    s.set_defaults(func=cmd_train)


def _wandb_argument(s: argparse.ArgumentParser) -> None:
    from nmtbench.training.curves import WANDB_PROJECT_ENV

    s.add_argument("--wandb-project", metavar="PROJECT",
                   default=os.environ.get(WANDB_PROJECT_ENV) or None,
                   help="also log the curves (tensorboard/ of the output) to this W&B project, "
                   "where wandb is installed (WANDB_MODE=offline: into wandb/ beside them); "
                   f"default: ${WANDB_PROJECT_ENV}, which the workflow sets from the config's "
                   "logging.wandb_project")


def train_settings(text: str) -> dict[str, Any]:
    """`train --config`: a run's resolved settings, checked against config/schema.yaml as
    the workflow checks an experiment's; else one line naming --config and the key."""
    from nmtbench.workflow.config import check_run_settings

    cfg = json_object(text, "--config")
    check_run_settings(cfg, "--config")
    return cfg


def _named(items: list[str], option: str, form: str) -> dict[str, str]:
    """NAME=VALUE options as a mapping."""
    named = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise InputError(f"{option} {item!r}: expected {form}")
        named[name] = value
    return named


def cmd_decode(args: argparse.Namespace) -> None:
    from nmtbench.evaluation.translate import translate_file
    from nmtbench.fileio import write_json

    _threads(args.threads)
    settings = decode_settings.from_arguments(args, batch_size=args.batch_size)
    info = translate_file(args.run_dir, args.src, args.out, settings, device=args.device,
                          max_lines=args.max_lines)
    if args.info:
        write_json(args.info, info)


def _decode_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("decode", help="translate a file with a trained run")
    s.add_argument("--run-dir", required=True)
    s.add_argument("--src", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--info", help="write the decoding settings and time as JSON here")
    s.add_argument("--batch-size", type=POSITIVE,
                   default=decode_settings.DecodeSettings.batch_size)
    s.add_argument("--max-lines", type=POSITIVE,
                   help="translate only the first N lines (there must be that many)")
    _decoding_arguments(s)
    s.set_defaults(func=cmd_decode)


def cmd_soft_targets(args: argparse.Namespace) -> None:
    from nmtbench.evaluation.translate import load_run_model

    _threads(args.threads)
    model, src_tok, tgt_tok, cfg = load_run_model(args.run_dir, device=args.device)
    model.write_soft_targets((src_tok, tgt_tok), cfg, args.run_dir,
                             (args.train_src, args.train_tgt), (args.valid_src, args.valid_tgt),
                             args.out, args.top_k, info=args.info, max_tokens=args.max_tokens)


def _soft_targets_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("soft-targets", help="a teacher run's top-K soft targets of a training "
                       "set, the run input of its students (its method writes them)")
    s.add_argument("--run-dir", required=True,
                   help="the teacher's run directory (of a method that gives soft targets)")
    for name in ("train-src", "train-tgt", "valid-src", "valid-tgt"):
        s.add_argument(f"--{name}", required=True)
    s.add_argument("--out", required=True, help="the safetensors file")
    s.add_argument("--info", help="a JSON summary: size, time, the teacher's valid accuracy")
    s.add_argument("--top-k", type=POSITIVE, default=8)
    s.add_argument("--max-tokens", type=POSITIVE, default=4096,
                   help="tokens of masked copies per forward pass")
    s.add_argument("--device", default="auto")
    s.add_argument("--threads", type=POSITIVE)
    s.set_defaults(func=cmd_soft_targets)


def cmd_export(args: argparse.Namespace) -> None:
    from nmtbench.export.fsmt import export_run

    out = export_run(args.run_dir, args.out, args.checkpoint, args.average_last,
                     args.average_of)
    print(f"wrote {out}: load it with AutoModelForSeq2SeqLM.from_pretrained, its source "
          "tokenizer with AutoTokenizer.from_pretrained and its target tokenizer with "
          "AutoTokenizer.from_pretrained(..., subfolder='target_tokenizer')")


def _export_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("export", help="write a trained Transformer as a Hugging Face model "
                       "(FSMT) and tokenizer")
    s.add_argument("--run-dir", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--checkpoint", default="best", choices=["best", "last"])
    s.add_argument("--average-last", type=NON_NEGATIVE, default=0,
                   help="average the last N checkpoints instead (0: none)")
    s.add_argument("--average-of", default="epochs", choices=["epochs", "updates"],
                   help="what --average-last averages: epoch checkpoints, or those of every "
                        "save_interval_updates updates (keep_interval_updates)")
    s.set_defaults(func=cmd_export)


def cmd_evaluate(args: argparse.Namespace) -> None:
    from nmtbench.evaluation.evaluate import Decoded, Scoring, evaluate_run

    decoded = Decoded(args.hyp, args.summary, args.run_config, args.info)
    scoring = Scoring(args.ref, args.lowercase, args.detok_lang, args.raw_ref,
                      args.compound_split)
    metrics = evaluate_run(decoded, args.split, scoring, args.out)
    logging.info("BLEU %s", metrics["bleu"])


def _evaluate_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("evaluate", help="score a run's hypotheses into metrics.json")
    s.add_argument("--summary", required=True, help="the run's train_summary.json")
    s.add_argument("--run-config", required=True, help="the run's config.json")
    s.add_argument("--split", required=True)
    s.add_argument("--hyp", required=True)
    s.add_argument("--ref", required=True, help="tokenized reference")
    s.add_argument("--raw-ref", help="untokenized reference for sacreBLEU, if the data has one")
    s.add_argument("--info", help="the decoding's JSON record, copied into the metrics")
    s.add_argument("--out", required=True)
    s.add_argument("--lowercase", action="store_true")
    s.add_argument("--detok-lang", default="en", choices=DETOK_LANGS, metavar="LANG",
                   help="Moses detokenizer language (%(default)s; one of %(choices)s)")
    s.add_argument("--compound-split", action="store_true",
                   help="split hyphenated compounds before tokenized BLEU (WMT14 En-De)")
    s.set_defaults(func=cmd_evaluate)


def cmd_latency(args: argparse.Namespace) -> None:
    from nmtbench.evaluation.latency import measure_latency

    _threads(args.threads)
    settings = decode_settings.from_arguments(args)
    baseline = None
    if args.baseline_decode:
        baseline = _decode_settings(json_object(args.baseline_decode, "--baseline-decode"),
                                    "--baseline-decode")
    result = measure_latency(args.run_dir, args.src, args.out, sentences=args.sentences,
                             throughput_batch=args.throughput_batch, device=args.device,
                             settings=settings, baseline_dir=args.baseline_run_dir,
                             baseline_settings=baseline)
    logging.info("latency: median %.1f ms, p90 %.1f ms on %s%s",
                 result["latency_ms"]["median"], result["latency_ms"]["p90"], result["device"],
                 f"; speedup {result['speedup']:.2f}x" if "speedup" in result else "")


def _decode_settings(values: dict, option: str) -> decode_settings.DecodeSettings:
    """A JSON option's decoding settings, checked as a config's `decode:` block is (and the
    method's `decoding`, which the workflow passes with them)."""
    from nmtbench.workflow.config import check_against
    from nmtbench.workflow.schema import definitions

    schema = definitions()["decode"]
    decoding = {"enum": ["at", "nat"]}
    check_against({**schema, "properties": {**schema["properties"], "decoding": decoding}},
                  values, f"{option}: key 'decode")
    return decode_settings.DecodeSettings.from_dict(values)


def _latency_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("latency", help="per-sentence decoding latency at batch size 1")
    s.add_argument("--run-dir", required=True)
    s.add_argument("--src", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--sentences", type=POSITIVE, default=100,
                   help="measured after 5 warm-up ones")
    s.add_argument("--throughput-batch", type=POSITIVE, default=64,
                   help="batch size of the throughput measurement")
    s.add_argument("--baseline-run-dir",
                   help="the autoregressive baseline run, measured in the same job (speedup)")
    s.add_argument("--baseline-decode",
                   help="the baseline's decoding settings as JSON (keys as config `decode`)")
    _decoding_arguments(s)
    s.set_defaults(func=cmd_latency)


def cmd_bootstrap(args: argparse.Namespace) -> None:
    from nmtbench.evaluation.analysis import paired_bootstrap

    result = paired_bootstrap(args.hyp, args.baseline, args.ref, args.out, samples=args.samples,
                              seed=args.seed, lowercase=args.lowercase, score=args.score,
                              compound_split=args.compound_split, detok_lang=args.detok_lang)
    logging.info("paired bootstrap of %s: %s (win ratio %.3f)", args.score, result["significance"],
                 result["win_ratio"])


def _bootstrap_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("bootstrap",
                       help="compare-mt paired bootstrap of two outputs (BLEU or a ROUGE F1)")
    s.add_argument("--hyp", required=True)
    s.add_argument("--baseline", required=True)
    s.add_argument("--ref", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--samples", type=BOOTSTRAP_SAMPLES, default=1000,
                   help="resamples (at least 10, as config key analysis.bootstrap_samples)")
    s.add_argument("--seed", type=seed, default=1)
    s.add_argument("--lowercase", action="store_true")
    s.add_argument("--score", choices=BOOTSTRAP_SCORES, default="bleu",
                   help="what each resample scores (default: tokenized BLEU)")
    s.add_argument("--compound-split", action="store_true",
                   help="split hyphenated compounds before BLEU, as the cell's BLEU does")
    s.add_argument("--detok-lang", default="en", choices=DETOK_LANGS, metavar="LANG",
                   help="Moses detokenizer language before sacreBLEU's tokens (%(default)s)")
    s.set_defaults(func=cmd_bootstrap)


def cmd_buckets(args: argparse.Namespace) -> None:
    from nmtbench.evaluation.analysis import length_buckets

    length_buckets(args.hyp, args.ref, args.out, cutoffs=args.cutoffs, lowercase=args.lowercase,
                   compound_split=args.compound_split)


def _buckets_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("buckets", help="BLEU by output-length bucket (compare-mt buckets)")
    s.add_argument("--hyp", required=True)
    s.add_argument("--ref", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--cutoffs", type=POSITIVE, nargs="+", required=True,
                   help="increasing output lengths (tokens) where buckets end")
    s.add_argument("--lowercase", action="store_true")
    s.add_argument("--compound-split", action="store_true",
                   help="split hyphenated compounds before BLEU, as the cells' BLEU does")
    s.set_defaults(func=cmd_buckets)


def cmd_download(args: argparse.Namespace) -> None:
    from nmtbench.data.download import download

    digest = download(args.url, args.out, args.sha256, md5=args.md5, retries=args.retries)
    logging.info("downloaded %s (sha256 %s)", args.out, digest)


def _download_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("download", help="download one file, verified against its checksum")
    s.add_argument("--url", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--sha256", help="the pinned checksum (neither given: not pinned, log it)")
    s.add_argument("--md5", help="the pinned MD5, where no SHA-256 was ever published")
    s.add_argument("--retries", type=NON_NEGATIVE, default=5)
    s.set_defaults(func=cmd_download)


def cmd_prepare(args: argparse.Namespace) -> None:
    from nmtbench.data.recipes import prepare

    manifest = prepare(args.dataset, json_object(args.spec, "--spec"), args.downloads, args.out,
                       workers=args.workers)
    logging.info("prepared %s: %s", args.dataset,
                 {k: v["lines"] for k, v in manifest["splits"].items()})


def _prepare_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("prepare", help="prepare a real dataset from its downloaded releases")
    s.add_argument("--dataset", required=True)
    s.add_argument("--spec", required=True, help="the dataset's config entry as JSON")
    s.add_argument("--downloads", required=True, help="the directory of <source>/<file>")
    s.add_argument("--out", required=True)
    s.add_argument("--workers", type=POSITIVE, default=1,
                   help="processes for Moses tokenization")
    s.set_defaults(func=cmd_prepare)


def cmd_monolingual(args: argparse.Namespace) -> None:
    from nmtbench.data.monolingual import prepare_monolingual

    manifest = prepare_monolingual(args.dataset, json_object(args.spec, "--spec"), args.corpus,
                                   args.downloads, args.out, workers=args.workers,
                                   max_sentences=args.max_sentences, side=args.side)
    logging.info("prepared %s: %d sentences of %s", args.out, manifest["sentences"], args.corpus)


def _monolingual_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("monolingual", help="monolingual sentences for back-translation or "
                       "pre-training, processed as a real dataset's side")
    s.add_argument("--dataset", required=True)
    s.add_argument("--spec", required=True, help="the dataset's config entry as JSON")
    s.add_argument("--corpus", required=True, help="a corpus of nmtbench.data.monolingual.CORPORA, "
                   "e.g. english-wikipedia")
    s.add_argument("--downloads", required=True, help="the directory of <source>/<file>")
    s.add_argument("--out", required=True, help="the sentences, one a line; the manifest goes "
                   "beside it (OUT.manifest.json)")
    s.add_argument("--side", choices=("src", "tgt"), default="tgt",
                   help="the side whose language and processing the sentences take")
    s.add_argument("--max-sentences", type=POSITIVE,
                   help="keep only the first N (default: all)")
    s.add_argument("--workers", type=POSITIVE, default=1, help="processes for splitting and "
                   "tokenizing")
    s.set_defaults(func=cmd_monolingual)


def _checked_plan(args: argparse.Namespace, config: dict[str, Any] | None = None,
                  default: tuple[str, ...] = ()) -> Plan:
    """The plan of `config`, else of config/config.yaml with `--configfile`s (or `default`
    ones) merged over it as snakemake merges them, checked as the workflow checks it."""
    from nmtbench.workflow.config import check, load_config

    root = Path(args.root).resolve()
    if config is None:
        files = args.configfile or [root / name for name in default]
        config = load_config([root / "config" / "config.yaml", *files])
    return check(config, root / "config" / "schema.yaml", root / "papers")


def _config_arguments(s: argparse.ArgumentParser, root: str = "config/ and papers/",
                      default: str = "") -> None:
    s.add_argument("--configfile", nargs="*", default=[], action="extend",  # every flag's
                   help="config files merged over config/config.yaml, as snakemake does"
                   + (f" (default: {default})" if default else ""))
    s.add_argument("--root", default=".", help=f"the repository: {root}")


def cmd_params(args: argparse.Namespace) -> None:
    from nmtbench.evaluation.params import count_parameters

    plan = _checked_plan(args, default=("config/paper.yaml",))
    if args.experiment not in plan.experiments:
        raise InputError(f"unknown experiment {args.experiment!r}")
    status = plan.status(args.experiment, plan.dataset(args.dataset, "--dataset"))
    if status != "ok":
        raise InputError(f"experiment {args.experiment!r} on {args.dataset}: {status}")
    print(json.dumps(count_parameters(plan, args.dataset, args.experiment)))


def _params_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("params", help="count an experiment's parameters from configs alone",
                       description="Build the experiment's model on the dataset from configs "
                       "only (random weights, no download) and print {\"total\", \"trained\"}.")
    s.add_argument("experiment")
    s.add_argument("--dataset", required=True)
    _config_arguments(s, default="config/paper.yaml, the papers' settings")
    s.set_defaults(func=cmd_params)


def cmd_check(args: argparse.Namespace) -> None:
    from nmtbench.evaluation.params import check_builds

    built, left = check_builds(_checked_plan(args))
    print(f"config ok: the models of {built} runs build"
          + (f"; {len(left)} wait for their checkpoints' download: {', '.join(left)}"
             if left else ""))


def _check_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("check", help="check a config as the workflow does when it starts",
                       description="Check the config and build every run's model from configs "
                       "alone (no weights, no download), as snakemake does before its first "
                       "job: a bad setting is one line naming the run.")
    _config_arguments(s)
    s.set_defaults(func=cmd_check)


def cmd_recipe(args: argparse.Namespace) -> None:
    from nmtbench.workflow.recipes import markdown

    print(markdown(_checked_plan(args, default=("config/paper.yaml",))))


def _recipe_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("recipe", help="each paper run's effective recipe beside its paper's",
                       description="Print, per paper, a Markdown table of its runs: tokens "
                       "(or sentences) per update (max_tokens x update_freq x the train "
                       "rule's GPUs), updates, epochs, stopping, learning rate, schedule, "
                       "warm-up, checkpoint averaging, beam and length penalty, ours beside "
                       "the paper's (papers/*.yaml `recipes`), with the config's stated "
                       "deviations (recipe_deviations) and the differences it leaves "
                       "unexplained.")
    _config_arguments(s, default="config/paper.yaml, the papers' settings")
    s.set_defaults(func=cmd_recipe)


def cmd_status(args: argparse.Namespace) -> None:
    from nmtbench.workflow.status import Status

    print("\n".join(Status(_checked_plan(args), Path(args.directory)).lines()))


def _status_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("status", help="where each requested cell stands: done, training, "
                       "failed, stale or not started",
                       description="Per requested table, per cell and seed: the run behind it "
                       "and its state (done with its value; training at update x of y and "
                       "when its log last moved; interrupted; failed with its job's log file; "
                       "stale with the reason; not started with what it waits for), read from "
                       "the run directories and Snakemake's logs: no lock taken, no digest, "
                       "safe while the workflow runs.")
    _config_arguments(s)
    s.add_argument("--directory", default=".",
                   help="the workflow's working directory, as snakemake's --directory")
    s.set_defaults(func=cmd_status)


def cmd_snapshot(args: argparse.Namespace) -> None:
    from nmtbench.parts.pretrained import snapshot

    out = snapshot(args.name, args.out or layout.PRETRAINED_DIR.format(pretrained=args.name))
    logging.info("checkpoint %s saved to %s", args.name, out)


def _snapshot_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("snapshot", help="download a hub checkpoint for offline use")
    s.add_argument("name", help="Hugging Face hub name, e.g. bert-base-uncased")
    s.add_argument("--out", help="directory to write (default: data/pretrained/NAME)")
    s.set_defaults(func=cmd_snapshot)


def cmd_trim(args: argparse.Namespace) -> None:
    from nmtbench.parts.trim import trim_checkpoint

    summary = trim_checkpoint(args.checkpoint, args.corpus, args.size, args.out)
    logging.info("checkpoint %s trimmed to %d of %d pieces (%.2f%% of the corpus pieces kept): "
                 "%s", args.checkpoint, summary["size"], summary["original_size"],
                 100 * summary["corpus_coverage"], args.out)


def _trim_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("trim", help="trim a BERT checkpoint's vocabulary to a corpus' pieces",
                       description="Keep the special tokens and the SIZE pieces most frequent "
                       "in the corpora (read by the checkpoint's tokenizer), with their "
                       "embeddings, and write a checkpoint directory.")
    s.add_argument("--checkpoint", required=True, help="the BERT's directory (HF format)")
    s.add_argument("--corpus", nargs="+", required=True, help="the text the pieces come from")
    s.add_argument("--size", type=POSITIVE, required=True, help="pieces kept, specials included")
    s.add_argument("--out", required=True, help="directory to write")
    s.set_defaults(func=cmd_trim)


def cmd_pretrain(args: argparse.Namespace) -> None:
    from nmtbench.training.pretraining import pretrain
    from nmtbench.workflow.config import check_pretrain_settings

    settings = json_object(args.settings, "--settings")
    check_pretrain_settings(settings, "--settings")
    _threads(args.threads)
    summary = pretrain(args.corpus, args.tokenizer, args.out, settings, args.wandb_project,
                       train_only=args.train_only)
    logging.info("pre-training finished: held-out %s", summary["heldout"])


def _pretrain_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("pretrain", help="pre-train a tiny BERT or GPT-2 on a monolingual corpus")
    s.add_argument("--corpus", nargs="+", required=True,
                   help="one or more corpora (several: read line by line in turn)")
    s.add_argument("--train-only", nargs="+", default=[], metavar="CORPUS",
                   help="corpora read for training only, never held out (several: in turn)")
    s.add_argument("--tokenizer", required=True, help="tokenizer directory (HF format)")
    s.add_argument("--out", required=True)
    s.add_argument("--settings", required=True,
                   help="JSON object of nmtbench.workflow.pretrain_settings.PretrainConfig fields")
    _wandb_argument(s)
    s.add_argument("--threads", type=POSITIVE)
    s.set_defaults(func=cmd_pretrain)


def cmd_score(args: argparse.Namespace) -> None:
    from nmtbench.evaluation.metrics import score_files

    print(json.dumps(score_files(args.hyp, args.ref, lowercase=args.lowercase,
                                 detok_lang=args.detok_lang)))


def _score_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("score", help="BLEU of your own output: tokenized and sacreBLEU")
    s.add_argument("--hyp", required=True)
    s.add_argument("--ref", required=True)
    s.add_argument("--lowercase", action="store_true", help="case-insensitive")
    s.add_argument("--detok-lang", choices=DETOK_LANGS, metavar="LANG",
                   help="Moses-detokenize both files before sacreBLEU (one of %(choices)s)")
    s.set_defaults(func=cmd_score)


def cmd_report(args: argparse.Namespace) -> None:
    from nmtbench.report.tables import write_report

    plan = _checked_plan(args, json_object(args.config, "--config") if args.config else None)
    results = Path(args.results)
    out = Path(args.out) if args.out else results / "tables.md"
    root = Path(args.root).resolve()
    configs = args.merged_from if args.config else [root / "config" / "config.yaml",
                                                     *args.configfile]
    for path in write_report(plan, results, out, root, Path(args.pretrained), configs):
        logging.info("wrote %s", path)


def _report_arguments(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("report", help="rebuild tables.md, claims.md, tables.json and the "
                       "figures from run directories",
                       description="Rebuild tables.md, claims.md, tables.json (tables.md for "
                       "programs) and figures/ from the run directories under --results, "
                       "without Snakemake (e.g. after copying results/ off a cluster).")
    _config_arguments(s, root="config/, papers/, git commit")
    s.add_argument("--config", help="the whole workflow config as JSON (what the rule passes)")
    s.add_argument("--merged-from", nargs="*", default=[], metavar="FILE",
                   help="with --config: the config files it was merged from, in order, named "
                   "in tables.md's Settings section")
    s.add_argument("--results", default="results", help="the directory holding runs/")
    s.add_argument("--out", help="tables.md to write (default: RESULTS/tables.md; claims.md, "
                   "its name with .json and figures/ go beside it)")
    s.add_argument("--pretrained", default="data/pretrained",
                   help="the directory holding the checkpoints pre-trained in the DAG")
    s.set_defaults(func=cmd_report)


def _decoding_arguments(s: argparse.ArgumentParser) -> None:
    decode_settings.add_arguments(s)
    s.add_argument("--device", default="auto")
    s.add_argument("--threads", type=POSITIVE)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m nmtbench", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    for arguments in (
            _soft_targets_arguments, _toyworld_arguments, _tokenizer_arguments, _train_arguments,
            _snapshot_arguments, _trim_arguments, _pretrain_arguments, _params_arguments,
            _decode_arguments, _export_arguments, _evaluate_arguments, _score_arguments,
            _report_arguments, _latency_arguments, _bootstrap_arguments, _buckets_arguments,
            _download_arguments, _prepare_arguments, _monolingual_arguments,
            _check_arguments, _recipe_arguments, _status_arguments):
        arguments(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    # under torchrun every process logs to the same file: the others only their warnings
    main_process = os.environ.get("RANK", "0") == "0"
    logging.basicConfig(level=logging.INFO if main_process else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(message)s")
    try:
        _refuse_overlaps(args)
        if hasattr(args, "device"):  # a GPU the host lacks: said before any work is done
            resolve_device(args.device)
        args.func(args)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except FloatingPointError as err:  # diverged training: the last good checkpoint is kept
        print(f"error: {err}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader of its output stopped (`status | head`): no error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush
        return 0
    except OSError as err:  # the system's (disk full, permission denied): say what and where
        print(f"error: {_system_error(err, args)}", file=sys.stderr)
        return 1
    return 0


# The options naming what a command writes (others: --out and --info, where it has them).
WRITES = {"train": ("run_dir",), "report": ("out", "results"), "evaluate": ("out",)}
# The options naming what a command reads: files and directories, NAME=PATH pairs, and runs
# (RUN_OPTIONS: the run's files and every path its config.json records).
READS = {
    "soft-targets": ("run_dir", "train_src", "train_tgt", "valid_src", "valid_tgt"),
    "tokenizer": ("corpus",),
    "train": ("train_src", "train_tgt", "valid_src", "valid_tgt", "src_tokenizer",
              "tgt_tokenizer", "pretrained", "input"),
    "trim": ("checkpoint", "corpus"),
    "pretrain": ("corpus", "train_only", "tokenizer"),
    "decode": ("run_dir", "src"),
    "export": ("run_dir",),
    "evaluate": ("summary", "run_config", "hyp", "ref", "raw_ref", "info"),
    "latency": ("run_dir", "src", "baseline_run_dir"),
    "bootstrap": ("hyp", "baseline", "ref"),
    "buckets": ("hyp", "ref"),
    "prepare": ("downloads",),
    "monolingual": ("downloads",),
    "report": ("pretrained",),
}
RUN_OPTIONS = ("run_dir", "baseline_run_dir")
# A checkout's own files the workflow reads (its git repository too: the report records the
# commit): no command writes over or into them
CHECKOUT_SOURCES = ("Snakefile", "config", "papers", "rules", "envs", "profiles", "scripts",
                    "nmtbench", ".git")


def checkout_sources(root: str | Path) -> list[Path]:
    return [Path(root) / name for name in CHECKOUT_SOURCES]


WORKFLOW_SOURCES = checkout_sources(Path(__file__).resolve().parents[1])


# The commands whose outputs are files (the others write directories, each refusing one that
# is not an earlier output of its own: fileio.atomic_directory)
FILE_OUTPUTS = ("soft-targets", "decode", "evaluate", "latency", "bootstrap",
                "buckets", "download", "monolingual", "report")
# Files the workflow reads that no file-writing command makes: checkpoints, their checksums
# and records, run records, vocabularies, corpora's manifests
FOREIGN_FILES = ("*.pt", "*.sha256", "*.safetensors", "*.bin", "config.json",
                 "train_summary.json", "train_log.jsonl", "pretrain_summary.json",
                 "trim_summary.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
                 "special_tokens_map.json", "manifest.json", layout.VOCABULARY_SUMMARY_NAME)
# Directories that other commands make as a whole: a file added to a run's checkpoints or to a
# checkpoint's directory (which holds one of HF_CHECKPOINT_FILES) would change what it holds,
# a file replaced in a prepared dataset what the runs train and are scored on
FOREIGN_DIRECTORIES = (layout.CHECKPOINTS_NAME,)
HF_CHECKPOINT_FILES = ("model.safetensors", "tokenizer_config.json")
PREPARED = Path(layout.PREPARED_DIR).name
DATA = Path(layout.PREPARED_DIR).parts[0]


def _landing(out: str | Path) -> Path:
    """Where an output lands: its directory through links, its own name as given (a link of
    that name is replaced, not its target)."""
    return Path(out).parent.resolve() / Path(out).name


def _refuse_foreign_outputs(outputs: dict[str, str | Path]) -> None:
    """A file output over a file the workflow reads that this command does not make (another
    run's checkpoint or record, a vocabulary, a prepared corpus) is refused with one line:
    written there, it would corrupt that input."""
    for option, out in outputs.items():
        path = _landing(out)
        if path.exists() and (any(fnmatch(path.name, p) for p in FOREIGN_FILES)
                              or path.parent.name == PREPARED):
            raise InputError(f"{option} {out} is a file another command makes ({path.name}), "
                             "which the workflow reads; write to another path")


# The names a file-writing command's outputs have in a run directory, in the workflow
OWN_RUN_FILES = {command: [layout.run_file_pattern(t) for t in templates] for command, templates
                 in {"decode": (layout.HYP, layout.DECODE_INFO, layout.DISTILLED_TARGETS,
                                layout.DISTILLED_TARGETS_INFO, layout.BACKTRANSLATE,
                                layout.BACKTRANSLATE_INFO),
                     "evaluate": (layout.METRICS,),
                     "soft-targets": (layout.SOFT_TARGETS, layout.SOFT_TARGETS_INFO),
                     "latency": (layout.LATENCY, layout.LATENCY_VS),
                     "bootstrap": (layout.BOOTSTRAP,), "buckets": (layout.BUCKETS,)}.items()}


# The names a file-writing command's outputs have in a prepared dataset, in the workflow
OWN_PREPARED_FILES = {"monolingual": ["mono.src", "mono.tgt"]}


# The option naming the run a file command's outputs belong to (a run directory, or a file in
# one): in a run directory it writes only that run's files
OWNER = {"decode": "run_dir", "soft-targets": "run_dir", "latency": "run_dir",
         "evaluate": "summary", "bootstrap": "hyp", "buckets": "hyp"}


def _owner(args: argparse.Namespace) -> Path | None:
    """The run directory a file command's outputs belong to (OWNER), resolved."""
    if (value := getattr(args, OWNER.get(args.command, ""), None)) is None:
        return None
    path = Path(value).resolve()
    return path if OWNER[args.command] == "run_dir" else path.parent


def _refuse_outputs_in_made_directories(command: str, outputs: dict[str, str | Path],
                                        owner: Path | None = None) -> None:
    """An output, file or directory, inside a directory another command makes as a whole is
    refused with one line: inside a checkpoint's or a vocabulary's directory it would change
    the digest of what every run on it read, inside a run's checkpoints/ what the run keeps,
    and inside a prepared dataset or a run directory it would stop the command that makes it
    again, which refuses a directory holding what it does not write. In a run directory, a
    file of this command's own name there (OWN_RUN_FILES) is what the workflow writes; a file
    of another's (length buckets over a run's metrics) would replace what the report reads,
    and in another run's directory (`owner`: the run it belongs to) one run's hypotheses
    would be scored as the other's."""
    own = OWN_RUN_FILES.get(command, [])
    for option, out in outputs.items():
        path = _landing(out)
        for parent in path.parents:
            if _is_run_directory(parent):
                if parent == path.parent and any(fnmatch(path.name, p) for p in own):
                    if owner is None or parent == owner:
                        continue
                    raise InputError(f"{option} {out} lies in the run directory {parent}, "
                                     f"not in {owner}, the run it is of; write to another path")
                if command in FILE_OUTPUTS:
                    names = f"writes only {', '.join(own)}" if own else "writes nothing"
                    raise InputError(f"{option} {out} lies in the run directory {parent}, "
                                     f"where {command} {names}; write to another path")
                raise InputError(f"{option} {out} lies inside the run directory {parent}, "
                                 "which holds only what training writes; write to another path")
            if parent == path.parent and any(fnmatch(path.name, p) for p in
                                             OWN_PREPARED_FILES.get(command, [])):
                continue  # the monolingual corpus the workflow puts beside the splits
            if _made_as_a_whole(parent, parent == path.parent):
                raise InputError(f"{option} {out} lies inside {parent}, a directory another "
                                 "command makes as a whole; write to another path")


def _made_as_a_whole(directory: Path, holds_output: bool) -> bool:
    """A checkpoint's or vocabulary's directory, a prepared dataset (data/NAME/prepared), or
    the run's checkpoints/ the output would lie directly in: a directory higher up that is
    merely named checkpoints or prepared (a scratch path) is not one."""
    return ((holds_output and directory.name in FOREIGN_DIRECTORIES)
            or (directory.name == PREPARED and directory.parent.parent.name == DATA)
            or any((directory / name).is_file() for name in HF_CHECKPOINT_FILES))


def _is_run_directory(path: Path) -> bool:
    return (path / layout.RUN_CONFIG_NAME).is_file() and (path / layout.CHECKPOINTS_NAME).is_dir()


def _refuse_overlaps(args: argparse.Namespace) -> None:
    """No command writes where it reads: an output that is, contains or lies inside one of
    its inputs is refused with one line before anything is read or written; so is a file
    output over or among files that other commands make (`_refuse_foreign_outputs`)."""
    from nmtbench.fileio import refuse_overlap, refuse_shared_outputs
    from nmtbench.records import run_inputs

    inputs: list[str | Path] = []
    for key in READS.get(args.command, ()):
        value = getattr(args, key, None)
        for item in value if isinstance(value, list) else [value]:
            if not item:
                continue
            if key in RUN_OPTIONS:
                inputs.extend(run_inputs(item))
            elif args.command == "train" and key in ("pretrained", "input"):
                if path := item.partition("=")[2]:  # ROLE=DIR, NAME=PATH
                    inputs.append(path)
            else:
                inputs.append(item)
    outputs = {f"--{key.replace('_', '-')}": path for key in WRITES.get(args.command,
                                                                          ("out", "info"))
               if (path := getattr(args, key, None)) and not (
                   args.command == "report" and key == "results")}
    refuse_shared_outputs(outputs)
    if args.command == "report":
        # the runs it reports and the test sets it compares their scores with (data/ beside
        # results/); tables.md, claims.md, tables.json and figures/ go to --out's directory
        inputs += [Path(args.results) / "runs", Path(args.results).parent / "data"]
        out = Path(args.out) if args.out else Path(args.results) / "tables.md"
        outputs = {"--out": out, "--out (claims.md beside it)": out.parent / "claims.md",
                   "--out (its .json beside it)": out.with_suffix(".json"),
                   "--out (figures/ beside it)": out.parent / "figures"}
    inputs.extend(getattr(args, "configfile", None) or [])  # the configs it reads
    inputs.extend(WORKFLOW_SOURCES)  # what every job of the workflow reads
    if root := getattr(args, "root", None):  # the checkout whose config/ and papers/ it reads
        inputs.extend(checkout_sources(root))
    refuse_overlap(outputs, inputs)
    if args.command in FILE_OUTPUTS:
        _refuse_foreign_outputs(outputs)
    _refuse_outputs_in_made_directories(args.command, outputs, _owner(args))


def _system_error(err: OSError, args: argparse.Namespace) -> str:
    """One line for an OSError: its reason and file (of a rename, the destination: the other
    is a temporary file). A failed write often names no file (`write()` on an open one):
    then the paths the command writes are named."""
    if tempdir := temp_dir_failure(err):
        return f"{tempdir.filename}: {tempdir.strerror}"
    reason = err.strerror or str(err)
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        reason += " (the disk is full)"
    if (path := err.filename2 or err.filename) is not None:
        return f"{path}: {reason}"
    written = [str(path) for key in WRITES.get(args.command, ("out", "info"))
               if (path := getattr(args, key, None))]
    return f"{reason}, writing {' and '.join(written)}" if written else reason
