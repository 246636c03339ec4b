"""Shared fixtures, built once per session: a small toy world with trained WordPiece
vocabularies, tiny random BERTs for the pre-trained checkpoint roles, and one run of the smoke
workflow for every end-to-end test that reads its outputs."""

import os
import shutil
from pathlib import Path

import pytest
from filelock import FileLock

# torch, transformers and nmtbench are imported where a fixture needs them: under pytest-xdist
# this file is loaded by the controller too, which runs no test (4 to 5 CPU-seconds of imports)
if os.environ.get("PYTEST_XDIST_WORKER"):
    import torch

    # as many workers as cores: torch's own threads on top of them would only wait on each
    # other (the commands the tests start choose their own threads)
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def toy_dir(tmp_path_factory):
    from nmtbench.data.tokenization import train_wordpiece
    from nmtbench.data.toyworld import WorldConfig, generate

    out = tmp_path_factory.mktemp("toy")
    generate(out, WorldConfig(seed=2), train_pairs=400, valid_pairs=40, test_pairs=40,
             mono_sentences=2000)
    for side, size in (("src", 600), ("tgt", 500)):
        train_wordpiece([out / f"mono.{side}", out / f"train.{side}"], out / f"tok_{side}", size)
    return out


@pytest.fixture(scope="session")
def toy_paths(toy_dir):
    """The trainer's paths for the toy corpus and its vocabularies."""
    from nmtbench.run_paths import RunPaths

    return RunPaths(str(toy_dir / "train.src"), str(toy_dir / "train.tgt"),
                    str(toy_dir / "valid.src"), str(toy_dir / "valid.tgt"),
                    str(toy_dir / "tok_src"), str(toy_dir / "tok_tgt"))


@pytest.fixture(scope="session")
def tiny_berts(tmp_path_factory) -> dict[str, str]:
    """Checkpoint role -> directory of a tiny random BERT (masked LM) with its tokenizer."""
    from tiny_checkpoints import TINY_BERTS, save_tiny_bert

    root = tmp_path_factory.mktemp("contract_berts")
    for seed, role in enumerate(TINY_BERTS, start=1):
        save_tiny_bert(root / role, seed=seed)
    # deep fusion's decoder_init reads the target side, like tgt_bert
    return {role: str(root / role) for role in TINY_BERTS} | {
        "decoder_init": str(root / "tgt_bert"), "bert": str(root / "src_bert")}


OPT_IN = ("slurm", "real", "rehearsal")  # markers whose tests run only where -m names them


def pytest_collection_modifyitems(config, items):
    """The SLURM test, the hour on real data and the rehearsal only where a -m expression
    names them (`-m slurm`, `-m real`, `-m rehearsal`): `-m "not slow"` leaves them out too.
    Slow tests first: under pytest-xdist the long end-to-end runs start at once and the short
    tests fill the other cores, instead of the longest run starting last."""
    for marker in OPT_IN:
        if marker in config.getoption("markexpr"):
            continue
        left_out = [item for item in items if item.get_closest_marker(marker)]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if not item.get_closest_marker(marker)]
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    """The smoke config's whole DAG (`snakemake --cores 2 --configfile config/smoke.yaml`), run
    once per test run: under pytest-xdist the first worker to ask runs it and the others wait
    for it. Read it; a test that changes it works on `smoke_copy`.

    With NMTBENCH_SMOKE_RUN=DIR it runs in DIR, which outlives the test run: CI's slow stage
    makes it and the SLURM stage compares with it. Snakemake runs there each time all the same,
    so what the code or config changed since is run again, and nothing stale is read."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # a worker's base is a folder of the run's
        root = root.parent
    workdir = Path(os.environ.get("NMTBENCH_SMOKE_RUN") or root / "smoke-run")
    done, failed = root / "smoke-run.done", root / "smoke-run.failed"
    with FileLock(root / "smoke-run.lock"):
        if not done.exists() and not failed.exists():
            from smoke import snakemake

            workdir.mkdir(parents=True, exist_ok=True)
            result = snakemake(workdir, "--cores", "2")
            (done if result.returncode == 0 else failed).write_text(result.stderr[-3000:])
    if failed.exists():
        pytest.fail(f"the smoke run in {workdir} failed:\n{failed.read_text()}")
    return workdir


@pytest.fixture
def smoke_copy(smoke_run, tmp_path) -> Path:
    """A copy of the finished smoke run that a test may change."""
    return shutil.copytree(smoke_run, tmp_path / "smoke", symlinks=True)
