"""The rehearsal of config/paper.yaml on a CPU (docs/rehearsal.md): the releases on a loopback
mirror (real text from ../shared/data where there is, a few hundred pairs each), the hub's
stand-in checkpoints on a loopback hub, an overlay over config/rehearsal.yaml (the mirror's
sources; each run's widths divided by the profile's divisor, its epochs a handful), and
Snakemake on the whole: the stand-ins snapshotted through their rule first, so that planning
reads the architectures the runs load. Wall time and peak disk land in `rehearsal.json`."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml
from hub_server import HubServer
from hub_stand_ins import write_stand_in
from rehearsal_text import rehearsal_text, vocabulary_text
from release_fixtures import ROOT, Server, build_releases, server_config

from nmtbench.errors import InputError
from nmtbench.workflow.config import check, load_config, pretrain_settings
from nmtbench.workflow.pretrained_names import checkpoint_dir

PROFILE = ROOT / "config" / "rehearsal.yaml"
PAPER = ROOT / "config" / "paper.yaml"
SCALE = 10  # the release fixtures' sizes times this: a few hundred training pairs each
# widths a method's settings may hold, scaled by the divisor (the rest follow the checkpoints')
WIDTHS = ("d_model", "ffn_dim", "adapter_dim", "coordinator_ffn_dim", "rnn_embed", "rnn_hidden")
EVEN = ("rnn_hidden",)  # halved between the encoder's two directions
LEAST_EPOCHS = 2  # a best and a last checkpoint that differ
# the training pairs a run on a real dataset reads (of its few hundred): two or three
# batches an epoch
TRAIN_PAIRS = 100
# sentences a mask-predict decoding takes at once: a length predictor of 30 updates picks
# lengths up to its BERT's 512 positions, and 4 candidates x 512 x mBERT's 119,547 logits are
# 1 GB a sentence (the hypotheses do not depend on it)
NAT_BATCH = 2
# tokens a batch holds at most: C-MLM's teachers take 16,000, whose logits over mBERT's
# 119,547 pieces took one process to 11.8 GB (killed for memory); tokens_per_update keeps
# their updates' tokens
MAX_TOKENS = 4096
MEMORY_MB = 20_000  # of the 24 GB: what the jobs' declared mem_mb may add up to at once


def plan_of(*configs: Path):
    files = [ROOT / "config" / "config.yaml", *configs]
    return check(load_config(files), ROOT / "config" / "schema.yaml", ROOT / "papers")


def hub_names(plan) -> list[str]:
    """The hub checkpoints the plan snapshots (neither pre-trained nor trimmed in the DAG)."""
    made = {**plan.config.get("pretraining", {}), **plan.config.get("trimmed", {})}
    names = {name for dataset, run in plan.trained_runs()
             for name in [*plan.checkpoints(dataset, run).values(),
                          *(plan.vocabulary(dataset, run, side)[0] for side in ("src", "tgt"))]
             if name is not None}
    names |= {spec["checkpoint"] for spec in plan.config.get("trimmed", {}).values()}
    return sorted(n for n in names if n not in made
                  and checkpoint_dir(n).startswith("data/pretrained/"))


def _architecture(plan, method: str, settings: dict[str, Any]) -> dict[str, int]:
    """The widths a run's settings give its own layers (its size's where it names none)."""
    from nmtbench.methods.transformer import SIZES

    info = plan.implemented[method]
    size = SIZES.get(settings.get("size", "base"))
    widths = {}
    for key in WIDTHS:
        if key not in info.keys:
            continue
        value = settings.get(key, info.defaults.get(key, getattr(size, key, None)))
        if value is not None:
            widths[key] = value
    return widths


def _scaled(widths: dict[str, int], divisor: int) -> dict[str, int]:
    return {key: max(2, value // divisor // 2 * 2) if key in EVEN else max(1, value // divisor)
            for key, value in widths.items()}


def overlay_overrides(plan, divisor: int) -> dict[str, Any]:
    """`datasets.<d>.overrides` for every experiment on the datasets the plan trains on: on
    real datasets (the toy world's are toy-sized already) its widths divided by `divisor`,
    its training pairs `TRAIN_PAIRS` and its batches at most `MAX_TOKENS`; its epochs a
    handful, as many as its run's decodings average (the same for every experiment of a
    run), and where they average update checkpoints as many updates, each saved; valid
    BLEU off (the plan keeps it where a curve draws it); mask-predict decodings in
    batches of `NAT_BATCH`. Every experiment, not only the trained ones: an experiment
    named as its method (`abnet`) overrides the method's others too, which would otherwise
    join its run and rename it."""
    trained = {dataset for dataset, _ in plan.trained_runs()}
    datasets: dict[str, Any] = {}
    for dataset in sorted(trained):
        runs = {}
        for e in plan.experiments:
            try:
                cell = plan.run_cell(dataset, e, "rehearsal")
            except InputError:  # an experiment this dataset cannot run (no BERT for it)
                continue
            if cell.run is not None:
                runs[e] = cell.run
        experiments = sorted(runs)
        averaged: dict[str, int] = {}
        over_updates: set[str] = set()
        for e in experiments:
            decode = plan.decode_settings(dataset, e)
            averaged[runs[e]] = max(averaged.get(runs[e], 0), decode.average_last)
            if decode.average_last and decode.average_of == "updates":
                over_updates.add(runs[e])
        overrides = datasets.setdefault(dataset, {"overrides": {}})["overrides"]
        for e in experiments:
            settings = plan.train_settings(dataset, e)
            # valid BLEU only where a curve draws it (the plan keeps it on there): the paper
            # config's every epoch would have the mask-predict runs' untrained length
            # predictors decode lengths up to 512 for most of the rehearsal's time
            override: dict[str, Any] = {"max_epochs": max(LEAST_EPOCHS, averaged[runs[e]]),
                                        "valid_bleu": False}
            if runs[e] in over_updates:  # as many updates as it averages, one saved each
                override |= {"save_interval_updates": 1, "max_updates": averaged[runs[e]]}
            else:
                override["keep_last_epochs"] = max(1, averaged[runs[e]])
            if plan.config["datasets"][dataset]["kind"] != "toyworld":
                override |= _scaled(_architecture(plan, settings["method"], settings), divisor)
                override["train_pairs"] = TRAIN_PAIRS
                if settings.get("max_tokens", 0) > MAX_TOKENS:
                    override["max_tokens"] = MAX_TOKENS
            if plan.decoding(dataset, e) == "nat":
                override["decode"] = {"batch_size": NAT_BATCH}
            overrides[e] = override
    return {"datasets": datasets}


def scaled_pretraining(plan, divisor: int) -> dict[str, Any]:
    """The DAG's pre-trainings on real datasets, their widths divided by `divisor`."""
    from nmtbench.workflow.pretrain_settings import PretrainConfig

    scaled = {}
    for name, spec in plan.config.get("pretraining", {}).items():
        if plan.config["datasets"][spec["dataset"]]["kind"] != "toyworld":
            cfg = PretrainConfig.from_dict(pretrain_settings(spec))
            scaled[name] = {"d_model": cfg.d_model // divisor, "ffn_dim": cfg.ffn_dim // divisor}
    return {"pretraining": scaled} if scaled else {}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ports(workdir: Path) -> dict[str, int]:
    """The mirror's and the hub's ports, kept in the workdir: the sources' URLs are part of the
    download rules' commands, so a rerun on other ports would download everything again."""
    path = workdir / "ports.json"
    if not path.is_file():
        path.write_text(json.dumps({"mirror": free_port(), "hub": free_port()}))
    return json.loads(path.read_text())


def set_up(workdir: Path) -> tuple[list[Path], dict[str, int]]:
    """The served releases and stand-ins (made once), and the config files to run with
    (paper, profile, overlay), in `workdir`."""
    workdir.mkdir(parents=True, exist_ok=True)
    ports = _ports(workdir)
    served, hub = workdir / "served", workdir / "hub"
    if not served.is_dir():
        build_releases(workdir / "served.partial", rehearsal_text, SCALE)
        (workdir / "served.partial").rename(served)
    sources = server_config(served, f"http://127.0.0.1:{ports['mirror']}",
                            workdir / "rehearsal-sources.yaml")
    configs = [PAPER, PROFILE, sources]
    plan = plan_of(*configs)
    divisor = plan.config["rehearsal"]["width_divisor"]
    if not hub.is_dir():
        text = vocabulary_text()
        for name in hub_names(plan):
            write_stand_in(name, workdir / "hub.partial" / name, divisor, text)
        (workdir / "hub.partial").rename(hub)
    overlay = workdir / "rehearsal-overlay.yaml"  # made again: the paper config may change
    overlay.write_text(yaml.safe_dump({**overlay_overrides(plan, divisor),
                                       **scaled_pretraining(plan, divisor)}))
    return [*configs, overlay], ports


class PeakDisk:
    """The most bytes under a directory, sampled every `every` seconds in a thread."""

    def __init__(self, root: Path, every: float = 30.0):
        self.root, self.every, self.peak = root, every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, _bytes_under(self.root))
            if self._stop.wait(self.every):
                return

    def __enter__(self) -> PeakDisk:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _bytes_under(self.root))


def _bytes_under(root: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except FileNotFoundError:  # a temporary file renamed meanwhile
                pass
    return total


def snakemake(workdir: Path, configs: list[Path], *args: str,
              env: dict[str, str]) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
           "--directory", str(workdir), "--cores", "2", *args,
           "--configfile", *map(str, configs)]  # last: it takes every argument after it
    with (workdir / "snakemake.log").open("a") as log:
        return subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)


def rehearse(workdir: Path, *args: str) -> dict[str, Any]:
    """Set up, serve, snapshot the stand-ins, then run the whole config (`args` go to
    Snakemake); returns and writes the record: return code, wall seconds, peak bytes."""
    start = time.monotonic()
    with PeakDisk(workdir) as disk:
        configs, ports = set_up(workdir)
        hub_root = workdir / "hub"
        with Server(workdir / "served", port=ports["mirror"]), \
                HubServer(hub_root, port=ports["hub"]) as hub:
            env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": str(workdir / "hf-home"),
                   "HF_HUB_DISABLE_TELEMETRY": "1", "PYTHONUNBUFFERED": "1"}
            env.pop("HF_HUB_OFFLINE", None)
            snapshots = [f"data/pretrained/{name}/config.json"
                         for name in sorted(p.name for p in hub_root.iterdir())]
            result = snakemake(workdir, configs, *snapshots, env=env)
            if result.returncode == 0:
                result = snakemake(workdir, configs, "--resources", f"mem_mb={MEMORY_MB}",
                                   *args, env=env)
    record = {"returncode": result.returncode, "wall_seconds": round(time.monotonic() - start),
              "peak_disk_bytes": disk.peak, "scale": SCALE}
    (workdir / "rehearsal.json").write_text(json.dumps(record, indent=1) + "\n")
    shutil.rmtree(workdir / "hf-home", ignore_errors=True)
    return record
