"""Training throughput and decoding latency at the papers' sizes, on the GPU the papers assume.

The models are AB-Net's Table 1 rows on WMT14 En-De, built from `config/paper.yaml` exactly as
`python -m nmtbench params` builds them (random weights, BERTs included: speed does not depend
on what the weights say). Nothing is downloaded and no data is read, so this runs on a bare
GPU machine in a few minutes:

    python benchmarks/gpu.py                      # writes results/gpu.md and results/gpu.json

- training: updates as the trainer makes them (`Updater.update` with the experiment's trainer
  settings and optimiser: collation, bf16 autocast, clipping, the divergence checks) on random
  pairs of 32 + 32 tokens: 128 pairs (4,096 target tokens, fairseq's `max_tokens` per GPU) and
  1,024 pairs (32,768: the papers' update on 8 GPUs, as one batch on one); target tokens/s and
  model FLOPs utilisation, the
  FLOPs of one update counted by PyTorch's FlopCounterMode (every matrix product and attention,
  the frozen BERTs' forward passes included), divided by the card's dense bf16 peak and, beside
  it, by the bf16 matrix-product rate measured in the same run;
- decoding: batch-1 latency (median and 90th percentile over 40 sentences after 5 warm-ups,
  the models alternating sentence by sentence, as `nmtbench.evaluation.latency` does) and
  sentences/s at batch 64. Random weights would decode to arbitrary lengths, so the work is fixed:
  sources of 30 tokens, beam 5 emitting exactly 30 tokens; mask-predict with its 4 length
  candidates at 29-32 tokens, every one running all 10 iterations (fresh noise on the scores keeps
  its early stop from firing: an upper bound, since trained models often stop sooner).

With `--fairseq [PYTHON]`, fairseq 0.12.2 (installed for PYTHON, default this one) runs the same
Transformer-base and -big updates and Transformer-base's beam search on the same batches and
sources (benchmarks/gpu_fairseq.py, in a child process); `--profile` writes torch.profiler's
table of one Transformer-base update at 32k tokens beside the results.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from nmtbench.evaluation.latency import per_item_ms, summarize
from nmtbench.evaluation.params import build_model
from nmtbench.fileio import write_json
from nmtbench.parts.batches import Bitext
from nmtbench.parts.beam_search import beam_search
from nmtbench.parts.contract import Model, adamw
from nmtbench.parts.mask_predict import mask_predict
from nmtbench.provenance import git_commit
from nmtbench.training.distributed import World
from nmtbench.training.update import Updater
from nmtbench.workflow import recorded_settings
from nmtbench.workflow.config import check, load_config
from nmtbench.workflow.train_settings import TrainConfig

ROOT = Path(__file__).resolve().parent.parent
DATASET = "wmt14-en-de"
TRAINED = ["transformer-base", "transformer-big", "abnet-mask-predict", "abnet"]
DECODED = ["transformer-base", "abnet-mask-predict", "abnet-bert-fused-nat", "abnet",
           "abnet-enc-nat"]
BATCHES, SRC_LEN, TGT_LEN = (128, 1024), 32, 32  # training batches (pairs)
SOURCE, OUTPUT = 30, 30  # decoding workload (tokens)
BEAM, LENGTHS, ITERATIONS, BATCH = 5, 4, 10, 64
WARMUP, SENTENCES = 5, 40
FAIRSEQ_TRAINED = ["transformer-base", "transformer-big"]
FAIRSEQ_SITE = ROOT / "benchmarks" / "parity" / "fairseq_site"  # its run-time fixes
# dense bf16 tensor-core peak of the SXM parts (NVIDIA's data sheets)
PEAK_BF16 = {"H100": 989.4e12, "H200": 989.4e12, "A100": 312e12}


def commit() -> str:
    """The code's commit: NMTBENCH_COMMIT where it is set (the device machine's copy of the
    working tree carries the .git of the session's start, not of the code it runs), else
    HEAD, +dirty where the tree differs from it (`provenance.git_commit`)."""
    return os.environ.get("NMTBENCH_COMMIT") or git_commit(ROOT)


def driver_version() -> str:
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True)
    except OSError:
        return "none"
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() \
        else "none"


def free_memory(device: torch.device) -> None:
    """Let the next model have the memory, and its own peak be measured."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def spec_peak(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for part, peak in PEAK_BF16.items() if part in name), None)


def matmul_rate(device: torch.device, n: int) -> float:
    """FLOP/s of an n x n x n bf16 matrix product (mean of 10 after 3 warm-ups)."""
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    sync(device)
    start = time.perf_counter()
    for _ in range(10):
        a @ b
    sync(device)
    return 10 * 2 * n ** 3 / (time.perf_counter() - start)


def random_ids(model: Model, side: str, rows: int, length: int, gen: torch.Generator
               ) -> torch.Tensor:
    vocab = model.src_vocab if side == "src" else model.tgt_vocab
    first = max(vocab.pad, vocab.bos, vocab.eos, vocab.unk, vocab.mask) + 1
    return torch.randint(first, vocab.size, (rows, length), generator=gen)


def sources(model: Model, rows: int, length: int, gen: torch.Generator) -> torch.Tensor:
    """Source rows as the model reads them: x [SEP], or [CLS] x [SEP] for a BERT encoder."""
    v = model.src_vocab
    ids = random_ids(model, "src", rows, length, gen)
    ids[:, -1] = v.eos
    if model.source_bos:
        ids[:, 0] = v.bos
    return ids


def training_data(model: Model, pairs: int, gen: torch.Generator) -> Bitext:
    """`pairs` random pairs of SRC_LEN source and TGT_LEN target tokens (y [SEP] after the
    decoder's [CLS]), as the trainer's corpus holds them."""
    y = random_ids(model, "tgt", pairs, TGT_LEN - 1, gen).tolist()
    v = model.tgt_vocab
    return Bitext(sources(model, pairs, SRC_LEN, gen).tolist(),
                  [[v.bos, *row, v.eos] for row in y], model.src_vocab.pad, v.pad,
                  list(range(pairs)), pairs)


def trainer_for(model: Model, tc: TrainConfig, device: torch.device, compiled: bool
                ) -> Updater:
    """The trainer's update path for `model` (compiled in place when asked, on a GPU, as
    `nmtbench train` compiles it)."""
    model.to(device)
    if compiled and device.type == "cuda" and not model.compiled:
        model.compile_for_training()
    groups = model.param_groups()
    optimizer = adamw(groups, tc.weight_decay, lr=tc.lr, betas=tc.adam_betas, eps=tc.adam_eps)
    return Updater(model, None, groups, optimizer, World(), device, tc, total_updates=10_000)


def measure_training(tc: TrainConfig, model: Model, device: torch.device, steps: int,
                     pairs: int, compiled: bool = True, profile: Path | None = None) -> dict:
    """Updates as the trainer makes them (`Updater.update` with the experiment's settings and
    optimiser), every one over the same `pairs` pairs; the first, eager, counts the FLOPs, two
    more warm up (and compile)."""
    updater = trainer_for(model, tc, device, compiled)
    data = training_data(model, pairs, torch.Generator().manual_seed(0))
    group = [list(range(pairs))]
    step = 0

    def update() -> None:
        nonlocal step
        updater.update(group, data, step)
        step += 1

    with torch.compiler.set_stance("force_eager"), FlopCounterMode(display=False) as counter:
        update()
    flops = counter.get_total_flops()
    start = time.perf_counter()
    for _ in range(2):
        update()
    sync(device)
    warmup = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(steps):
        update()
    sync(device)
    seconds = (time.perf_counter() - start) / steps
    memory = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
    if profile is not None:
        write_profile(update, device, profile)
    tokens = data.target_tokens(group[0])
    return {"params": model.num_params(), "compiled": model.compiled,
            "target_tokens": tokens, "ms_per_update": seconds * 1000,
            "target_tokens_per_s": tokens / seconds, "flops_per_update": flops,
            "achieved_flops": flops / seconds, "peak_memory_gb": memory / 1e9,
            "warmup_s": warmup}


def loss_curve(model: Model, tc: TrainConfig, device: torch.device, compiled: bool,
               updates: int, pairs: int = 128) -> list[float]:
    """Training losses of `updates` updates on a learnable made-up task (the target is the
    source read backwards, its ids shifted), seed 0: eager and compiled runs should agree
    within the noise of their different dropout masks."""
    torch.manual_seed(0)
    tc = replace(tc, lr=5e-4, warmup_updates=max(1, updates // 4), warmup_init_lr=1e-7)
    updater = trainer_for(model, tc, device, compiled)
    gen = torch.Generator().manual_seed(0)
    v, first = model.tgt_vocab, 8
    batches = []
    for _ in range(8):
        data = training_data(model, pairs, gen)
        data.tgt = [[v.bos, *[first + (t * 7) % (v.size - first) for t in reversed(src[:-1])],
                     v.eos] for src in data.src]
        batches.append(data)
    return [updater.update([list(range(pairs))], batches[step % 8], step)["loss"]
            for step in range(updates)]


def write_profile(update, device: torch.device, path: Path) -> None:
    """torch.profiler's table of 3 updates: the kernels by device time, then by host time."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda"
                                           else [])
    with profile(activities=activities) as prof:
        for _ in range(3):
            update()
        sync(device)
    events = prof.key_averages()
    by_device = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    path.write_text(events.table(sort_by=by_device, row_limit=60) + "\n\n"
                    + events.table(sort_by="cpu_time_total", row_limit=30))


def fairseq_workload(models: dict[str, Model], device: torch.device, pairs_list: list[int],
                     steps: int, sentences: int, batches: int) -> dict:
    """What gpu_fairseq.py runs: the same pairs, sources and sizes as this script's."""
    training = []
    for name, pairs in ((n, p) for n in FAIRSEQ_TRAINED for p in pairs_list if n in models):
        model = models[name]
        data = training_data(model, pairs, torch.Generator().manual_seed(0))
        training.append({"experiment": name, "src": data.src,
                         "tgt": [row[1:-1] for row in data.tgt],
                         "model": {"size": model.settings.size,
                                   "dropout": model.settings.dropout}})
    base = models.get("transformer-base")
    any_model = next(iter(models.values()))
    spec = {"training": training, "steps": steps,
            "precisions": ["fp16", "amp"] if device.type == "cuda" else ["fp32"],
            "src_vocab": any_model.src_vocab.size, "tgt_vocab": any_model.tgt_vocab.size}
    if base is not None:
        spec.update(decode_model={"size": base.settings.size, "dropout": base.settings.dropout},
                    decode_sources=[s.tolist() for s in decoding_sources(base, sentences)],
                    decode_batch=batch_sources(base).tolist(), warmup=WARMUP, output=OUTPUT,
                    beam=BEAM, batches=batches)
    return spec


def run_fairseq(python: str, workload: dict) -> dict:
    """gpu_fairseq.py in a child process, with fairseq's run-time fixes on its path."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as spec:
        json.dump(workload, spec)
        spec.flush()
        path = os.pathsep.join(filter(None, [str(FAIRSEQ_SITE), os.environ.get("PYTHONPATH")]))
        done = subprocess.run([python, str(ROOT / "benchmarks" / "gpu_fairseq.py"), "--spec",
                               spec.name], env={**os.environ, "PYTHONPATH": path},
                              capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"fairseq's benchmark failed ({done.returncode}):\n"
                         + "\n".join(done.stderr.splitlines()[-20:]))
    return json.loads(done.stdout.strip().splitlines()[-1])


class FixedWork(torch.nn.Module):
    """A model whose random weights are made to do a fixed amount of decoding work: beam
    search never ends before OUTPUT tokens (EOS blocked until then, `max_len` stops it there);
    mask-predict proposes the lengths OUTPUT-1 .. OUTPUT+2 and, with noise on its scores,
    changes tokens every iteration, so it never stops early. Counts the model calls."""

    def __init__(self, model: Model):
        super().__init__()
        self.model = model
        self.calls = 0
        self.steps = 0

    def encode(self, src):
        self.steps = 0
        state = self.model.encode(src)
        if self.model.decoding == "nat":
            lengths = torch.full_like(state["length_lprobs"], -1e4)
            lengths[:, OUTPUT - 1: OUTPUT - 1 + LENGTHS] = 0.0
            state = {**state, "length_lprobs": lengths}
        return state

    def decode_step(self, tokens, state):
        self.calls += 1
        lprobs = self.model.decode_step(tokens, state).float()
        if self.steps < OUTPUT:
            lprobs[:, self.model.tgt_vocab.eos] = float("-inf")
        self.steps += 1
        return lprobs

    def predict(self, tokens, state, positions=None):
        self.calls += 1
        lprobs = self.model.predict(tokens, state, positions).float()
        noise = -torch.log(-torch.log(torch.rand_like(lprobs).clamp_min(1e-9)))
        return torch.log_softmax(lprobs + noise, dim=-1)

    def reorder_state(self, state, index):
        return self.model.reorder_state(state, index)


def decoder(model: Model, device: torch.device):
    fixed = FixedWork(model.to(device).eval()).eval()
    v = model.tgt_vocab

    def decode(src: torch.Tensor) -> list[list[int]]:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
            if model.decoding == "at":
                return beam_search(fixed, src.to(device), beam=BEAM, vocab=v, max_len_a=0,
                                   max_len_b=OUTPUT)
            return mask_predict(fixed, src.to(device), length_beam=LENGTHS,
                                iterations=ITERATIONS, vocab=v)
    return fixed, decode


def decoding_sources(model: Model, sentences: int = SENTENCES) -> list[torch.Tensor]:
    """The batch-1 sources: sentence i is the same for every model of a vocabulary."""
    return [sources(model, 1, SOURCE, torch.Generator().manual_seed(i))
            for i in range(WARMUP + sentences)]


def batch_sources(model: Model) -> torch.Tensor:
    return sources(model, BATCH, SOURCE, torch.Generator().manual_seed(1))


def measure_decoding(models: dict[str, Model], device: torch.device, sentences: int,
                     batches: int) -> dict:
    names = list(models)
    decoders = {name: decoder(models[name], device) for name in names}
    items = range(WARMUP + sentences)  # sentence i: each model's own i-th source
    srcs = {name: decoding_sources(models[name], sentences) for name in names}
    times = per_item_ms([lambda i, n=n: decoders[n][1](srcs[n][i]) for n in names], items,
                        WARMUP, sync=lambda: sync(device))
    out = {}
    for name, ms in zip(names, times, strict=True):
        fixed, decode = decoders[name]
        calls_per_sentence = fixed.calls / len(items)
        big = batch_sources(models[name])
        decode(big)  # warm-up at this batch size
        sync(device)
        start = time.perf_counter()
        for _ in range(batches):
            lengths = {len(h) for h in decode(big)}
        sync(device)
        per_s = batches * BATCH / (time.perf_counter() - start)
        out[name] = {"decoding": models[name].decoding, **summarize(ms),
                     "model_calls_per_sentence": calls_per_sentence,
                     "sentences_per_s_batch64": per_s, "output_lengths": sorted(lengths)}
        models[name].to("cpu")
    return out


def markdown(result: dict) -> str:
    meta = result["meta"]
    lines = [
        "# GPU benchmarks: the papers' sizes",
        "",
        f"`{meta['command']}` at commit {meta['commit']} on {meta['device']} "
        f"({meta['host_cpu']}; driver {meta['driver']}); torch {meta['torch']}, "
        f"CUDA {meta['cuda']}; {meta['date']}. "
        "Models: AB-Net's Table 1 rows on WMT14 En-De as `config/paper.yaml` builds them, "
        "random weights (see the script's docstring for the fixed workload).",
        "",
        "## Training (bf16 autocast, pairs of 32 + 32 tokens)",
        "",
        "Compiled: the model's own layers and its loss through torch.compile, as `nmtbench "
        "train` runs them on a GPU with the config's `compile: true`; eager: without.",
        "",
        "| experiment | compiled | parameters (trained) | target tokens/update | ms/update | "
        "target tokens/s | TFLOP/update | TFLOP/s | MFU vs spec peak | "
        "MFU vs measured matmul | peak memory (GB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    spec, measured = meta["spec_peak_flops"], meta["matmul_flops"]
    for r in result["training"]:
        achieved = r["achieved_flops"]
        mfu = f"{100 * achieved / spec:.1f}%" if spec else "-"
        lines.append(
            f"| {r['experiment']} | {'yes' if r['compiled'] else 'eager'} | "
            f"{r['params']['total'] / 1e6:.1f}M "
            f"({r['params']['trained'] / 1e6:.1f}M) | {r['target_tokens']:,} | "
            f"{r['ms_per_update']:.1f} | {r['target_tokens_per_s']:,.0f} | "
            f"{r['flops_per_update'] / 1e12:.3f} | {achieved / 1e12:.1f} | {mfu} | "
            f"{100 * achieved / measured:.1f}% | {r['peak_memory_gb']:.1f} |")
    peak = f"{spec / 1e12:.1f} TFLOP/s" if spec else "unknown for this device"
    side = meta["matmul_side"]
    lines += ["", f"Spec dense bf16 peak: {peak}; measured {side}^3 bf16 matrix product in this "
              f"run: {measured / 1e12:.1f} TFLOP/s.", "",
              f"## Decoding ({SOURCE}-token sources, {OUTPUT}-token outputs)", "",
              "| experiment | decoding | batch-1 latency ms (median) | p90 | model calls per "
              "sentence | sentences/s at batch 64 | speedup vs transformer-base (batch 1) |",
              "|---|---|---|---|---|---|---|"]
    base = result["decoding"].get("transformer-base", {}).get("median")
    for name, r in result["decoding"].items():
        speedup = f"{base / r['median']:.2f}x" if base else "-"
        search = (f"beam {BEAM}" if r["decoding"] == "at"
                  else f"mask-predict {LENGTHS}x{ITERATIONS}")
        lines.append(f"| {name} | {search} | {r['median']:.1f} | {r['p90']:.1f} | "
                     f"{r['model_calls_per_sentence']:.1f} | {r['sentences_per_s_batch64']:.1f}"
                     f" | {speedup} |")
    lines += ["", "The papers' latencies (AB-Net Table 1: Transformer-Base 778 ms, Mask-Predict "
              "161, BERT-fused NAT 260, AB-Net 327, AB-Net-Enc 165; 2.38x speedup for AB-Net) "
              "were measured on their own hardware with trained models; compare ratios, not "
              "milliseconds.", ""]
    if len(result.get("loss_curves", {})) == 2:
        lines += curve_markdown(result["loss_curves"])
    if "fairseq" in result:
        lines += fairseq_markdown(result)
    lines += recorded_settings.markdown(
        result["settings"], "The runs here use random weights, fixed batches and the compile "
        "mode each row names, whatever these settings say.")
    return "\n".join(lines)


def curve_markdown(curves: dict[str, list[float]]) -> list[str]:
    """Eager against compiled training losses, same seed and batches."""
    eager, compiled = curves["eager"], curves["compiled"]
    n = len(eager)
    lines = ["## Compiled against eager: the same training", "",
             f"Transformer-base, {n} updates of 4,096 target tokens on a learnable made-up task "
             "(`loss_curve`), seed 0, from the same weights: the training loss (label-smoothed, "
             "per target token) eager and compiled. Their dropout masks differ, so the curves "
             "agree within noise, not exactly.", "",
             "| update | eager | compiled | compiled - eager |", "|---|---|---|---|"]
    for step in sorted(s for s in {1, 2, 5, 10, n // 4, n // 2, 3 * n // 4, n} if 0 < s <= n):
        a, b = eager[step - 1], compiled[step - 1]
        lines.append(f"| {step} | {a:.4f} | {b:.4f} | {b - a:+.4f} |")
    tail = max(1, n // 10)
    mean_a, mean_b = sum(eager[-tail:]) / tail, sum(compiled[-tail:]) / tail
    return lines + ["", f"Mean of the last {tail} updates: eager {mean_a:.4f}, compiled "
                    f"{mean_b:.4f} ({100 * (mean_b - mean_a) / mean_a:+.2f}%).", ""]


def fairseq_markdown(result: dict) -> list[str]:
    """The fairseq section: its updates and decoding beside the harness's, same card, same run."""
    fq = result["fairseq"]
    ours = {(r["experiment"], r["target_tokens"]): r  # the compiled run where there is one
            for r in sorted(result["training"], key=lambda r: r["compiled"])}
    lines = [f"## fairseq {fq['fairseq']} on the same card, same batches", "",
             "`benchmarks/gpu_fairseq.py`: fairseq's `Trainer.train_step` (what `fairseq-train` "
             "runs per update) on the same pairs; `fp16` is fairseq's `--fp16` (fp16 weights, "
             "fp32 master copy, loss scaling), `amp` its `--amp` (fp16 autocast); the harness "
             "autocasts to bf16. fairseq 0.12.2 also keeps an unused copy of each encoder "
             "layer's weights (for PyTorch's fused inference kernel) among the trained "
             "parameters, which its Adam updates.", "",
             "| experiment | target tokens/update | fairseq precision | fairseq ms/update | "
             "fairseq target tokens/s | fairseq peak memory (GB) | harness target tokens/s | "
             "harness / fairseq |",
             "|---|---|---|---|---|---|---|---|"]
    for r in fq["training"]:
        mine = ours.get((r["experiment"], r["target_tokens"]))
        ratio = (f"{mine['target_tokens_per_s'] / r['target_tokens_per_s']:.2f}x" if mine
                 else "-")
        harness = (f"{mine['target_tokens_per_s']:,.0f} "
                   f"({'compiled' if mine['compiled'] else 'eager'})" if mine else "-")
        lines.append(f"| {r['experiment']} | {r['target_tokens']:,} | {r['precision']} | "
                     f"{r['ms_per_update']:.1f} | {r['target_tokens_per_s']:,.0f} | "
                     f"{r['peak_memory_gb']:.1f} | {harness} | {ratio} |")
    theirs = fq["decoding"].get("transformer-base")
    ours_base = result["decoding"].get("transformer-base")
    if theirs and ours_base:
        lines += ["", f"Transformer-base, beam {BEAM}, fairseq's `SequenceGenerator` in fp16: "
                  f"batch-1 latency {theirs['median']:.1f} ms (p90 {theirs['p90']:.1f}), "
                  f"{theirs['sentences_per_s_batch64']:.1f} sentences/s at batch 64; the "
                  f"harness: {ours_base['median']:.1f} ms, "
                  f"{ours_base['sentences_per_s_batch64']:.1f} sentences/s.", "",
                  "| experiment | batch-1 latency ms | speedup vs the harness's Transformer-base"
                  " | speedup vs fairseq's Transformer-base |", "|---|---|---|---|"]
        for name, r in result["decoding"].items():
            lines.append(f"| {name} | {r['median']:.1f} | "
                         f"{ours_base['median'] / r['median']:.2f}x | "
                         f"{theirs['median'] / r['median']:.2f}x |")
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "results" / "gpu"),
                        help="writes OUT.md and OUT.json")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=10,
                        help="timed updates per model and batch (0: no training)")
    parser.add_argument("--sentences", type=int, default=SENTENCES,
                        help="batch-1 sentences timed per model")
    parser.add_argument("--batches", type=int, default=3, help="timed batches of 64")
    parser.add_argument("--matmul", type=int, default=8192, help="side of the reference product")
    parser.add_argument("--only", nargs="*", help="experiments to run (default: all)")
    parser.add_argument("--pairs", nargs="+", type=int, default=list(BATCHES),
                        help="training batch sizes in pairs (smaller for a check on CPU)")
    parser.add_argument("--fairseq", nargs="?", const=sys.executable, metavar="PYTHON",
                        help="also run fairseq 0.12.2, installed for PYTHON (default: this one)")
    parser.add_argument("--both", action="store_true",
                        help="time Transformer-base and -big both compiled and eager (the "
                        "config's `compile` gives the others' mode)")
    parser.add_argument("--loss-curve", type=int, default=0, metavar="UPDATES",
                        help="Transformer-base's losses over UPDATES updates, eager and compiled")
    parser.add_argument("--profile", action="store_true",
                        help="write OUT-profile.txt: one Transformer-base update at 32k tokens")
    args = parser.parse_args()
    device = torch.device(args.device)

    config = load_config([ROOT / "config" / "config.yaml", ROOT / "config" / "paper.yaml"])
    plan = check(config, ROOT / "config" / "schema.yaml", ROOT / "papers")
    chosen = set(args.only or TRAINED + DECODED)
    torch.manual_seed(0)
    models = {name: build_model(plan, DATASET, name) for name in dict.fromkeys(TRAINED + DECODED)
              if name in chosen}
    meta = {"commit": commit(), "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
            "command": " ".join(["python", "benchmarks/gpu.py", *sys.argv[1:]]),
            "driver": driver_version(),
            "cuda": torch.version.cuda, "host_cpu": platform.processor() or platform.machine(),
            "device": (torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"),
            "spec_peak_flops": spec_peak(device), "matmul_side": args.matmul,
            "matmul_flops": matmul_rate(device, args.matmul)}
    result = {"meta": meta, "training": [], "decoding": {}, "loss_curves": {},
              "settings": recorded_settings.resolve(
                  ["config/config.yaml", "config/paper.yaml"],
                  [(DATASET, name) for name in models])}

    def save() -> None:  # after each part, so a run cut short keeps what it measured
        write_json(f"{args.out}.json", result)
        Path(f"{args.out}.md").write_text(markdown(result))

    training, curves = result["training"], result["loss_curves"]
    default = config.get("compile", False)  # as `nmtbench train` runs on a GPU
    for name in (n for n in TRAINED if n in models and args.steps):
        tc = TrainConfig.from_dict(plan.train_settings(DATASET, name, seed=1))
        for compiled in ([default, not default] if args.both and name in FAIRSEQ_TRAINED
                         else [default]):
            model = copy.deepcopy(models[name])  # trained here; decoding gets the untouched one
            for pairs in args.pairs:
                profile = (Path(f"{args.out}-profile.txt") if args.profile and compiled
                           and pairs == args.pairs[-1] and name == "transformer-base" else None)
                training.append({"experiment": name, **measure_training(
                    tc, model, device, args.steps, pairs, compiled, profile)})
                print(json.dumps(training[-1]), flush=True)
                free_memory(device)
            del model
            free_memory(device)
        if args.loss_curve and name == "transformer-base":
            for compiled in (False, True):
                curves["compiled" if compiled else "eager"] = loss_curve(
                    copy.deepcopy(models[name]), tc, device, compiled, args.loss_curve)
            print(json.dumps(curves), flush=True)
        save()
    if args.fairseq:  # before decoding: a run cut short keeps both sides of the training
        result["fairseq"] = run_fairseq(args.fairseq, fairseq_workload(
            models, device, args.pairs, args.steps, args.sentences, args.batches))
        save()
    decoding = result["decoding"] = measure_decoding(
        {n: models[n] for n in DECODED if n in models}, device, args.sentences, args.batches)
    print(json.dumps(decoding), flush=True)
    save()
    print(f"wrote {args.out}.md and .json; median latencies: "
          + ", ".join(f"{n} {r['median']:.1f} ms" for n, r in decoding.items()))


if __name__ == "__main__":
    main()
