"""The worked example of adding a method (docs/adding-a-method.md), done as written in a copy of
the project: its three pieces (the module, the schema entry, a paper file) go where it says and
nothing else of the project changes; the method contract picks the method up, the site builds
with the method in its configuration reference, and the page's smoke-run command trains it and
reports its row."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
# the example's three pieces: all that adding a method writes
PIECES = {"nmtbench/methods/bert_slow.py", "config/schema.yaml", "papers/bertslow.yaml"}


def worked_example() -> tuple[str, list[str], list[str]]:
    """The section's Python block, its YAML blocks and its shell command, unindented."""
    text = (ROOT / "docs" / "adding-a-method.md").read_text().split("## Worked example", 1)[1]
    text = text.split("\n## ", 1)[0]
    blocks = {"python": [], "yaml": [], "bash": []}
    for indent, language, body in re.findall(r"(?m)^( *)```(\w+)\n(.*?)^\1```", text, re.S):
        blocks[language].append(re.sub(rf"(?m)^{indent}", "", body))
    (module,), yaml_blocks, (command,) = blocks["python"], blocks["yaml"], blocks["bash"]
    return module, yaml_blocks, shlex.split(command.replace("\\\n", " "))


def project_files() -> list[str]:
    """The project as a clone has it: the files git tracks and those it would (untracked, not
    ignored), without outputs, caches or a virtual environment."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                             "-z"], cwd=ROOT, capture_output=True, text=True, check=True)
    return sorted(p for p in listed.stdout.split("\0") if p and (ROOT / p).is_file())


def files(root: Path, paths: list[str]) -> dict[str, bytes]:
    """The contents of `paths` under `root` that exist there, by path."""
    return {p: (root / p).read_bytes() for p in paths if (root / p).is_file()}


@pytest.fixture
def project(tmp_path) -> Path:
    """A copy of the project (code, configs, papers, docs, results, tests) with the example
    added as the page says; nothing of the original is changed."""
    copy = tmp_path / "project"
    for path in project_files():
        (copy / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, copy / path)
    module, (schema_entry, paper), _ = worked_example()
    (copy / "nmtbench" / "methods" / "bert_slow.py").write_text(module)
    schema = copy / "config" / "schema.yaml"
    text = schema.read_text()
    start = text.index("\n  methods:\n")  # its end: the next entry of $defs
    end = re.compile(r"(?m)^  \S").search(text, start + len("\n  methods:\n")).start()
    schema.write_text(text[:end] + schema_entry + text[end:])
    (copy / "papers" / "bertslow.yaml").write_text(paper)
    return copy


def run(project: Path, command: list[str]) -> subprocess.CompletedProcess:
    """`command` in the copy, which imports its own `nmtbench` (PYTHONPATH first)."""
    env = {**os.environ, "PYTHONPATH": str(project), "NO_MKDOCS_2_WARNING": "1"}
    if command[0] in ("snakemake", "python", "mkdocs"):
        command = [sys.executable, "-m", *([] if command[0] == "python" else [command[0]]),
                   *command[1:]]
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True,
                          timeout=900)


def test_the_worked_example_adds_a_method_in_three_places(project, tmp_path):
    # the three pieces, and not one other file: no override, no regenerated reference
    paths = project_files() + sorted(PIECES)
    original, copy = files(ROOT, paths), files(project, paths)
    assert {path for path in original.keys() | copy.keys()
            if original.get(path) != copy.get(path)} == PIECES

    # the method contract finds it through its schema entry alone (one case per decoding)
    contract = run(project, ["python", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
                             "tests/parts/test_method_contract.py", "-k", "bert-slow"])
    assert contract.returncode == 0, contract.stdout[-3000:]
    assert re.search(r"\b(\d+) passed", contract.stdout).group(1) != "0"

    # the site builds, its configuration reference (made by the build) listing the method
    site = run(project, ["mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")])
    assert site.returncode == 0, site.stderr[-3000:]
    reference = (tmp_path / "site" / "reference" / "configuration" / "index.html").read_text()
    assert 'id="bert-slow"' in reference and "bert_lr_scale" in reference

    _, _, command = worked_example()
    assert not any("overrides" in arg for arg in command), command  # its BERT: the toy one
    result = run(project, command)
    assert result.returncode == 0, result.stderr[-3000:]

    tables = (project / "results" / "tables.md").read_text()
    row = re.search(r"(?m)^\| bert-init, BERT 0\.05x \|(.*)$", tables)
    assert row, tables[-2000:]
    assert re.search(r"\d+\.\d+", row.group(1)), row.group(0)  # a BLEU, not "missing"

    # its BERT's rate ramps from 0 to 0.05 of the rest's over the first half of training
    (log,) = [config.parent / "train_log.jsonl"
              for config in (project / "results" / "runs").rglob("config.json")
              if json.loads(config.read_text())["experiment"].get("method") == "bert-slow"]
    ratios = [r["lr_bert"] / r["lr_nmt"] for r in map(json.loads, log.read_text().splitlines())
              if "lr_bert" in r and r["lr_nmt"] > 0]
    assert ratios[0] < 0.05 and ratios == sorted(ratios)
    assert ratios[-1] == pytest.approx(0.05)
