"""Real snakemake on the smoke config (config/smoke.yaml, a shrunken toy world), for the
end-to-end tests: the command, the plan it follows, and where a run of it lands."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from nmtbench.workflow.config import check, load_config

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "config" / "smoke.yaml"


def snakemake(workdir: Path, *args: str, timeout: float = 900,
              **popen) -> subprocess.CompletedProcess | subprocess.Popen:
    """snakemake on the workflow in `workdir`, with the smoke config unless `args` name one,
    failing after `timeout` seconds; with `popen` keywords, started in the background (its
    output dropped)."""
    if "--configfile" not in args:
        args = ("--configfile", str(SMOKE), *args)
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
           "--directory", str(workdir), *args]
    if popen:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                **popen)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def smoke_plan(*extra: Path):
    config = load_config([ROOT / "config" / "config.yaml", SMOKE, *extra])
    return check(config, ROOT / "config" / "schema.yaml", ROOT / "papers")


def run_dir(workdir: Path, experiment: str, *extra: Path) -> tuple[Path, str]:
    """Where the smoke config trains `experiment` on the toy world, and its decoding tag."""
    cell = smoke_plan(*extra).cell("toy", experiment, "test")
    return workdir / cell.run_dir(1), cell.tag

