"""The smoke DAG through a real one-node SLURM cluster on loopback (scripts/slurm-loopback),
submitted by snakemake-executor-plugin-slurm with profiles/slurm, and compared with a local run.

Opt-in (marker `slurm`, deselected by default): `python -m pytest -q -n 0 -m slurm`. The local
side is the shared smoke run (tests/conftest.py `smoke_run`): CI's slow stage leaves it in
NMTBENCH_SMOKE_RUN, else this makes it first. Needs root and
the Debian packages slurmctld, slurmd, slurm-client and munge (`scripts/slurm-loopback
install`); skipped when slurmctld is not installed.
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "config" / "smoke.yaml"
LOOPBACK = ROOT / "scripts" / "slurm-loopback"
pytestmark = pytest.mark.slurm

# Flags for the loopback cluster only, hence not in profiles/slurm:
# - it has no accounting database (slurmdbd): `sacct` is installed but answers "accounting
#   storage is disabled", and the plugin, which picks sacct whenever the binary exists, would
#   then see no job finish and wait forever. squeue works because the cluster keeps finished
#   jobs for MinJobAge=300 s (the plugin wants at least 3x its initial status-check delay,
#   else it falls back to sacct). Sites with accounting keep the default (sacct).
# - the first status check 1 s after a submission or a finished job instead of 40 s (the plugin
#   adds 10 s to the wait after each check that finds nothing finished) keeps the run short: a
#   job here takes seconds (sites: the default).
# - no account: the cluster has none, and guessing one runs sacct.
# - the SLURM logs of successful jobs are kept (the plugin deletes them otherwise): they are
#   this test's evidence that every job ran under SLURM.
LOOPBACK_FLAGS = ("--slurm-status-command", "squeue",
                  "--slurm-init-seconds-before-status-checks", "1",
                  "--slurm-no-account", "--slurm-keep-successful-logs")
# Two job slots per core. The plugin checks a wave of submitted jobs 1 s, 12 s and 33 s after
# submitting it (it waits 10 s longer after each check that finds nothing finished): a few
# more jobs at once than cores fill the cores while a job's Python starts, but three per core
# made every wave finish after the 12 s check (DAG 238 s, against 195 s with two per core and
# 197 s with one, measured one after another on two cores).
LOOPBACK_ENV = {"SLURM_LOOPBACK_CPUS": str(2 * (os.cpu_count() or 1))}
TIMEOUT = 1800  # seconds per snakemake run
# The part of the smoke DAG that runs every rule of the workflow once or more but the data
# rules of real datasets and back-translation's two: AB-Net's Table 1 (pre-trained BERTs,
# Mask-Predict on distilled targets, latency) and BERT-KD's Figure 2a (the C-MLM teacher, soft
# targets, its student, length buckets); 46 jobs. `NMTBENCH_SLURM_TABLES` names others
# (`all`: the whole smoke DAG, several times longer).
TABLES = os.environ.get("NMTBENCH_SLURM_TABLES", "[abnet2020.table1,bertkd2020.figure2a]")
RULES = {"toyworld", "tokenizer", "pretrain", "train", "decode", "distill", "latency",
         "latency_vs_baseline", "evaluate", "bootstrap", "buckets", "soft_targets", "report"}

SUBMITTED = re.compile(r"Job (\d+) has been submitted with SLURM jobid (\d+) \(log: (.+)\)\.")
# Cells whose value is a measured time: latency ("15.9 ms") and speed-up ("2.38x") cells
# (nmtbench.report.tables._format), the pre-training table's "Seconds" column and the teachers' time
# per 1,000 pairs of soft targets.
TIMING_CELL = re.compile(r"\d ms\b|\d\.\d\dx\b")
TIMING_COLUMNS = {"Seconds", "Seconds per 1,000 pairs"}
VERDICT_COLUMNS = {"On our runs"}
# JSON keys: decode/train/pretrain "seconds", and "trained": the digest of a train_summary.json,
# which holds the training's seconds
TIMING_KEYS = re.compile(r"(^|_)(seconds|ms)$|^seconds_per_|^trained$")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without SLURM_* variables (a CI job that itself runs under
    SLURM would otherwise leak its allocation into the runs), plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "SBATCH_", "SRUN_"))}
    env.update(extra)
    return env


def snakemake(workdir: Path, env: dict[str, str], *args: str):
    """Run the smoke config in `workdir`: (the finished process, its wall time in seconds)."""
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
           "--directory", str(workdir), "--configfile", str(SMOKE), "--config",
           f"tables={TABLES}", *args]
    start = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    return result, time.monotonic() - start


def daemon_logs(state: Path) -> str:
    parts = []
    for name in ("slurmctld.log", "slurmd.log", "munged.out"):
        path = state / name
        if path.exists():
            parts.append(f"---- {name}\n" + "\n".join(path.read_text().splitlines()[-20:]))
    return "\n".join(parts)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A running loopback cluster: (environment for its clients, its state directory)."""
    if shutil.which("slurmctld") is None and not Path("/usr/sbin/slurmctld").exists():
        pytest.skip("slurmctld is not installed (scripts/slurm-loopback install)")
    if os.geteuid() != 0:
        pytest.skip("the loopback SLURM cluster needs root (slurmd, munged)")
    state = tmp_path_factory.mktemp("cluster")
    try:
        started = subprocess.run([str(LOOPBACK), "start", str(state)], capture_output=True,
                                 text=True, timeout=120, env=clean_env(**LOOPBACK_ENV))
        assert started.returncode == 0, f"{LOOPBACK} start failed:\n{started.stderr}"
        # VAR=value lines, shell-quoted: SLURM_CONF, and PATH with the cluster's srun first
        exported = dict(shlex.split(line)[0].split("=", 1)
                        for line in started.stdout.splitlines() if re.match(r"^[A-Z_]+=", line))
        assert exported.get("SLURM_CONF") == str(state / "slurm.conf"), started.stdout
        yield clean_env(**exported), state
    finally:
        subprocess.run([str(LOOPBACK), "stop", str(state)], capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def local_run(smoke_run, tmp_path_factory) -> tuple[Path, str]:
    """The same runs made locally: the shared smoke run (a superset of TABLES' runs; CI's slow
    stage leaves it in NMTBENCH_SMOKE_RUN), its results reported as the SLURM run's config
    reports them, from a copy (the report's links are relative to it): (the smoke run's
    directory, that tables.md's text)."""
    results = tmp_path_factory.mktemp("local")
    shutil.copytree(smoke_run / "results" / "runs", results / "runs")
    shutil.copytree(smoke_run / "data" / "pretrained", results / "pretrained")
    tables = results / "tables.yaml"
    tables.write_text(f"tables: {TABLES}\n")
    result = subprocess.run(
        [sys.executable, "-m", "nmtbench", "report", "--root", str(ROOT), "--results",
         str(results), "--pretrained", str(results / "pretrained"), "--configfile", str(SMOKE),
         str(tables)], capture_output=True, text=True, timeout=300, env=clean_env())
    assert result.returncode == 0, result.stderr[-3000:]
    return smoke_run, (results / "tables.md").read_text()


@pytest.fixture(scope="module")
def slurm_run(cluster, tmp_path_factory):
    env, state = cluster
    workdir = tmp_path_factory.mktemp("slurm")
    result, seconds = snakemake(workdir, env, "--executor", "slurm",
                                "--profile", str(ROOT / "profiles" / "slurm"), *LOOPBACK_FLAGS)
    (workdir / "snakemake.out").write_text(result.stdout + result.stderr)
    assert result.returncode == 0, (f"{result.stderr[-4000:]}\n{daemon_logs(state)}")
    return workdir, result.stdout + result.stderr, seconds


def job_stats(output: str) -> dict[str, int]:
    """Jobs per rule from Snakemake's "Job stats" table at the start of a run."""
    lines = output.split("Job stats:", 1)[1].splitlines()
    counts = {}
    for line in lines[3:]:
        name, _, count = line.strip().partition(" ")
        if name == "total" or not count.strip().isdigit():
            break
        counts[name] = int(count)
    return counts


def test_every_job_of_the_smoke_dag_ran_as_a_slurm_job(slurm_run, capsys):
    workdir, output, seconds = slurm_run
    with capsys.disabled():
        print(f"\n[test_slurm] smoke DAG ({TABLES}) through SLURM: {seconds:.0f} s wall time")
    (workdir / "wall_seconds.txt").write_text(f"{seconds:.1f}\n")

    submitted = SUBMITTED.findall(output)
    stats = job_stats(output)
    remote = {rule: n for rule, n in stats.items() if rule != "all"}  # `all` runs no command
    every_rule = RULES | ({"reverse_dataset", "backtranslate"} if TABLES == "all" else set())
    assert set(remote) == every_rule, stats  # every rule of the workflow ran as a SLURM job
    assert len(submitted) == sum(remote.values()) >= 20, (stats, len(submitted))
    assert len({slurm_id for _, slurm_id, _ in submitted}) == len(submitted)  # one job each

    logs = workdir / ".snakemake" / "slurm_logs"
    assert {p.name for p in logs.iterdir()} == {f"rule_{rule}" for rule in remote}
    for _, slurm_id, log in submitted:
        log = Path(log)
        assert log.is_relative_to(logs) and log.name == f"{slurm_id}.log", log
        # written by slurmstepd: the job's own Snakemake, started by the plugin's jobstep
        assert "--executor slurm-jobstep" in log.read_text(), log
    total = sum(stats.values())
    assert f"{total} of {total} steps (100%) done" in output


def table_cells(text: str) -> tuple[dict[tuple, str], int, int]:
    """Every cell of every markdown table in `text`, keyed by (section, table, row, column),
    with timing cells masked; and how many cells held a non-timing number, how many a timing."""
    cells, numbers, timings = {}, 0, 0
    section, table, header, row = "", 0, None, 0
    for line in text.splitlines():
        if line.startswith("#"):
            section, table, header = line, 0, None
            continue
        if not line.startswith("|"):
            if header is not None:
                table += 1
            header = None
            continue
        parts = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if header is None:
            header, row = parts, 0
            continue
        if all(set(c) <= set(":-") for c in parts):
            continue
        row += 1
        # a claim's verdict on a speedup or latency is itself a timing
        timed_row = any(TIMING_CELL.search(cell) for cell in parts)
        for column, cell in zip(header, parts, strict=True):
            if (column in TIMING_COLUMNS or TIMING_CELL.search(cell)
                    or (timed_row and column in VERDICT_COLUMNS)):
                cell, timings = "<timing>", timings + 1
            elif re.search(r"\d", cell) and not cell.startswith("["):
                numbers += 1
            cells[(section, table, row, column)] = cell
    return cells, numbers, timings


def without_timings(data):
    if isinstance(data, dict):
        return {k: without_timings(v) for k, v in data.items() if not TIMING_KEYS.search(k)}
    if isinstance(data, list):
        return [without_timings(v) for v in data]
    return data


def test_slurm_and_local_runs_give_the_same_numbers(local_run, slurm_run):
    local_dir, local_tables = local_run
    slurm_dir = slurm_run[0]
    ours, numbers, timings = table_cells((slurm_dir / "results" / "tables.md").read_text())
    theirs, _, _ = table_cells(local_tables)
    assert numbers > 50 and timings >= 4, (numbers, timings)  # the comparison compares things
    differ = {key: (ours.get(key), theirs.get(key)) for key in ours.keys() | theirs.keys()
              if ours.get(key) != theirs.get(key)}
    assert not differ, differ

    # Each run's outputs: metrics (BLEU, ROUGE, #params, best valid loss), translations,
    # significance and length buckets, pre-training summaries, a teacher's soft targets (their
    # size and its accuracy); all but their timings. The local run made these and more (the
    # smoke config's other tables).
    patterns = ("results/runs/**/metrics.*.json", "results/runs/**/hyp.*.txt",
                "results/runs/**/bootstrap.*.json", "results/runs/**/buckets.*.json",
                "results/runs/**/soft_targets.*.json",
                "data/pretrained/*/pretrain_summary.json")
    files = sorted(p.relative_to(slurm_dir) for pattern in patterns
                   for p in slurm_dir.glob(pattern))
    assert {f.name.split(".")[0] for f in files} == {
        "metrics", "hyp", "bootstrap", "buckets", "soft_targets", "pretrain_summary"}
    bleu = [f for f in files if f.name.startswith("metrics.")]
    assert len(bleu) >= 3  # one per evaluate job
    for name in files:
        mine, other = slurm_dir / name, local_dir / name
        assert other.exists(), f"{name}: made under SLURM, not by the local run"
        if name.suffix == ".txt":
            assert mine.read_text() == other.read_text(), name
            continue
        a, b = json.loads(mine.read_text()), json.loads(other.read_text())
        if name in bleu:
            assert a["bleu"] == b["bleu"], (name, a["bleu"], b["bleu"])
        assert without_timings(a) == without_timings(b), name
