"""The README stays short and every command in it runs: the install and test commands in CI
(`.ci/run` calls them as written), each workflow command here as Snakemake plans it (`-n`: the
jobs it would run, from the real configs and profiles; the smoke tests run the workflow
itself), the documentation build in tests/test_docs.py. Its excerpt of `results/tables.md` is
today's file."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conda_stand_in import environment_with_conda

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RUN_BY_CI = ("python -m pip install ", "python -m pytest")


def commands() -> list[str]:
    """Each command of the README's bash blocks, continuation lines joined."""
    blocks = re.findall(r"(?ms)^```bash\n(.*?)^```", README.read_text())
    return [line.strip() for block in blocks
            for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def workflow_commands() -> list[str]:
    return [command for command in commands() if command.startswith("snakemake ")]


def test_the_readme_is_at_most_250_lines():
    assert len(README.read_text().splitlines()) <= 250


def test_every_command_is_one_a_test_runs():
    for command in commands():
        assert command.startswith((*RUN_BY_CI, "snakemake ", "mkdocs build")), (
            f"README command {command!r}: no test runs it (tests/test_readme.py)")
    assert workflow_commands()
    # tests/test_docs.py builds the site exactly so
    assert [c for c in commands() if c.startswith("mkdocs")] == ["mkdocs build --strict"]


def test_ci_runs_the_install_and_test_commands_as_written():
    ci = (ROOT / ".ci" / "run").read_text()
    ours = [command for command in commands() if command.startswith(RUN_BY_CI)]
    assert len(ours) == 2
    for command in ours:
        assert command in ci, f".ci/run does not run the README's {command!r}"


@pytest.mark.parametrize("command", workflow_commands())
def test_a_workflow_command_plans_its_jobs(command, tmp_path):
    """Run from the repository (its profiles and configfiles are relative to it), planned in
    a fresh directory, so nothing of the project is written."""
    args = shlex.split(command)[1:]
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", *args, "-n", "--snakefile", str(ROOT / "Snakefile"),
         "--directory", str(tmp_path / "work")],
        cwd=ROOT, capture_output=True, text=True, env=environment_with_conda(tmp_path),
        timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    jobs = dict(re.findall(r"(?m)^(\w+)\s+(\d+)$", result.stdout))
    assert int(jobs.get("train", 0)) > 0 and "report" in jobs, result.stdout[-2000:]


def test_the_excerpt_of_tables_md_is_todays():
    (excerpt,) = re.findall(r"(?ms)^```text\n(.*?)^```", README.read_text())
    tables = (ROOT / "results" / "tables.md").read_text().splitlines()
    for line in excerpt.splitlines():
        assert line in tables, f"README's excerpt line not in results/tables.md: {line!r}"
