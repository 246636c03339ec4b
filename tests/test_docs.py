"""The documentation site: the build makes the references from the schema and the parser as they
are now, and `mkdocs build --strict` passes with them and the results pages rendered from
results/, while a broken link anywhere still fails it."""

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from mkdocs.config import load_config
from mkdocs.structure.files import File, Files

from nmtbench import cli

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


def test_the_configuration_reference_is_the_schema_it_is_made_from():
    """Every top-level key and every method's every setting has its row, the checkpoint roles
    say what fills them; a setting added to the schema is on the page."""
    reference = script("docs_reference")
    schema = yaml.safe_load((ROOT / "config" / "schema.yaml").read_text())
    page = reference.pages()["reference/configuration.md"]
    assert page == reference.configuration_page(schema)
    assert all(f"\n| `{key}` |" in page for key in schema["properties"])
    for name, method in schema["$defs"]["methods"].items():
        section = page.split(f"\n### {name}\n", 1)[1].split("\n#", 1)[0]
        assert all(f"\n| `{key}` |" in section for key in method["properties"]), name
    assert ("unset: the dataset's `checkpoints.src`, else the one BERT of `pretraining` on "
            "the dataset's src side") in page
    schema["$defs"]["methods"]["bert-init"]["properties"]["made_up"] = {
        "type": "integer", "default": 3, "description": "A setting added now."}
    assert "| `made_up` | integer | `3` |  | A setting added now. |" in (
        reference.configuration_page(schema))


def test_the_cli_reference_is_the_parser_it_is_made_from():
    reference = script("docs_reference")
    parser = cli.parser()
    page = reference.pages()["reference/cli.md"]
    assert page == reference.cli_page(parser)
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in commands.choices.items():
        section = page.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        assert all(option in section for action in command._actions
                   if not isinstance(action, argparse._HelpAction)
                   for option in action.option_strings), name


def test_the_build_adds_the_references_made_now_over_any_copy_in_docs(tmp_path):
    """`python scripts/docs_reference.py` may have left copies in docs/reference/ (ignored by
    git): the site never publishes them. Run through mkdocs.yml's hooks, as a build runs them."""
    reference = script("docs_reference")
    config = load_config(config_file=str(ROOT / "mkdocs.yml"))
    copy = tmp_path / "docs" / "reference" / "cli.md"
    copy.parent.mkdir(parents=True)
    copy.write_text("an old copy\n")
    stale = File("reference/cli.md", src_dir=str(tmp_path / "docs"),
                 dest_dir=str(tmp_path / "site"), use_directory_urls=True)
    files = config.plugins.on_files(Files([stale]), config=config)
    assert {uri: files.get_file_from_path(uri).content_string
            for uri in reference.PAGES} == reference.pages()


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
    # the references, made by the build: a section per method and per command
    schema = yaml.safe_load((ROOT / "config" / "schema.yaml").read_text())
    configuration = (tmp_path / "site" / "reference" / "configuration" / "index.html").read_text()
    assert all(f'id="{name}"' in configuration for name in schema["$defs"]["methods"])
    commands = script("docs_reference").cli_page(cli.parser())
    html = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert all(f'id="{name}"' in html for name in re.findall(r"(?m)^## (\S+)$", commands))


def test_a_broken_link_in_a_results_page_fails_the_build(tmp_path):
    """Only links into results/runs/ are turned into text: any other broken link fails."""
    root = tmp_path / "tree"
    root.mkdir()
    for name in ("mkdocs.yml", "docs", "scripts", "nmtbench", "config", "papers"):
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
