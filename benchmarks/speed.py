"""Speed against what a user would otherwise run: Hugging Face and CTranslate2 on identical
weights, and mask-predict against beam search at equal size. Every pair is measured in this one
process on this machine, alternating, so the ratios hold on noisy shared CPUs.

    snakemake --cores all                 # the default's runs are what is measured
    python benchmarks/speed.py            # writes results/benchmarks.md and .json

- training: one epoch of our trainer (its own clock: updates only) against a plain PyTorch loop
  over the same batches, with the same loss, optimiser and schedule, on the FSMT model exported
  from the same initial weights (`nmtbench.export.fsmt`);
- decoding: beam 5 on the test set, batches of 64 sentences of similar length (sentences/s),
  and one sentence at a time (median latency), ours against `generate()` and CTranslate2
  (float32) on the trained Transformer's weights; the agreement of their outputs with ours is
  reported beside, as a check that the same model was timed;
- mask-predict (4 lengths, 10 iterations) against beam 5, both toy-sized, trained by the
  default.

fairseq is timed by benchmarks/parity/run.py in its own environment (results/parity.md), and the
GPU figures by benchmarks/gpu.py on a GPU (results/gpu.md); both are listed as not measured here.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch

from nmtbench.data.tokenization import encode_sources
from nmtbench.evaluation.translate import load_run_model
from nmtbench.export.fsmt import to_ctranslate2, to_fsmt
from nmtbench.fileio import read_lines, write_json
from nmtbench.parts.beam_search import beam_search
from nmtbench.parts.losses import label_smoothed_nll
from nmtbench.parts.mask_predict import mask_predict
from nmtbench.provenance import git_commit
from nmtbench.run_paths import RunPaths
from nmtbench.training.trainer import Trainer
from nmtbench.workflow import recorded_settings
from nmtbench.workflow.train_settings import inverse_sqrt_lr

BEAM, BATCH, LENGTHS, ITERATIONS = 5, 64, 4, 10
ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ["config/config.yaml"]  # the default, whose runs are measured
TARGETS = {  # the issue's targets: ours / peer, higher is better
    "training tokens/s vs Hugging Face": 1.3,
    "beam search, batch 64, vs HF generate()": 3.0,
    "beam search, batch 1, vs HF generate()": 3.0,
    "beam search, batch 64, vs CTranslate2": 0.5,
    "beam search, batch 1, vs CTranslate2": 0.5,
    "mask-predict vs beam search, batch 1": 2.0,
    "mask-predict vs beam search, batch 64": None,
}


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def padded(rows: list[list[int]], pad: int) -> torch.Tensor:
    out = torch.full((len(rows), max(map(len, rows))), pad, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, :len(row)] = torch.tensor(row)
    return out


def batches_by_length(rows: list[list[int]], size: int) -> list[list[list[int]]]:
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    return [[rows[i] for i in order[k:k + size]] for k in range(0, len(order), size)]


def cap(rows: list[list[int]]) -> int:
    """The longest output beam search allows any row (max_len_a 1.2, max_len_b 10)."""
    return max(int(1.2 * len(r) + 10) for r in rows)


# --- training ---------------------------------------------------------------------------------
def train_epoch_ours(cfg: dict, paths: RunPaths, work: Path) -> tuple[float, int]:
    trainer = Trainer(work / "ours", {**cfg, "max_epochs": 1, "valid_bleu": False}, paths,
                      device="cpu")
    summary = trainer.run()
    tokens = sum(trainer.train_data.target_tokens(b) for b in trainer._batches(cfg["seed"] + 1))
    return summary["seconds"], tokens


def train_epoch_hf(cfg: dict, paths: RunPaths, work: Path) -> tuple[float, int]:
    """The same epoch (batches, loss, Adam, schedule, clipping) on the FSMT model, a plain loop."""
    trainer = Trainer(work / "hf", {**cfg, "max_epochs": 1}, paths, device="cpu")
    hf = to_fsmt(trainer.model).train()  # the same initial weights
    tc, pad = trainer.tc, trainer.model.tgt_vocab.pad
    params = [p for p in hf.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=tc.lr, betas=tc.adam_betas, eps=tc.adam_eps)
    torch.manual_seed(tc.seed)
    batches = trainer._batches(tc.seed + 1)
    tokens = 0
    start = time.perf_counter()
    for step, indices in enumerate(batches):
        batch = trainer.train_data.collate(indices)
        for group in optimizer.param_groups:
            group["lr"] = inverse_sqrt_lr(step, tc)
        optimizer.zero_grad(set_to_none=True)
        logits = hf(input_ids=batch.src, attention_mask=batch.src.ne(pad),
                    decoder_input_ids=batch.tgt_in, use_cache=False).logits
        lprobs = torch.log_softmax(logits.float(), dim=-1).flatten(0, 1)
        loss, _ = label_smoothed_nll(lprobs, batch.tgt_out.flatten(), cfg.get(
            "label_smoothing", 0.1), pad)
        n = int(batch.tgt_out.ne(pad).sum())
        (loss / n).backward()
        torch.nn.utils.clip_grad_norm_(params, tc.clip_norm)
        optimizer.step()
        tokens += n
    return time.perf_counter() - start, tokens


# --- decoding ---------------------------------------------------------------------------------
def timed(fn, runs: list) -> tuple[float, list]:
    start = time.perf_counter()
    outputs = [fn(r) for r in runs]
    return time.perf_counter() - start, outputs


def decoders(model, hf, ct2, src_tok, tgt_tok):
    v = model.tgt_vocab
    src_tokens = {i: t for i, t in enumerate(src_tok.convert_ids_to_tokens(
        list(range(len(src_tok)))))}
    src_tokens[src_tok.pad_token_id] = "<blank>"
    tgt_ids = tgt_tok.convert_tokens_to_ids

    def ours(rows):
        return beam_search(model, padded(rows, v.pad), beam=BEAM, vocab=v)

    def hugging_face(rows):
        src = padded(rows, v.pad)
        with torch.inference_mode():
            out = hf.generate(input_ids=src, attention_mask=src.ne(v.pad), num_beams=BEAM,
                              early_stopping=True, length_penalty=1.0,
                              max_new_tokens=cap(rows) + 1, forced_eos_token_id=v.eos)
        return [[t for t in row[1:] if t not in (v.pad, v.eos)] for row in out.tolist()]

    def ctranslate(rows):
        results = ct2.translate_batch([[src_tokens[i] for i in r] for r in rows],
                                      beam_size=BEAM, max_batch_size=BATCH, length_penalty=1.0,
                                      max_decoding_length=cap(rows) + 1)
        return [tgt_ids(r.hypotheses[0]) for r in results]

    return {"ours": ours, "Hugging Face generate()": hugging_face, "CTranslate2": ctranslate}


def agreement(outputs: list[list[int]], reference: list[list[int]]) -> float:
    return sum(a == b for a, b in zip(outputs, reference, strict=True)) / len(reference)


def flat(batched: list[list[list[int]]]) -> list[list[int]]:
    return [row for batch in batched for row in batch]


def decode_speeds(fns: dict, rows: list[list[int]], single: int, repeats: int) -> dict:
    """Sentences/s over batches of BATCH and median batch-1 latency, runners alternating."""
    groups = batches_by_length(rows, BATCH)
    seconds = {name: [] for name in fns}
    outputs = {}
    for _ in range(repeats):
        for name, fn in fns.items():
            took, out = timed(fn, groups)
            seconds[name].append(took)
            outputs[name] = flat(out)
    latency = {name: [] for name in fns}
    for row in rows[:single]:
        for name, fn in fns.items():
            took, _ = timed(fn, [[row]])
            latency[name].append(took)
    first = next(iter(fns))
    return {name: {"sentences_per_s": len(rows) / statistics.median(seconds[name]),
                   "batch1_ms": 1000 * statistics.median(latency[name]),
                   "agreement": agreement(outputs[name], outputs[first])} for name in fns}


# --- report -----------------------------------------------------------------------------------
def ratios(train: dict, decode: dict, nat: dict) -> dict[str, float]:
    ours, hf, ct2 = decode["ours"], decode["Hugging Face generate()"], decode["CTranslate2"]
    return {
        "training tokens/s vs Hugging Face": train["ours"]["tokens_per_s"]
        / train["Hugging Face"]["tokens_per_s"],
        "beam search, batch 64, vs HF generate()": ours["sentences_per_s"] / hf["sentences_per_s"],
        "beam search, batch 1, vs HF generate()": hf["batch1_ms"] / ours["batch1_ms"],
        "beam search, batch 64, vs CTranslate2": ours["sentences_per_s"] / ct2["sentences_per_s"],
        "beam search, batch 1, vs CTranslate2": ct2["batch1_ms"] / ours["batch1_ms"],
        "mask-predict vs beam search, batch 1": nat["beam"]["batch1_ms"]
        / nat["mask-predict"]["batch1_ms"],
        "mask-predict vs beam search, batch 64": nat["mask-predict"]["sentences_per_s"]
        / nat["beam"]["sentences_per_s"],
    }


def markdown(result: dict) -> str:
    env = result["environment"]
    lines = ["# Speed benchmarks", "",
             f"`python benchmarks/speed.py` at commit {env['commit']} on {env['cpu']}, "
             f"{env['threads']} thread(s); "
             f"torch {env['torch']}, transformers {env['transformers']}, ctranslate2 "
             f"{env['ctranslate2']}; {env['date']}. Models: the default's toy-sized runs "
             f"({env['transformer_run']}, {env['mask_predict_run']}); "
             f"{env['sentences']} test sentences, batch-1 latency over the first "
             f"{env['single']}. Ratios are ours / peer (higher is better), each pair measured "
             "in one process, alternating.", "",
             "| comparison | ratio | target | met |", "|---|---|---|---|"]
    for name, value in result["ratios"].items():
        target = TARGETS[name]
        lines.append(f"| {name} | {value:.2f}x | "
                     + (f">= {target:g}x | {'yes' if value >= target else 'no'} |"
                        if target is not None else "- | - |"))
    lines += ["", "## Training (one epoch, same batches)", "",
              "| | seconds | target tokens/s |", "|---|---|---|"]
    for name, row in result["training"].items():
        lines.append(f"| {name} | {row['seconds']:.2f} | {row['tokens_per_s']:.0f} |")
    lines += ["", "## Decoding, beam 5 (the trained Transformer)", "",
              "| | sentences/s (batch 64) | batch-1 latency (ms, median) | same output as ours |",
              "|---|---|---|---|"]
    for name, row in result["decoding"].items():
        lines.append(f"| {name} | {row['sentences_per_s']:.1f} | {row['batch1_ms']:.1f} | "
                     f"{100 * row['agreement']:.1f}% |")
    lines += ["", "## Mask-predict against beam search (equal size)", "",
              "| | sentences/s (batch 64) | batch-1 latency (ms, median) |", "|---|---|---|"]
    for name, row in result["mask_predict"].items():
        lines.append(f"| {name} | {row['sentences_per_s']:.1f} | {row['batch1_ms']:.1f} |")
    lines += ["", "## Not measured here", "",
              *[f"- {item}" for item in result["not_measured"]], ""]
    return "\n".join(lines + recorded_settings.markdown(result["settings"]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transformer-run", default="results/runs/toy/transformer-tiny/seed1")
    p.add_argument("--mask-predict-run", default="results/runs/toy/deepfusion-cmlm/seed1")
    p.add_argument("--test-src", default="data/toy/prepared/test.src")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--sentences", type=int, default=500)
    p.add_argument("--single", type=int, default=100, help="sentences timed one at a time")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default="results/benchmarks")
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    import ctranslate2
    import transformers

    run = json.loads(Path(args.transformer_run, "config.json").read_text())
    cfg, paths = run["experiment"], RunPaths.from_record(
        run["paths"], str(Path(args.transformer_run, "config.json")))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        train = {}
        for name, fn in (("ours", train_epoch_ours), ("Hugging Face", train_epoch_hf)):
            seconds, tokens = fn(cfg, paths, work)
            train[name] = {"seconds": seconds, "tokens_per_s": tokens / seconds}

        model, src_tok, tgt_tok, _ = load_run_model(args.transformer_run, device="cpu")
        hf = to_fsmt(model).eval()
        to_ctranslate2(hf, src_tok, tgt_tok, work / "ct2")
        ct2 = ctranslate2.Translator(str(work / "ct2"), device="cpu", compute_type="float32",
                                     inter_threads=1, intra_threads=args.threads)
        lines = read_lines(args.test_src)[:args.sentences]
        rows = encode_sources(src_tok, lines, model.source_bos)
        decode = decode_speeds(decoders(model, hf, ct2, src_tok, tgt_tok), rows, args.single,
                               args.repeats)

    nat_model, nat_src_tok, _, _ = load_run_model(args.mask_predict_run, device="cpu")
    v = nat_model.tgt_vocab
    nat_rows = encode_sources(nat_src_tok, lines, nat_model.source_bos)

    def predict(rows):
        return mask_predict(nat_model, padded(rows, v.pad), length_beam=LENGTHS,
                            iterations=ITERATIONS, vocab=v)

    nat = decode_speeds({"mask-predict": predict, "beam": decoders(model, hf, None, src_tok,
                                                                   tgt_tok)["ours"]},
                        nat_rows, args.single, args.repeats)
    # two different models: their outputs are not expected to agree
    for row in nat.values():
        row.pop("agreement")
    result = {
        "environment": {"cpu": cpu_name(), "threads": args.threads, "commit": git_commit(ROOT),
                        "torch": torch.__version__,
                        "transformers": transformers.__version__,
                        "ctranslate2": ctranslate2.__version__,
                        "date": time.strftime("%Y-%m-%d"), "sentences": len(lines),
                        "single": args.single, "transformer_run": args.transformer_run,
                        "mask_predict_run": args.mask_predict_run},
        "training": train, "decoding": decode, "mask_predict": nat,
        "settings": recorded_settings.resolve(CONFIGS, recorded_settings.trained_in(
            CONFIGS, "toy", [args.transformer_run, args.mask_predict_run])),
        "not_measured": [
            "fairseq (training and decoding) here: it runs in its own environment "
            "(benchmarks/parity/setup_fairseq.sh); benchmarks/parity/run.py times both systems "
            "on identical data and writes training seconds per epoch and decoding sentences/s "
            "to results/parity.md",
            "GPU: tokens/s and model FLOPs utilisation at paper sizes (bf16), batch-1 latency of "
            "Transformer-base, Mask-Predict and AB-Net: benchmarks/gpu.py on a CUDA device "
            "writes them to results/gpu.md"],
    }
    result["ratios"] = ratios(train, decode, nat)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out.with_suffix(".json"), result)
    out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
