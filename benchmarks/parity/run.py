"""The harness against fairseq 0.12.2 on identical data and settings: `results/parity.md`
(the toy world) and `results/parity-multi30k.md` (real data).

    python benchmarks/parity/run.py [--dataset toy|multi30k] [--seeds ...] [--models ...]

Both systems train on a dataset the workflow prepares (`data/<dataset>`, made by Snakemake if
missing: the embedded default's toy world, or Multi30k De-En as config/multi30k.yaml downloads
it), each side cut into subwords by the harness's own WordPiece tokenizers; fairseq reads them
space-separated, binarised by `fairseq-preprocess`. Every setting comes from the profile's
resolved experiment (DATASETS below): the model size, the trainer's settings and the decoding
settings are translated into fairseq's flags (`fairseq_train_args`), so a change to the profile
changes both sides. One thread per job, `--jobs` jobs at a time. Both systems' outputs are
scored by `nmtbench score` against the same references (tokenized BLEU, case-insensitive where
the dataset's tables are, as the tables report it).

fairseq runs from its own environment (`--fairseq-bin`, default `.venv-fairseq/bin`; build it
with benchmarks/parity/setup_fairseq.sh or envs/fairseq.yaml).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from nmtbench.fileio import read_lines, write_json, write_lines  # noqa: E402
from nmtbench.workflow import recorded_settings  # noqa: E402
from nmtbench.workflow.config import check, load_config  # noqa: E402
from nmtbench.workflow.decode_settings import DecodeSettings  # noqa: E402

SPLITS = ("train", "valid", "test")
CMLM = "cmlm_transformer_separate_vocab"  # fairseq_user/: cmlm_transformer, one vocabulary a side
ARCHS = {"transformer": "transformer", "cmlm": CMLM}  # model -> fairseq's architecture


@dataclass(frozen=True)
class Parity:
    """What one comparison runs: a profile's config files, its dataset, the experiment each
    model's settings come from, the seeds, and where the report goes."""

    configs: tuple[str, ...]
    dataset: str
    experiments: dict[str, str]  # model -> experiment
    seeds: tuple[int, ...]
    out: str

    @property
    def data(self) -> Path:
        return ROOT / "data" / self.dataset


# Seeds far apart: fairseq reseeds dropout with seed + update and shuffles epoch e with seed +
# e (the harness shuffles with seed + e too), so seeds 1 and 2 share most of their random
# streams, shifted by one; apart by more than a run's updates, they share none. Multi30k's
# Mask-Predict trains on the Transformer's translations (sequence_distillation): not compared here.
DATASETS = {
    "toy": Parity(("config/config.yaml",), "toy",
                  {"transformer": "transformer-base", "cmlm": "abnet-mask-predict"},
                  (1, 10001, 20001, 30001, 40001), "results/parity.md"),
    "multi30k": Parity(("config/config.yaml", "config/multi30k.yaml"), "multi30k-de-en",
                       {"transformer": "multi30k-transformer"}, (1, 10001, 20001),
                       "results/parity-multi30k.md"),
}
PARITY = DATASETS["toy"]  # main() sets the one asked for
USER_DIR = ["--user-dir", str(Path(__file__).resolve().parent / "fairseq_user")]
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# fairseq 0.12.2 on current Python and torch (see fairseq_site/sitecustomize.py): its checkpoints
# are pickles that torch.load's weights_only default refuses
FAIRSEQ_ENV = {"PYTHONPATH": str(Path(__file__).resolve().parent / "fairseq_site"),
               "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}


def run(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> float:
    """Run cmd with its output in `log`; return its wall time; fail with the log's tail."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with log.open("w") as out:
        code = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                              env={**os.environ, **ONE_THREAD, **(env or {})}).returncode
    if code != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-15:])
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed ({code}); {log}:\n{tail}")
    return time.perf_counter() - start


# --- settings ------------------------------------------------------------------------------
OVERRIDES: dict[str, Any] = {}  # --set: the same change to both systems' settings
CONFIGFILES: list[Path] = []  # --configfile: for Snakemake only (where the data comes from)


def experiment_settings(model: str, seed: int, epochs: int | None) -> dict[str, Any]:
    """The profile's resolved training settings of the model's experiment on its dataset
    (with --set's overrides)."""
    plan = check(profile(), ROOT / "config" / "schema.yaml", ROOT / "papers")
    experiment = PARITY.experiments[model]
    settings = plan.train_settings(PARITY.dataset, experiment, seed)
    if epochs:
        settings["max_epochs"] = epochs
    settings.update(OVERRIDES)
    settings["decode"] = plan.decode_settings(PARITY.dataset, experiment)
    return settings


def profile() -> dict[str, Any]:
    """The comparison's config: its profile merged over the default."""
    return load_config([ROOT / c for c in PARITY.configs])


def fairseq_train_args(settings: dict[str, Any], arch: str) -> list[str]:
    """The harness's settings as fairseq-train flags."""
    from nmtbench.methods.transformer import TransformerSettings
    from nmtbench.workflow.train_settings import TrainConfig

    m, t = TransformerSettings.from_config(settings), TrainConfig.from_dict(settings)
    args = ["--arch", arch, "--share-decoder-input-output-embed",
            "--dropout", str(m.dropout), "--attention-dropout", str(m.attention_dropout),
            "--activation-dropout", str(m.activation_dropout),
            "--max-source-positions", str(t.max_positions),
            "--max-target-positions", str(t.max_positions),
            "--optimizer", "adam", "--adam-betas", str(tuple(t.adam_betas)),
            "--adam-eps", str(t.adam_eps), "--weight-decay", str(t.weight_decay),
            "--lr", str(t.lr), "--lr-scheduler", "inverse_sqrt",
            "--warmup-updates", str(t.warmup_updates), "--warmup-init-lr", str(t.warmup_init_lr),
            "--clip-norm", str(t.clip_norm), "--max-tokens", str(t.max_tokens),
            "--required-batch-size-multiple", str(t.batch_size_multiple),
            "--update-freq", str(t.update_freq), "--max-epoch", str(t.max_epochs),
            "--seed", str(t.seed), "--cpu", "--num-workers", "0", "--log-format", "json",
            "--log-interval", str(t.log_interval), "--no-epoch-checkpoints"]
    for side in ("encoder", "decoder"):
        args += [f"--{side}-embed-dim", str(m.d_model), f"--{side}-ffn-embed-dim", str(m.ffn_dim),
                 f"--{side}-attention-heads", str(m.n_heads),
                 f"--{side}-layers", str(getattr(m, f"{side}_layers"))]
        if m.pre_norm:
            args.append(f"--{side}-normalize-before")
    if arch == CMLM:  # the length loss's weight: the setting, or Mask-Predict's default
        from nmtbench.methods.cmlm import CMLMSettings

        length = CMLMSettings.from_config(settings).loss_weights.get("length", 1.0)
        args += [*USER_DIR, "--task", "translation_lev", "--noise", "random_mask",
                 "--criterion", "nat_loss", "--label-smoothing", str(m.label_smoothing),
                 "--length-loss-factor", str(length)]
    else:
        args += ["--criterion", "label_smoothed_cross_entropy",
                 "--label-smoothing", str(m.label_smoothing)]
    return args


def fairseq_generate_args(decode: DecodeSettings, arch: str) -> list[str]:
    if arch == CMLM:
        # fairseq counts refinement steps after the first prediction: 10 passes = 9 refinements;
        # like nmtbench.parts.mask_predict it stops early once a pass changes nothing
        return [*USER_DIR, "--task", "translation_lev",
                "--iter-decode-max-iter", str(decode.iterations - 1),
                "--iter-decode-with-beam", str(decode.length_beam),
                "--iter-decode-eos-penalty", "0", "--beam", "1"]
    return ["--beam", str(decode.beam), "--lenpen", str(decode.lenpen),
            "--max-len-a", str(decode.max_len_a), "--max-len-b", str(decode.max_len_b)]


# --- data ----------------------------------------------------------------------------------
def prepare(work: Path, fairseq_bin: Path | None) -> Path:
    """Subword files and (with a fairseq to run) fairseq's binarised copy of the toy world;
    returns the data-bin."""
    from nmtbench.data.tokenization import load_tokenizer

    data = PARITY.data
    targets = [str((data / "tokenizer" / side / "tokenizer_config.json").relative_to(ROOT))
               for side in ("src", "tgt")]
    if not all((ROOT / t).exists() for t in targets):
        configs = [str(c) for c in (*PARITY.configs[1:], *CONFIGFILES)]
        run(["snakemake", "--cores", "all", *targets, *(["--configfile", *configs] if configs
                                                          else [])], work / "logs" / "data.log")
    sub = work / "subwords"
    for side in ("src", "tgt"):
        tok = load_tokenizer(data / "tokenizer" / side, target=side == "tgt")  # as trained
        for split in SPLITS:
            lines = read_lines(data / "prepared" / f"{split}.{side}")
            write_lines(sub / f"{split}.{side}", [" ".join(tok.tokenize(x)) for x in lines])
        # fairseq's dictionary is the harness's vocabulary (fairseq adds its own four special
        # symbols), so both models have the same embedding tables and output classes
        vocab = sorted(tok.get_vocab().items(), key=lambda item: item[1])
        write_lines(sub / f"dict.{side}.txt", [f"{t} 1" for t, _ in vocab
                                               if t not in tok.all_special_tokens])
    bin_dir = work / "data-bin"
    if fairseq_bin and not (bin_dir / "test.src-tgt.tgt.bin").exists():
        run([str(fairseq_bin / "fairseq-preprocess"), "--source-lang", "src", "--target-lang",
             "tgt", "--trainpref", str(sub / "train"), "--validpref", str(sub / "valid"),
             "--testpref", str(sub / "test"), "--srcdict", str(sub / "dict.src.txt"),
             "--tgtdict", str(sub / "dict.tgt.txt"), "--destdir", str(bin_dir),
             "--workers", "1"], work / "logs" / "preprocess.log", FAIRSEQ_ENV)
    return bin_dir


FAIRSEQ_SPECIALS = {"<s>", "<pad>", "</s>", "<unk>", "<mask>"}


def join_subwords(line: str) -> str:
    """Word-level text from fairseq's space-separated WordPiece tokens, as the harness writes
    its own (special tokens left out, continuations joined)."""
    return " ".join(t for t in line.split() if t not in FAIRSEQ_SPECIALS).replace(" ##", "")


def score(hyp: Path, ref: Path) -> dict[str, Any]:
    """BLEU as the dataset's tables score it (case-insensitive where they are)."""
    spec = profile()["datasets"][PARITY.dataset]
    case = ["--lowercase"] if spec["lowercase"] else []
    out = subprocess.run([sys.executable, "-m", "nmtbench", "score", "--hyp", str(hyp), "--ref",
                          str(ref), "--detok-lang", spec["detok_lang"], *case],
                         capture_output=True, text=True, cwd=ROOT, check=True).stdout
    return json.loads(out)


# --- one system, one seed ------------------------------------------------------------------
def run_fairseq(model: str, seed: int, epochs: int | None, work: Path, bin_dir: Path,
                fairseq_bin: Path) -> dict[str, Any]:
    arch = ARCHS[model]
    settings = experiment_settings(model, seed, epochs)
    out = work / "fairseq" / model / f"seed{seed}"
    if not (out / "train.done").exists():  # an unfinished run starts over, for a whole log
        shutil.rmtree(out, ignore_errors=True)
        run([str(fairseq_bin / "fairseq-train"), str(bin_dir), "--save-dir", str(out / "ckpt"),
             *fairseq_train_args(settings, arch)], out / "train.log", FAIRSEQ_ENV)
        (out / "train.done").touch()
    run([str(fairseq_bin / "fairseq-generate"), str(bin_dir), "--path",
         str(out / "ckpt" / "checkpoint_best.pt"), "--gen-subset", "test", "--batch-size", "64",
         "--cpu", *fairseq_generate_args(settings["decode"], arch)], out / "generate.log",
        FAIRSEQ_ENV)
    hyps, seconds = parse_generate(out / "generate.log")
    write_lines(out / "hyp.test.txt", hyps)
    epochs_log = parse_fairseq_log(out / "train.log")
    return {"system": "fairseq", "model": model, "seed": seed, "epochs": epochs_log,
            "updates": epochs_log[-1]["updates"],
            "train_seconds": sum(e["train_seconds"] for e in epochs_log),
            "decode_seconds": seconds, "sentences": len(hyps),
            "bleu": score(out / "hyp.test.txt", PARITY.data / "prepared" / "test.tgt")}


def parse_fairseq_log(log: Path) -> list[dict[str, Any]]:
    """Per epoch: valid loss in nats (fairseq logs bits), updates so far, training seconds."""
    epochs, updates_per_second = [], {}
    for line in log.read_text().splitlines():
        m = re.search(r"\| (train|valid) \| (\{.*\})$", line)
        if not m:
            continue
        rec = json.loads(m.group(2))
        epoch = int(rec["epoch"])
        if m.group(1) == "train":  # its train_wall is in whole seconds: use the rate
            updates_per_second[epoch] = float(rec["train_ups"])
        else:
            epochs.append({"epoch": epoch, "valid_loss": float(rec["valid_loss"]) * math.log(2),
                           "updates": int(rec["valid_num_updates"])})
    for e, before in zip(epochs, [0] + [e["updates"] for e in epochs], strict=False):
        e["train_seconds"] = (e["updates"] - before) / updates_per_second[e["epoch"]]
    return epochs


def parse_generate(log: Path) -> tuple[list[str], float]:
    hyps, seconds = {}, math.nan
    for line in log.read_text().splitlines():
        if line.startswith("H-"):
            sid, _, text = line.split("\t")
            hyps[int(sid[2:])] = join_subwords(text)
        m = re.search(r"Translated [\d,]+ sentences .* in ([\d.]+)s", line)
        if m:
            seconds = float(m.group(1))
    return [hyps[i] for i in range(len(hyps))], seconds


def run_harness(model: str, seed: int, epochs: int | None, work: Path) -> dict[str, Any]:
    settings = experiment_settings(model, seed, epochs)
    decode = settings.pop("decode")
    data = PARITY.data
    out = work / "harness" / model / f"seed{seed}"
    py = [sys.executable, "-m", "nmtbench"]
    if not (out / "train_summary.json").exists():
        shutil.rmtree(out, ignore_errors=True)
        run([*py, "train", "--run-dir", str(out), "--config", json.dumps(settings),
             *[a for split in ("train", "valid") for side in ("src", "tgt")
               for a in (f"--{split}-{side}", str(data / "prepared" / f"{split}.{side}"))],
             "--src-tokenizer", str(data / "tokenizer" / "src"),
             "--tgt-tokenizer", str(data / "tokenizer" / "tgt"), "--device", "cpu",
             "--threads", "1"],  # its log beside the run directory, which holds a run's alone
            work / "logs" / f"harness.{model}.seed{seed}.train.log")
    search = [a for k in ("beam", "lenpen", "length_beam", "iterations")
              for a in (f"--{k.replace('_', '-')}", str(getattr(decode, k)))]
    run([*py, "decode", "--run-dir", str(out), "--src", str(data / "prepared" / "test.src"),
         "--out", str(out / "hyp.test.txt"), "--info", str(out / "decode.json"), *search,
         "--device", "cpu", "--threads", "1"], out / "decode.log")
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    valid = [r for r in log if r.get("event") == "valid"]
    seconds = [r["seconds"] for r in valid]
    epochs_log = [{"epoch": r["epoch"], "valid_loss": r["valid_loss"], "updates": r["step"],
                   "train_seconds": s - p} for r, s, p in zip(valid, seconds, [0.0] + seconds,
                                                               strict=False)]
    info = json.loads((out / "decode.json").read_text())
    return {"system": "harness", "model": model, "seed": seed, "epochs": epochs_log,
            "updates": epochs_log[-1]["updates"],
            "train_seconds": sum(e["train_seconds"] for e in epochs_log),
            "decode_seconds": info["seconds"],
            "sentences": len(read_lines(out / "hyp.test.txt")),
            "bleu": score(out / "hyp.test.txt", data / "prepared" / "test.tgt")}


def environment(fairseq_bin: Path | None, bin_dir: Path) -> dict[str, Any]:
    """Versions, hardware, and (with fairseq) the batching and equivalence checks."""
    import torch

    from nmtbench.devices import cpu_model
    from nmtbench.provenance import git_commit

    def output(cmd: list[str]) -> str:
        return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                              env={**os.environ, **FAIRSEQ_ENV}).stdout.strip()

    setup = {"torch": torch.__version__, "hardware": f"{cpu_model()} ({os.cpu_count()} cores)",
             "commit": git_commit(ROOT), "fairseq": "not run"}
    if fairseq_bin:
        python = str(fairseq_bin / "python")
        setup["fairseq"] = output([python, "-c", "import fairseq; print(fairseq.__version__)"])
        here = Path(__file__).parent
        setup["batching"] = json.loads(output([python, str(here / "check_batching.py")]))
        settings = experiment_settings("transformer", 1, None)
        flags = fairseq_train_args({**settings, "dropout": 0.0}, ARCHS["transformer"])
        setup["equivalence"] = json.loads(output([python, str(here / "check_equivalence.py"),
                                                  str(bin_dir), "60", *flags]))
    return setup


def search_check(fairseq_bin: Path, bin_dir: Path, work: Path, seed: int) -> dict[str, Any]:
    """`check_search.py` on fairseq's trained Transformer of `seed`: the harness's beam search
    against fairseq's, on the same weights and test set."""
    decode = experiment_settings("transformer", seed, None)["decode"]
    cmd = [str(fairseq_bin / "python"), str(Path(__file__).parent / "check_search.py"),
           str(bin_dir), str(work / "fairseq" / "transformer" / f"seed{seed}" / "ckpt" /
                             "checkpoint_best.pt"),
           *(str(getattr(decode, k)) for k in ("beam", "lenpen", "max_len_a", "max_len_b"))]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=True,
                         env={**os.environ, **ONE_THREAD, **FAIRSEQ_ENV}).stdout
    return {"seed": seed, **json.loads(out.strip().splitlines()[-1])}


# --- report --------------------------------------------------------------------------------
def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    bleu = [r["bleu"]["tokenized"] for r in runs]
    return {"bleu_mean": statistics.mean(bleu),
            "bleu_std": statistics.stdev(bleu) if len(bleu) > 1 else 0.0,
            "updates": statistics.mean(r["updates"] for r in runs),
            "seconds_per_epoch": statistics.mean(r["train_seconds"] / len(r["epochs"])
                                                 for r in runs),
            "sentences_per_second": statistics.mean(r["sentences"] / r["decode_seconds"]
                                                    for r in runs)}


def verdict(model: str, runs: dict[str, list[dict[str, Any]]], ours: dict[str, Any],
            theirs: dict[str, Any]) -> list[str]:
    """The parity criteria (docs/parity.md), computed from the runs."""
    gap = ours["bleu_mean"] - theirs["bleu_mean"]
    if model == "cmlm":
        return [f"Mean test BLEU {gap:+.2f} against fairseq's: "
                f"{'at least level' if gap >= 0 else 'behind'}."]
    loss = {s: statistics.mean(r["epochs"][-1]["valid_loss"] for r in runs[s]) for s in runs}
    loss_gap = loss["harness"] / loss["fairseq"] - 1
    lower = -gap > max(ours["bleu_std"], theirs["bleu_std"])
    return [f"Mean test BLEU {gap:+.2f} against fairseq's "
            f"({'within' if abs(gap) <= 1 else 'not within'} 1.0; "
            f"{'lower' if lower else 'not lower'} by more than one standard deviation of either). "
            f"Mean valid loss after the last epoch, at equal updates: {loss_gap:+.1%} "
            f"({'within' if abs(loss_gap) <= 0.02 else 'not within'} 2%)."]


def report(results: list[dict[str, Any]], models: list[str], epochs: dict[str, int],
           setup: dict[str, Any]) -> str:
    command = "python benchmarks/parity/run.py" + (
        "" if setup["dataset"] == "toy" else f" --dataset {setup['dataset']}")
    lines = [f"# Parity with fairseq on {PARITY.dataset}", "",
             f"Generated by `{command}` (see its docstring for the setup); do not edit.", "",
             f"One CPU thread per job, {setup['jobs']} jobs "
             f"at a time on {setup['hardware']}; the harness at commit {setup['commit']} "
             f"(torch {setup['torch']}), fairseq {setup['fairseq']}. Test BLEU is tokenized BLEU"
             f"{' of lowercased text' if setup['lowercase'] else ''} "
             "(`nmtbench score`, as multi-bleu.perl) of the best checkpoint by valid loss; valid "
             "loss is label-smoothed, in nats per target token. Both systems use the harness's "
             "vocabularies.", ""]
    if setup.get("batching"):
        b = setup["batching"]
        lines += ["Batching: `nmtbench.parts.batches.token_batches` and fairseq's "
                  f"`batch_by_size` made different batches in {b['mismatches']} of {b['cases']} "
                  "random cases (`check_batching.py`).", ""]
    if setup.get("equivalence"):
        e = setup["equivalence"]
        lines += ["Equivalence (`check_equivalence.py`): the harness's Transformer built in "
                  "fairseq's layout (decoder starting from EOS, positions from 2) with fairseq's "
                  f"weights, both trained without dropout on fairseq's batches for {e['updates']} "
                  f"updates: training losses {e['first_loss'][0]:.4f} / {e['first_loss'][1]:.4f} "
                  f"(fairseq / harness) at the first update, {e['last_loss'][0]:.4f} / "
                  f"{e['last_loss'][1]:.4f} at the last, never more than "
                  f"{e['max_abs_difference']:.4f} apart.", ""]
    if setup.get("search"):
        c = setup["search"]
        lines += ["Search (`check_search.py`): fairseq's Transformer of seed "
                  f"{c['seed']}, its weights copied into the harness's, translated the test set "
                  f"by both beam searches: {c['identical']} of {c['sentences']} translations "
                  f"identical token for token ({c['tokens_fairseq']} / {c['tokens_harness']} "
                  "tokens, fairseq / harness). Where the runs' BLEU differ, their weights do.",
                  ""]
    for model in models:
        runs = {s: [r for r in results if r["model"] == model and r["system"] == s]
                for s in ("harness", "fairseq")}
        if not all(runs.values()):
            continue
        ours, theirs = summary(runs["harness"]), summary(runs["fairseq"])
        lines += [f"## {model} ({PARITY.experiments[model]} against fairseq `{ARCHS[model]}`, "
                  f"{epochs[model]} epochs, {len(runs['harness'])} seeds)", "",
                  *verdict(model, runs, ours, theirs), "",
                  "| | harness | fairseq | harness - fairseq |", "|---|---|---|---|"]
        for r_h, r_f in zip(runs["harness"], runs["fairseq"], strict=True):
            h, f = r_h["bleu"]["tokenized"], r_f["bleu"]["tokenized"]
            lines.append(f"| test BLEU, seed {r_h['seed']} | {h:.2f} | {f:.2f} | {h - f:+.2f} |")
        lines += [f"| test BLEU, mean ± sd | {ours['bleu_mean']:.2f} ± {ours['bleu_std']:.2f} | "
                  f"{theirs['bleu_mean']:.2f} ± {theirs['bleu_std']:.2f} | "
                  f"{ours['bleu_mean'] - theirs['bleu_mean']:+.2f} |",
                  f"| updates | {ours['updates']:.0f} | {theirs['updates']:.0f} | |",
                  f"| training seconds per epoch | {ours['seconds_per_epoch']:.2f} | "
                  f"{theirs['seconds_per_epoch']:.2f} | |",
                  f"| decoding sentences/s | {ours['sentences_per_second']:.0f} | "
                  f"{theirs['sentences_per_second']:.0f} | |", "",
                  "Valid loss per epoch (mean over seeds; updates so far in brackets):" + (
                      "" if model == "transformer" else
                      " each system's own objective, so only BLEU compares (fairseq's nat_loss "
                      "averages the length loss per sentence and smooths over the mean of the "
                      "vocabulary; its translation_lev task also puts <s> before both sides, "
                      "hence longer examples and more, smaller batches)."), "",
                  "| epoch | harness | fairseq | relative difference |", "|---|---|---|---|"]
        for i in range(max(len(r["epochs"]) for r in runs["harness"])):
            h = [r["epochs"][i] for r in runs["harness"] if i < len(r["epochs"])]
            f = [r["epochs"][i] for r in runs["fairseq"] if i < len(r["epochs"])]
            if not h or not f:
                continue
            hl, fl = (statistics.mean(e["valid_loss"] for e in x) for x in (h, f))
            hu, fu = (statistics.mean(e["updates"] for e in x) for x in (h, f))
            lines.append(f"| {i + 1} | {hl:.3f} ({hu:.0f}) | {fl:.3f} ({fu:.0f}) | "
                         f"{(hl - fl) / fl:+.1%} |")
        lines.append("")
    return "\n".join(lines + recorded_settings.markdown(setup["settings"], setup["changed"]))


def main() -> None:
    global PARITY
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", choices=list(DATASETS), default="toy",
                   help="the toy world (config/config.yaml) or Multi30k (config/multi30k.yaml)")
    p.add_argument("--configfile", type=Path, nargs="+", default=[],
                   help="more config files for Snakemake when it prepares the data (a mirror)")
    p.add_argument("--seeds", type=int, nargs="+",
                   help="the Transformer's seeds (default: the dataset's, DATASETS)")
    p.add_argument("--cmlm-seeds", type=int, nargs="+", default=[1, 2, 3],
                   help="the CMLM's seeds (its 60 epochs cost five times the Transformer's 12)")
    p.add_argument("--models", nargs="+", choices=list(ARCHS),
                   help="default: every model the dataset compares")
    p.add_argument("--cmlm-epochs", type=int, default=60,
                   help="the CMLM's budget (the default's 12 epochs are too few for it to learn)")
    p.add_argument("--systems", nargs="+", choices=["harness", "fairseq"],
                   default=["harness", "fairseq"])
    p.add_argument("--fairseq-bin", type=Path, default=ROOT / ".venv-fairseq" / "bin")
    p.add_argument("--work", type=Path,
                   help="runs and logs, kept so a rerun skips finished training (default: "
                   "results/parity, or results/parity-<dataset> beside the toy world's)")
    p.add_argument("--out", type=Path, help="the report (default: the dataset's, DATASETS)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                   help="override a training setting for both systems (controlled experiments)")
    args = p.parse_args()
    PARITY = DATASETS[args.dataset]
    CONFIGFILES.extend(args.configfile)
    models = args.models or list(PARITY.experiments)
    unknown = [m for m in models if m not in PARITY.experiments]
    if unknown:
        raise SystemExit(f"--models: {unknown[0]} is not compared on {args.dataset} (only "
                         f"{', '.join(PARITY.experiments)})")
    work = args.work or ROOT / Path(PARITY.out).with_suffix("")
    out = args.out or ROOT / PARITY.out
    for item in args.set:
        key, _, value = item.partition("=")
        OVERRIDES[key] = json.loads(value)
    if "fairseq" in args.systems and not (args.fairseq_bin / "fairseq-train").exists():
        raise SystemExit(f"no fairseq-train in {args.fairseq_bin}: build the reference "
                         "environment with benchmarks/parity/setup_fairseq.sh")
    bin_dir = prepare(work, args.fairseq_bin if "fairseq" in args.systems else None)
    setup = environment(args.fairseq_bin if "fairseq" in args.systems else None, bin_dir)
    setup["jobs"], setup["dataset"] = args.jobs, args.dataset
    setup["lowercase"] = profile()["datasets"][PARITY.dataset]["lowercase"]
    epochs = {"transformer": None, "cmlm": args.cmlm_epochs}
    setup["settings"] = recorded_settings.resolve(
        list(PARITY.configs), [(PARITY.dataset, PARITY.experiments[m]) for m in models])
    changed = [f"{PARITY.experiments[m]} trained {epochs[m]} epochs" for m in models
               if epochs[m]]
    changed += [f"{key} set to {value!r} for both systems (--set)"
                for key, value in OVERRIDES.items()]
    setup["changed"] = f"On top of them: {'; '.join(changed)}." if changed else ""
    seeds = {"transformer": args.seeds or PARITY.seeds, "cmlm": args.cmlm_seeds}
    jobs = [(s, m, seed) for m in models for seed in seeds[m] for s in args.systems]

    def one(job: tuple[str, str, int]) -> dict[str, Any]:
        system, model, seed = job
        print(f"{system} {model} seed {seed} ...", flush=True)
        if system == "fairseq":
            return run_fairseq(model, seed, epochs[model], work, bin_dir, args.fairseq_bin)
        return run_harness(model, seed, epochs[model], work)

    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(one, jobs))
    write_json(work / "results.json", results)
    if "fairseq" in args.systems and "transformer" in models:
        setup["search"] = search_check(args.fairseq_bin, bin_dir, work, seeds["transformer"][0])
    budget = {m: epochs[m] or experiment_settings(m, 1, None)["max_epochs"] for m in models}
    out.write_text(report(results, models, budget, setup))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
