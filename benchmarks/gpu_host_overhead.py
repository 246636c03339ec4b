"""How much of a training update is the host's: Transformer-base updates (benchmarks/gpu.py's
workload: 128 and 1,024 random pairs of 32 + 32 tokens) made in several ways, each beside the
GPU's own busy time for the same update.

    python benchmarks/gpu_host_overhead.py --out gpu-out/host-overhead

- eager: the trainer's default;
- compiled: the trainer's `compile: true` (each layer compiled for dynamic shapes);
- compiled-cpp-wrapper: the same, its kernels launched from generated C++ instead of Python
  (inductor's `cpp_wrapper`), which shapes may vary under: the host's cost per launch;
- compiled-static: compiled for the batch's shapes (a real run would recompile per shape);
- cuda-graphs: compiled-static replayed as CUDA graphs (`mode="reduce-overhead"`): what an
  update costs when the host launches almost nothing, the ceiling for a trainer that pads its
  batches to a few fixed shapes;
- whole-static, whole-cuda-graphs: the model's whole loss (`Model.losses`, every layer and the
  loss between them) as one compiled region, for the batch's shapes, without and with CUDA
  graphs: what compiling layer by layer costs in guards and region calls.

The GPU's busy time is the sum of the update's kernel times under torch.profiler (3 updates);
where ms/update is well above it, the GPU waits for the host.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import torch

from nmtbench.evaluation.params import build_model
from nmtbench.fileio import write_json
from nmtbench.workflow import recorded_settings
from nmtbench.workflow.config import check, load_config
from nmtbench.workflow.train_settings import TrainConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu  # noqa: E402  (the workload is gpu.py's)

VARIANTS = {  # name: what is compiled (its layers or the whole loss) and torch.compile's options
    "eager": (None, None),
    "compiled": ("layers", {"dynamic": True}),
    "compiled-cpp-wrapper": ("layers", {"dynamic": True, "options": {"cpp_wrapper": True}}),
    "whole-cuda-graphs": ("model", {"dynamic": False, "mode": "reduce-overhead"}),
    "whole-static": ("model", {"dynamic": False}),
    "cuda-graphs": ("layers", {"dynamic": False, "mode": "reduce-overhead"}),
    "compiled-static": ("layers", {"dynamic": False}),
}


def measure(model, tc: TrainConfig, device: torch.device, variant: str, pairs: int,
            steps: int) -> dict:
    scope, options = VARIANTS[variant]
    updater = gpu.trainer_for(model, tc, device, compiled=False)
    if scope == "layers":
        model.compile_for_training(**options)
    elif scope == "model":
        model.losses = torch.compile(model.losses, **options)
    data = gpu.training_data(model, pairs, torch.Generator().manual_seed(0))
    group, step = [list(range(pairs))], 0

    def update() -> None:
        nonlocal step
        if options and options.get("mode") == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()
        updater.update(group, data, step)
        step += 1

    for _ in range(3):  # warm-up and compilation (CUDA graphs record on the second)
        update()
    gpu.sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        update()
    gpu.sync(device)
    seconds = (time.perf_counter() - start) / steps
    return {"variant": variant, "target_tokens": data.target_tokens(group[0]),
            "ms_per_update": seconds * 1000, "gpu_busy_ms": gpu_busy_ms(update, device)}


def gpu_busy_ms(update, device: torch.device) -> float | None:
    """Kernel time per update: the device's events' self-times over 3 profiled updates, / 3
    (an operator's row repeats its kernels' time: only the kernels' own rows are counted)."""
    if device.type != "cuda":
        return None
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            update()
        gpu.sync(device)
    return sum(e.self_device_time_total for e in prof.key_averages()
               if e.device_type != DeviceType.CPU) / 1000 / 3


def markdown(result: dict) -> str:
    meta = result["meta"]
    lines = ["# Host overhead of a training update (Transformer-base)", "",
             f"`{meta['command']}` at commit {meta['commit']} on {meta['device']} (driver "
             f"{meta['driver']}); torch {meta['torch']}, CUDA {meta['cuda']}; {meta['date']}. "
             "See the script's docstring for the variants.", "",
             *([meta["note"], ""] if meta.get("note") else []),
             "| variant | target tokens/update | ms/update | GPU busy ms/update | GPU busy | "
             "target tokens/s |", "|---|---|---|---|---|---|"]
    for r in result["runs"]:
        if "error" in r:
            lines.append(f"| {r['variant']} | {r['target_tokens']:,} | failed: "
                         f"{r['error']} | | | |")
            continue
        busy = r["gpu_busy_ms"]
        lines.append(f"| {r['variant']} | {r['target_tokens']:,} | {r['ms_per_update']:.1f} | "
                     + (f"{busy:.1f} | {100 * busy / r['ms_per_update']:.0f}% | " if busy
                        else "- | - | ")
                     + f"{r['target_tokens'] / r['ms_per_update'] * 1000:,.0f} |")
    lines += ["", *recorded_settings.markdown(result["settings"])]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(gpu.ROOT / "results" / "gpu-host-overhead"),
                        help="writes OUT.md and OUT.json")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=10, help="timed updates per variant")
    parser.add_argument("--pairs", nargs="+", type=int, default=[128, 1024])
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    args = parser.parse_args()
    device = torch.device(args.device)
    config = load_config([gpu.ROOT / "config" / name for name in ("config.yaml", "paper.yaml")])
    plan = check(config, gpu.ROOT / "config" / "schema.yaml", gpu.ROOT / "papers")
    torch.manual_seed(0)
    base = build_model(plan, gpu.DATASET, "transformer-base")
    tc = TrainConfig.from_dict(plan.train_settings(gpu.DATASET, "transformer-base", seed=1))
    result = {"meta": {
        "commit": gpu.commit(), "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
        "cuda": torch.version.cuda, "driver": gpu.driver_version(),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "command": " ".join(["python", "benchmarks/gpu_host_overhead.py", *sys.argv[1:]])},
        "runs": [], "settings": recorded_settings.resolve(
            ["config/config.yaml", "config/paper.yaml"], [(gpu.DATASET, "transformer-base")])}
    for variant in args.variants:
        for pairs in args.pairs:
            torch._dynamo.reset()
            try:
                run = measure(copy.deepcopy(base), tc, device, variant, pairs, args.steps)
            except Exception as err:  # noqa: BLE001  (a variant this torch cannot run is a result)
                run = {"variant": variant, "target_tokens": pairs * 32,
                       "error": f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"}
            result["runs"].append(run)
            print(json.dumps(run), flush=True)
            gpu.free_memory(device)
            write_json(f"{args.out}.json", result)
            Path(f"{args.out}.md").write_text(markdown(result))


if __name__ == "__main__":
    main()
