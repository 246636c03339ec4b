"""The --use-conda environments: every rule names one, their pins are the lock's, and the light
text environment really holds everything the commands run in it import."""

import inspect
import re
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import yaml
from conda_stand_in import environment_with_conda
from packaging.requirements import Requirement

from nmtbench import cli

ROOT = Path(__file__).resolve().parents[2]
LOCK = {Requirement(line).name.lower().replace("_", "-"): line.split("==")[1].strip()
        for line in (ROOT / "requirements.lock").read_text().splitlines()
        if line and not line.startswith("#")}
# what only the process that runs snakemake needs, not the jobs
WORKFLOW_ONLY = {"snakemake", "snakemake-executor-plugin-slurm"}


def pins(env: str) -> dict[str, str]:
    spec = yaml.safe_load((ROOT / "envs" / f"{env}.yaml").read_text())
    pip = next(d["pip"] for d in spec["dependencies"] if isinstance(d, dict))
    return {Requirement(p).name.lower().replace("_", "-"): p.split("==")[1] for p in pip}


def rule_envs() -> dict[str, tuple[str, str | None]]:
    """rule -> (environment, the `nmtbench` command its shell runs)."""
    found = {}
    for path in (ROOT / "rules").glob("*.smk"):
        blocks = re.split(r"^\s*rule(?: (\w+))?:\s*$", path.read_text(), flags=re.M)
        for name, body in zip(blocks[1::2], blocks[2::2], strict=True):
            env = re.search(r'conda:\s*"\.\./envs/(\w+)\.yaml"', body)
            command = re.search(r"nmtbench (\w+)", body)
            # a rule made in a loop (a download rule per source, a toyworld or prepare rule per
            # set of optional splits) goes by the command it runs
            found[name or command.group(1)] = (env and env.group(1), command and command.group(1))
    return found


def closure(names: set[str]) -> set[str]:
    """The distributions pip installs for `names` (their requirements, recursively)."""
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for requirement in metadata.requires(name) or []:
            parsed = Requirement(requirement)
            if parsed.marker is None or parsed.marker.evaluate({"extra": ""}):
                todo.append(parsed.name.lower().replace("_", "-"))
    return seen


def test_environments_pin_the_locked_versions_of_the_projects_dependencies():
    models, text = pins("models"), pins("text")
    for env in (models, text):
        assert env == {name: LOCK[name] for name in env}
    declared = {Requirement(r).name.lower().replace("_", "-")
                for r in metadata.requires("nmtbench") if "extra ==" not in r}
    assert set(models) == declared - WORKFLOW_ONLY  # the whole stack, nothing extra
    assert set(text) < set(models)


def test_every_rule_runs_in_an_environment():
    envs = rule_envs()
    assert {"train", "decode", "evaluate", "prepare", "download", "report"} <= set(envs)
    for rule, (env, _) in envs.items():
        assert env in {"models", "text"}, rule


def test_the_text_environment_holds_what_its_commands_import():
    """Each command run in the text environment imports with every package outside that
    environment (torch, transformers, pandas, ...) made unimportable."""
    commands = {command for env, command in rule_envs().values() if env == "text"}
    commands.discard(None)  # reverse_dataset copies files (cp), no nmtbench command
    assert commands == {"download", "prepare", "monolingual", "evaluate", "bootstrap",
                        "buckets"}
    modules = {module for command in commands
               for module in re.findall(r"from (nmtbench\.[\w.]+) import",
                                        inspect.getsource(getattr(cli, f"cmd_{command}")))}
    assert len(modules) >= 4
    available = closure(set(pins("text")))
    missing = closure(set(pins("models"))) - available
    top_level = {name for module, dists in metadata.packages_distributions().items()
                 for name in [module] if {d.lower().replace("_", "-") for d in dists} & missing}
    assert {"torch", "transformers", "pandas", "yaml"} <= top_level
    script = textwrap.dedent(f"""
        import importlib, sys
        blocked = {sorted(top_level)!r}
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in blocked:
                    raise ImportError(f"{{name}} is not in envs/text.yaml")
        sys.meta_path.insert(0, Block())
        for module in ["nmtbench.cli", *{sorted(modules)!r}]:
            importlib.import_module(module)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_dry_run_with_use_conda_plans_both_environments(tmp_path):
    """`snakemake -n --use-conda` on the default config (with conda's stand-in where the
    machine has no conda)."""
    env = environment_with_conda(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--use-conda", "--cores", "2",
         "--snakefile", str(ROOT / "Snakefile"), "--directory", str(tmp_path / "work")],
        capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    for name in ("models", "text"):  # text: the evaluate and bootstrap jobs
        assert re.search(rf"Conda environment \S*envs/{name}\.yaml will be created",
                         result.stdout), name
