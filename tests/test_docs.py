"""The documentation site: the generated references are what the schema and the parser say now,
and `mkdocs build --strict` passes with the results pages rendered from results/, while a broken
link anywhere still fails it."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(root: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_the_committed_references_are_current(capsys):
    assert script("docs_reference").main(["--check"]) == 0, capsys.readouterr().err


def test_check_names_each_stale_reference_in_one_line(tmp_path, monkeypatch, capsys):
    reference = script("docs_reference")
    monkeypatch.setattr(reference, "ROOT", tmp_path)
    monkeypatch.setattr(reference, "OUT", tmp_path / "docs" / "reference")
    assert reference.main(["--check"]) == 1  # neither written yet
    assert reference.main([]) == 0
    assert reference.main(["--check"]) == 0
    capsys.readouterr()
    cli = reference.OUT / "cli.md"
    cli.write_text(cli.read_text() + "an edit by hand\n")
    assert reference.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "docs/reference/cli.md" in err and "configuration.md" not in err


def test_run_links_become_code_and_other_links_stay():
    hook = script("docs_results")
    markdown = ("| [toy/abnet/seed1](runs/toy/abnet/seed1) | ![f](figures/a.png) "
                "[claims](claims.md) [gone](runs.md) |")
    assert hook.without_run_links(markdown) == (
        "| `toy/abnet/seed1` | ![f](figures/a.png) [claims](claims.md) [gone](runs.md) |")


def test_the_site_builds_strictly_with_the_results_and_their_figures(tmp_path):
    result = build(ROOT, tmp_path / "site")
    assert result.returncode == 0, result.stderr[-3000:]
    page = tmp_path / "site" / "results" / "tables" / "index.html"
    html = page.read_text()
    images = re.findall(r'<img[^>]* src="([^"]+)"', html)
    figures = re.findall(r"!\[[^\]]*\]\((figures/[^)]+)\)", (ROOT / "results" / "tables.md")
                         .read_text())
    assert len(images) == len(figures) > 0
    assert all((page.parent / src).resolve().is_file() for src in images), images
    assert "runs/" not in " ".join(re.findall(r'href="([^"]+)"', html))
    assert (tmp_path / "site" / "results" / "gpu-profile.txt").is_file()


def test_a_broken_link_in_a_results_page_fails_the_build(tmp_path):
    """Only links into results/runs/ are turned into text: any other broken link fails."""
    root = tmp_path / "tree"
    root.mkdir()
    for name in ("mkdocs.yml", "docs", "scripts", "nmtbench"):
        (root / name).symlink_to(ROOT / name)
    # what the hook reads (a developer's results/ may also hold every run)
    shutil.copytree(ROOT / "results" / "figures", root / "results" / "figures")
    for path in [*(ROOT / "results").glob("*.md"), ROOT / "results" / "gpu-profile.txt"]:
        shutil.copy(path, root / "results")
    tables = root / "results" / "tables.md"
    tables.write_text(tables.read_text() + "\n[a run](runs/toy/x/seed1) [a table](nowhere.md)\n")
    result = build(root, tmp_path / "site")
    assert result.returncode != 0
    assert "nowhere.md" in result.stderr and "runs/toy/x" not in result.stderr
