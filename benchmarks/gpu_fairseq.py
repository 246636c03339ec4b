"""fairseq 0.12.2's side of benchmarks/gpu.py: the same Transformers, batches and decoding work,
through fairseq's own training step and beam search. gpu.py runs it in a child process, with
benchmarks/parity/fairseq_site on PYTHONPATH (fairseq's run-time fixes for current Python and
torch), and reads back the JSON it prints last:

    python benchmarks/gpu_fairseq.py --spec spec.json   # spec: written by gpu.py

- training: `fairseq.trainer.Trainer.train_step`, the call `fairseq-train` makes once per update
  (label-smoothed cross-entropy, Adam (0.9, 0.98), gradient clipping, its own metrics), for each
  precision asked: `--fp16` (weights in fp16, an fp32 master copy, dynamic loss scaling: what
  the papers trained with) and `--amp` (fp16 autocast, as the harness autocasts to bf16); 0.12.2
  takes `--bf16` for a TPU flag, so bf16 is not offered on a GPU. Adam is fairseq's own
  implementation, on the flattened fp32 master weights under `--fp16` (its fused kernels need
  apex or a CUDA extension that the released wheel does not build); `fp32` (no flag) serves a
  check on CPU;
- decoding: `SequenceGenerator` with beam 5 on the model in fp16 (`fairseq-generate --fp16`),
  made to emit exactly the harness's number of tokens (`min_len` = `max_len_b` = that number, so
  EOS is blocked before it and forced at it): batch-1 latency and sentences/s at batch 64.

The batches are gpu.py's: the same pairs of token ids (fairseq's layout: source ending in EOS,
target ending in EOS, decoder input starting with EOS), and the same vocabulary sizes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.trainer import Trainer

ARCH = {"base": "transformer_wmt_en_de", "big": "transformer_vaswani_wmt_en_de_big"}


def write_dictionary(path: Path, size: int) -> None:
    """A dictionary of `size` entries: fairseq's 4 specials and size - 4 made-up words."""
    path.write_text("".join(f"w{i} 1\n" for i in range(size - 4)))


def fairseq_cfg(data: Path, model: dict, precision: str, tokens: int):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        str(data), "--task", "translation", "-s", "src", "-t", "tgt",
        "--arch", ARCH[model["size"]], "--share-decoder-input-output-embed",
        "--dropout", str(model["dropout"]), "--attention-dropout", "0",
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
        "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--adam-eps", "1e-8",
        "--lr", "1e-4", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "4000",
        "--clip-norm", "1.0", "--max-tokens", str(tokens),
        "--seed", "0", "--no-progress-bar", "--disable-validation"]
        + ([] if precision == "fp32" else [f"--{precision}"]))
    return convert_namespace_to_omegaconf(args)


def build(data: Path, model: dict, precision: str, tokens: int):
    cfg = fairseq_cfg(data, model, precision, tokens)
    task = tasks.setup_task(cfg.task)
    net = task.build_model(cfg.model)
    return cfg, task, net


def sample(src: torch.Tensor, tgt: torch.Tensor, eos: int) -> dict:
    """gpu.py's pairs in fairseq's layout: src ends in EOS; target y + EOS; input EOS + y."""
    src = src.clone()
    src[:, -1] = eos
    rows = src.size(0)
    target = torch.cat([tgt, torch.full((rows, 1), eos)], 1)
    prev = torch.cat([torch.full((rows, 1), eos), tgt], 1)
    return {"id": torch.arange(rows), "nsentences": rows, "ntokens": target.numel(),
            "net_input": {"src_tokens": src, "src_lengths": torch.full((rows,), src.size(1)),
                          "prev_output_tokens": prev},
            "target": target}


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def measure_training(data: Path, model: dict, precision: str, batch: dict, steps: int) -> dict:
    tokens = int(batch["ntokens"])
    cfg, task, net = build(data, model, precision, tokens)
    criterion = task.build_criterion(cfg.criterion)
    trainer = Trainer(cfg, task, net, criterion)
    for _ in range(3):
        trainer.train_step([batch])
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        trainer.train_step([batch])
    sync()
    seconds = (time.perf_counter() - start) / steps
    memory = torch.cuda.max_memory_allocated() if torch.cuda.is_available() else 0
    result = {"precision": precision, "target_tokens": tokens, "ms_per_update": seconds * 1000,
              "target_tokens_per_s": tokens / seconds, "peak_memory_gb": memory / 1e9,
              "params": sum(p.numel() for p in net.parameters())}
    del trainer, criterion, net
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    return result


def measure_decoding(data: Path, model: dict, spec: dict) -> dict:
    cfg, task, net = build(data, model, "fp32", 4096)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    net = net.to(device=device, dtype=torch.half if device == "cuda" else torch.float).eval()
    cfg.generation.beam, cfg.generation.max_len_a = spec["beam"], 0
    cfg.generation.min_len = cfg.generation.max_len_b = spec["output"]
    generator = task.build_generator([net], cfg.generation)
    eos = task.source_dictionary.eos()

    def decode(src: torch.Tensor) -> list:
        src = src.clone()
        src[:, -1] = eos
        inputs = {"net_input": {"src_tokens": src.to(device),
                                "src_lengths": torch.full((src.size(0),), src.size(1),
                                                          device=device)}}
        with torch.no_grad():
            return generator.generate([net], inputs)

    times = []
    for i, src in enumerate(torch.tensor(s) for s in spec["decode_sources"]):
        sync()
        start = time.perf_counter()
        hypos = decode(src)
        sync()
        if i >= spec["warmup"]:
            times.append(1000 * (time.perf_counter() - start))
    lengths = {len(h[0]["tokens"]) - 1 for h in hypos}  # without the final EOS
    big = torch.tensor(spec["decode_batch"])
    decode(big)
    sync()
    start = time.perf_counter()
    for _ in range(spec["batches"]):
        decode(big)
    sync()
    per_s = spec["batches"] * big.size(0) / (time.perf_counter() - start)
    times.sort()
    return {"decoding": "beam", "median": statistics.median(times),
            "p90": times[min(len(times) - 1, int(0.9 * len(times)))],
            "sentences_per_s_batch64": per_s, "output_lengths": sorted(lengths)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", required=True, help="the JSON workload gpu.py writes")
    spec = json.loads(Path(parser.parse_args().spec).read_text())
    torch.manual_seed(0)
    out: dict = {"fairseq": __import__("fairseq").__version__, "training": [], "decoding": {}}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        write_dictionary(data / "dict.src.txt", spec["src_vocab"])
        write_dictionary(data / "dict.tgt.txt", spec["tgt_vocab"])
        for run in spec["training"]:
            batch = sample(torch.tensor(run["src"]), torch.tensor(run["tgt"]), eos=2)
            for precision in spec["precisions"]:
                result = measure_training(data, run["model"], precision, batch, spec["steps"])
                out["training"].append({"experiment": run["experiment"], **result})
                print(json.dumps(out["training"][-1]), flush=True)
        if spec.get("decode_sources"):
            out["decoding"]["transformer-base"] = measure_decoding(
                data, spec["decode_model"], spec)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
