"""The workflow passes `snakemake --lint` and the Python code passes ruff."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_snakemake_lint_is_clean():
    result = subprocess.run([sys.executable, "-m", "snakemake", "--lint"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Lints for" not in result.stdout + result.stderr


def test_ruff_is_clean():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout
