"""The workflow passes `snakemake --lint`, quotes every value its shell commands hold, and
the Python code passes ruff."""

import ast
import string
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_snakemake_lint_is_clean():
    result = subprocess.run([sys.executable, "-m", "snakemake", "--lint"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Lints for" not in result.stdout + result.stderr


def shell_commands(path: Path) -> list[tuple[int, str]]:
    """Each `shell:` of a rules file: its line number and the command its string literals
    make (written on the `shell:` line or indented below it)."""
    lines = path.read_text().splitlines()
    found = []
    for number, line in enumerate(lines, start=1):
        head, sep, rest = line.strip().partition("shell:")
        if head or not sep:
            continue
        body = [rest]
        indent = len(line) - len(line.lstrip())
        for following in lines[number:]:
            if following.strip() and len(following) - len(following.lstrip()) <= indent:
                break
            body.append(following)
        found.append((number, ast.literal_eval("(" + "\n".join(body) + ")")))
    return found


def test_every_value_in_every_shell_command_is_quoted():
    """Every `{...}` a rule's shell command formats is shell-quoted (`:q`): a config value, a
    wildcard or a path never reaches the shell as code. Options that are several arguments
    come as lists, which `:q` quotes one by one; there are no exceptions."""
    commands = [(f"{path.name}:{number}", command)
                for path in sorted((ROOT / "rules").glob("*.smk"))
                for number, command in shell_commands(path)]
    assert len(commands) >= 15  # every rule with a shell: (the parser found them)
    unquoted = [(where, field) for where, command in commands
                for _, field, spec, _ in string.Formatter().parse(command)
                if field is not None and not (spec or "").endswith("q")]
    assert unquoted == []


def test_ruff_is_clean():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout
