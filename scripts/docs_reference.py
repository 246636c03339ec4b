"""MkDocs hook (mkdocs.yml `hooks:`): the site's references are made by the build, so that
they cannot drift from the code: reference/configuration.md from config/schema.yaml (what the
workflow checks a config against), reference/cli.md from `python -m nmtbench`'s argument
parser, and reference/recipes.md from `python -m nmtbench recipe` on config/paper.yaml (each
paper run's recipe beside its paper's). None is committed.

A script rather than a module of the package: it is the repository's tooling, like the site
(it reads config/), and nothing that runs an experiment needs it. Run by hand, it writes both
pages into docs/reference/ (ignored by git) to read them without building the site; the build
never publishes those copies, it makes its own.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from nmtbench import cli
from nmtbench.workflow import recipes
from nmtbench.workflow.config import check, load_config
from nmtbench.workflow.method_registry import (
    CHECKPOINT_SIDE,
    NOT_BUILT,
    PARENT_RUN,
    SOFT_TARGETS,
    method_infos,
)
from nmtbench.workflow.yaml_reader import load_yaml

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("reference/configuration.md", "reference/cli.md", "reference/recipes.md")
COLUMNS = ("Key", "Type", "Default", "Allowed", "Description")
# what an entry of a mapping is called in a dotted key (datasets.<dataset>.kind)
JSON_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number", type(None): "null"}
PLACEHOLDERS = {"datasets": "<dataset>", "sources": "<source>", "files": "<file>",
                "experiments": "<experiment>", "resources": "<job>"}


def header(source: str) -> str:
    return (f"<!-- Made by the site's build (scripts/docs_reference.py) from {source}: edit "
            "that, not this page. -->\n")


def cell(text: str) -> str:
    """Text for a table cell: one line, Markdown's special characters escaped outside code
    spans (a schema's `<paper>` is text, not an HTML tag)."""
    parts = re.split(r"(`[^`]*`)", " ".join(text.split()))
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"([\\*|\[\]])", r"\\\1", parts[i]).replace("<", "&lt;")
    return "".join(parts)


def code(value: Any) -> str:
    return f"`{json.dumps(value)}`" if not isinstance(value, str) else f"`{value}`"


def table(rows: list[tuple[str, ...]], columns: tuple[str, ...] = COLUMNS) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


class Schema:
    """config/schema.yaml read as a reader of the config needs it: per key its type, default,
    allowed values and meaning, references to `$defs` resolved."""

    def __init__(self, definitions: dict[str, Any]):
        self.defs = definitions

    def resolve(self, spec: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        """`spec` with its `$ref` merged in (its own keys win), and the definition's name when
        that is a shared scalar type (`name`, `seed`, `lr`), documented once at the end."""
        if "$ref" not in spec:
            return spec, None
        name = spec["$ref"].removeprefix("#/$defs/")
        target = self.defs[name]
        merged = {**target, **{k: v for k, v in spec.items() if k != "$ref"}}
        return merged, (name if target.get("type") != "object" else None)

    def type_of(self, spec: dict[str, Any]) -> str:
        spec, shared = self.resolve(spec)
        if shared:
            return f"[{shared}](#{shared})"
        if "enum" in spec:
            return " or ".join(sorted({JSON_TYPES[type(v)] for v in spec["enum"]}))
        if alternatives := spec.get("anyOf") or spec.get("oneOf"):
            return " or ".join(dict.fromkeys(self.type_of(a) for a in alternatives))
        kind = spec.get("type")
        if kind == "array":
            return f"list of {self.type_of(spec.get('items', {}))}"
        if isinstance(spec.get("additionalProperties"), dict):
            return f"mapping of {self.type_of(spec['additionalProperties'])}"
        if isinstance(kind, list):
            return " or ".join(kind)
        return kind or ("object" if "properties" in spec else "any")

    def allowed(self, spec: dict[str, Any]) -> str:
        spec, shared = self.resolve(spec)
        if shared:
            return ""
        found = []
        if "enum" in spec:
            found.append("one of " + ", ".join(code(v) for v in spec["enum"]))
        if alternatives := spec.get("anyOf") or spec.get("oneOf"):
            found.append("; or ".join(self.allowed(a) or ("`null`" if a.get("type") == "null"
                                                          else f"any {self.type_of(a)}")
                                      for a in alternatives))
        lower = next((f"{sign} {spec[key]}" for key, sign in (("minimum", "≥"),
                                                              ("exclusiveMinimum", ">"))
                      if key in spec), None)
        upper = next((f"{sign} {spec[key]}" for key, sign in (("maximum", "≤"),
                                                              ("exclusiveMaximum", "<"))
                      if key in spec), None)
        if lower and upper and "minimum" in spec and "maximum" in spec:
            found.append(f"{spec['minimum']} to {spec['maximum']}")
        elif lower or upper:
            found.append(" and ".join(filter(None, (lower, upper))))
        if "multipleOf" in spec:
            found.append(f"a multiple of {spec['multipleOf']}")
        if "pattern" in spec:
            found.append(f"matches `{spec['pattern']}`")
        if spec.get("minLength"):
            found.append("not empty")
        if "minItems" in spec:
            count = spec["minItems"]
            found.append(f"{count} items" if spec.get("maxItems") == count
                         else f"at least {count} item{'s' * (count != 1)}")
        if count := spec.get("minProperties"):
            found.append(f"at least {count} entr{'ies' if count != 1 else 'y'}")
        if spec.get("uniqueItems"):
            found.append("no repeats")
        if refused := spec.get("propertyNames", {}).get("not", {}).get("enum"):
            found.append("keys other than " + ", ".join(code(v) for v in refused))
        for inner, what in (("items", "each"), ("additionalProperties", "values")):
            if isinstance(spec.get(inner), dict) and (text := self.allowed(spec[inner])):
                found.append(f"{what} {text}")
        return "; ".join(found)

    def description(self, spec: dict[str, Any]) -> str:
        """Its own description, else (not for a shared type's) its definition's, and what
        the schema's `x-` marks say of it."""
        resolved, shared = self.resolve(spec)
        text = spec.get("description", "") if shared else resolved.get("description", "")
        notes = []
        if side := spec.get(CHECKPOINT_SIDE):
            notes.append(f"a pre-trained checkpoint; unset: the dataset's `checkpoints.{side}`, "
                         f"else the one BERT of `pretraining` on the dataset's {side} side")
        if spec.get(PARENT_RUN):
            notes.append("names another run, trained first, whose checkpoint this run loads")
        if spec.get(SOFT_TARGETS):
            notes.append("names a teacher run, whose soft targets are written first")
        if values := spec.get(NOT_BUILT):
            notes.append("not built: " + ", ".join(code(v) for v in values))
        return cell(text) + "".join(f" *({cell(note)})*" for note in notes)

    def row(self, key: str, spec: dict[str, Any], required: bool) -> tuple[str, ...]:
        default = code(spec["default"]) if "default" in spec else "required" if required else ""
        return (f"`{key}`", self.type_of(spec), default, cell(self.allowed(spec)),
                self.description(spec))

    def rows(self, schema: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, ...]]:
        """A row per key of an object schema, nested objects' keys dotted below their own."""
        required = set(schema.get("required", []))
        for key, spec in schema.get("properties", {}).items():
            yield self.row(prefix + key, spec, key in required)
            resolved, _ = self.resolve(spec)
            entry = resolved.get("additionalProperties")
            if "properties" in resolved:
                yield from self.rows(resolved, f"{prefix}{key}.")
            elif isinstance(entry, dict) and "properties" in entry:
                yield from self.rows(entry, f"{prefix}{key}.{PLACEHOLDERS.get(key, '<name>')}.")

    def requirements(self, schema: dict[str, Any]) -> str:
        """An object's required keys, those its `if`/`then`/`else` rules add included."""
        def keys(rule: dict[str, Any]) -> str:
            return ", ".join(f"`{k}`" for k in rule.get("required", []))

        found = [f"Required: {keys(schema)}"] if schema.get("required") else []
        for rule in [schema, *schema.get("allOf", [])]:
            if "if" not in rule:
                continue
            (key, condition), = rule["if"]["properties"].items()
            found.append(f"with `{key}: {condition['const']}`, also {keys(rule['then'])}")
            if "else" in rule:
                found.append(f"otherwise {keys(rule['else'])}")
        return "; ".join(found) + "." if found else ""

    def section(self, anchor: str, title: str, intro: str, schema: dict[str, Any]) -> str:
        text = [f"## {title} {{#{anchor}}}", intro]
        if requirements := self.requirements(schema):
            text.append(requirements)
        return "\n\n".join(text) + "\n\n" + table(list(self.rows(schema)))


def configuration_page(schema: dict[str, Any]) -> str:
    s = Schema(schema["$defs"])
    top = schema["properties"]
    entry = {key: top[key]["additionalProperties"]
             for key in ("datasets", "pretraining", "trimmed", "sources")}
    sections = {  # anchor -> (title, intro, the object whose keys it lists)
        "datasets": ("`datasets.<dataset>`", "The datasets runs train on, by name.",
                     entry["datasets"]),
        "pretraining": ("`pretraining.<name>`", cell(top["pretraining"]["description"]),
                        entry["pretraining"]),
        "trimmed": ("`trimmed.<name>`", cell(top["trimmed"]["description"]), entry["trimmed"]),
        "sources": ("`sources.<source>`", cell(top["sources"]["description"]), entry["sources"]),
        "trainer": ("Trainer settings: `defaults`, `experiments.<experiment>`",
                    cell(f"`defaults`: {top['defaults']['description']} `experiments`: "
                         f"{top['experiments']['description']} {s.defs['trainer']['description']}")
                    + " An experiment also takes its [method](#methods)'s settings.",
                    s.defs["trainer"]),
        "decode": ("`decode`", cell(top["decode"]["description"]) + " An experiment's `decode` "
                   "overrides it.", s.defs["decode"]),
        "analysis": ("`analysis`", "The statistics behind the tables.", top["analysis"]),
        "resources": ("`resources.<job>`", "What each kind of job asks the scheduler for: "
                      "threads, memory (MB), run time (minutes) and GPUs; the jobs are "
                      + ", ".join(f"`{job}`" for job in top["resources"]["properties"]) + ".",
                      s.defs["resources"]),
    }
    see = {**{key: key for key in sections}, "defaults": "trainer", "experiments": "trainer"}
    top_rows = []
    for key, spec in top.items():
        *row, description = s.row(key, spec, key in schema["required"])
        top_rows.append((*row, description + (f" See [{key}](#{see[key]})." if key in see
                                              else "")))
    parts = [
        header("config/schema.yaml"),
        "# Configuration reference\n",
        "Every key of the workflow's configuration, as `config/schema.yaml` declares it: "
        "`config/config.yaml`, the files `--configfile` merges over it, and the experiments of "
        "`papers/*.yaml`. The workflow checks a config against the schema before it plans, and "
        "`python -m nmtbench check` does the same. A key without a default here takes the "
        "value its description names, or is left out.\n",
        "## Top-level keys\n",
        table(top_rows),
    ]
    parts += [s.section(anchor, *section) for anchor, section in sections.items()]
    parts.append(methods_section(s))
    parts.append("## Shared types\n")
    for name in ("name", "seed", "lr"):
        spec = s.defs[name]
        parts.append(f"### {name}\n\n{cell(spec['description'])}\n\n"
                     + table([(spec["type"], cell(s.allowed(spec)))], ("Type", "Allowed")))
    return "\n".join(parts)


def methods_section(s: Schema) -> str:
    parts = ["## Methods\n",
             "An experiment's `method` is one of these; its settings are the method's below and "
             "the [trainer settings](#trainer). A method's class (`x-class`) is made from its "
             "entry here: adding a setting means adding it to `config/schema.yaml`.\n"]
    for name, info in method_infos(s.defs).items():
        schema = s.defs["methods"][name]
        lines = [f"Class `{info.cls}`.",
                 "Decoding: " + ", ".join(f"`{d}`" for d in info.decodings)
                 + (" (the first is the default)." if len(info.decodings) > 1 else "."),
                 "Loss terms (`loss_weights`' keys): "
                 + ", ".join(f"`{t}`" for t in info.loss_terms) + "."]
        lines += [f"Refuses the trainer setting `{key}`: {cell(why)}."
                  for key, why in info.unread.items()]
        parts.append(f"### {name}\n\n" + " ".join(lines) + "\n\n"
                     + table(list(s.rows(schema))))
    return "\n".join(parts)


def cli_page(parser: argparse.ArgumentParser) -> str:
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in commands._choices_actions}
    names = sorted(commands.choices)
    parts = [header("nmtbench/cli.py's argument parser"), "# Command-line reference\n",
             f"{cell(parser.description or '')} Each command's options are below, as "
             f"`{parser.prog} <command> --help` prints them.\n",
             table([(f"[`{name}`](#{name})", cell(helps[name] or "")) for name in names],
                   ("Command", "What it does"))]
    for name in names:
        command = commands.choices[name]
        text = [f"## {name}", cell(helps[name] or "")]
        if command.description:
            text.append(cell(command.description))
        rows = [argument_row(action) for action in command._actions
                if not isinstance(action, argparse._HelpAction)]
        parts.append("\n\n".join(text) + "\n\n"
                     + table(rows, ("Argument", "Default", "Description")))
    return "\n".join(parts)


def argument_row(action: argparse.Action) -> tuple[str, str, str]:
    """An argument as `--help` shows it (its options and metavar), its default and its help."""
    metavar = action.metavar or (
        "{" + ",".join(map(str, action.choices)) + "}" if action.choices
        else action.dest.upper() if action.option_strings else action.dest)
    forms = {None: metavar, "?": f"[{metavar}]", "*": f"[{metavar} ...]",
             "+": f"{metavar} [{metavar} ...]"}
    takes = "" if action.nargs == 0 else forms.get(action.nargs, metavar)
    usage = ", ".join(f"{option} {takes}".strip() for option in action.option_strings) or takes
    if action.required or not action.option_strings:
        default = "required"
    elif action.nargs == 0:  # a flag
        default = "on" if action.default else "off"
    elif action.default in (None, []):
        default = ""
    else:
        default = code(action.default)
    params = dict(vars(action))
    if action.choices:
        params["choices"] = ", ".join(map(str, action.choices))
    return f"`{usage}`", default, cell((action.help or "") % params)


def pages(root: Path = ROOT) -> dict[str, str]:
    """Each reference's path in the site -> its Markdown: from `root`'s config/schema.yaml and
    the argument parser of the `nmtbench` imported."""
    schema = load_yaml((root / "config" / "schema.yaml").read_text(encoding="utf-8"))
    return dict(zip(PAGES, (configuration_page(schema), cli_page(cli.parser()),
                            recipes_page(root)), strict=True))


def recipes_page(root: Path) -> str:
    """Each paper run of config/paper.yaml: the recipe it trains and decodes with, beside the
    paper's, and the reason for every difference."""
    config = load_config([root / "config" / "config.yaml", root / "config" / "paper.yaml"])
    plan = check(config, root / "config" / "schema.yaml", root / "papers")
    return (header("papers/*.yaml `recipes` and config/paper.yaml") + "\n# Paper recipes\n\n"
            "What `python -m nmtbench recipe --configfile config/paper.yaml` prints: per paper, "
            "each run's tokens (or sentences) per update (max_tokens x update_freq x the train "
            "rule's GPUs), training length, stopping, learning rate and decoding, beside what "
            "the paper or its authors' code states, with its source; every difference has the "
            "reason the config gives (`recipe_deviations`).\n\n" + recipes.markdown(plan))


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the references to the site, made now; a copy in docs/ (`main`'s) is left out."""
    for uri, content in pages(Path(config.config_file_path).parent).items():
        if (copy := files.get_file_from_path(uri)) is not None:
            files.remove(copy)
        files.append(File.generated(config, uri, content=content))
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the site's generated references into "
                                                 "docs/reference/ (ignored by git), to read "
                                                 "them without building the site.")
    parser.parse_args(argv)
    for uri, text in pages().items():
        path = ROOT / "docs" / uri
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
