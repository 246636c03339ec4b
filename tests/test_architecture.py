"""The package's architecture as a contract over its source, read without importing a module:
the subpackages form layers, each importing only from itself and the layers below it; the
layers Snakemake loads to plan the DAG never import torch or transformers at module level,
however indirectly (a model-building function may import them where it runs); the core
reaches a method only through the registry; and no class or function grows past the size a
reader can hold at once."""

import ast
import functools
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "nmtbench"

# Bottom to top. A module may import from its own layer and the layers before it.
LAYERS = {
    "base": ("nmtbench", "nmtbench.errors", "nmtbench.fileio", "nmtbench.records",
             "nmtbench.run_paths", "nmtbench.layout", "nmtbench.provenance", "nmtbench.devices"),
    "data": ("nmtbench.data",),
    "workflow": ("nmtbench.workflow",),
    "report": ("nmtbench.report",),
    "parts": ("nmtbench.parts",),
    "methods": ("nmtbench.methods",),
    "evaluation": ("nmtbench.evaluation",),
    "training": ("nmtbench.training",),
    "export": ("nmtbench.export",),
    "cli": ("nmtbench.cli", "nmtbench.__main__"),
}
TORCH_FREE = ("base", "data", "workflow", "report", "cli")
HEAVY = ("torch", "transformers", "tokenizers")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


@functools.cache
def source_of(module: str) -> str:
    return MODULES[module].read_text()


def layer_of(module: str) -> str:
    for layer, prefixes in LAYERS.items():
        # "nmtbench" is the package's own __init__ (its subpackages have layers of their own)
        if any(module == p or (p != "nmtbench" and module.startswith(p + ".")) for p in prefixes):
            return layer
    raise AssertionError(f"{module} belongs to no layer: add it to LAYERS")


def imported_literal(node: ast.AST) -> str | None:
    """The module that a call `import_module("x")` (also as `importlib.import_module`) or
    `__import__("x")` loads, when a literal names it: such a call imports as `import x` does."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
        node.func, "id", None)
    first = node.args[0]
    if (called in ("import_module", "__import__") and isinstance(first, ast.Constant)
            and isinstance(first.value, str)):
        return first.value
    return None


def imported_names(node: ast.AST) -> list[str]:
    """What one statement or call imports (a `from x import y` counts x and x.y, whichever
    is a module)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module:
        return [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    literal = imported_literal(node)
    return [literal] if literal else []


def imports(source: str, module_level: bool) -> set[str]:
    """What Python `source` imports; blocks under `if TYPE_CHECKING:` never run and are left
    out, and with `module_level` so are imports inside functions and lambdas."""
    found = set()

    def visit(nodes):
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            found.update(imported_names(node))
            if module_level and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                  ast.Lambda)):
                continue
            visit(ast.iter_child_nodes(node))

    visit(ast.parse(source).body)
    return found


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_only_from_its_layer_and_below(module):
    order = list(LAYERS)
    mine = order.index(layer_of(module))
    above = sorted(name for name in imports(source_of(module), module_level=False)
                   if name in MODULES and order.index(layer_of(name)) > mine)
    assert not above, (f"{module} ({layer_of(module)}) imports from layers above it: "
                       + ", ".join(f"{name} ({layer_of(name)})" for name in above))


def heavy_chain(module: str, seen: set[str], source: str | None = None) -> list[str] | None:
    """The chain of module-level imports from `module` (read from `source` when given, else
    from its file) to a heavy library, if there is one."""
    seen.add(module)
    found = imports(source_of(module) if source is None else source, module_level=True)
    for name in sorted(found):
        if name.split(".")[0] in HEAVY:
            return [module, name]
    for name in sorted(found & MODULES.keys() - seen):
        chain = heavy_chain(name, seen)
        if chain:
            return [module, *chain]
    return None


@pytest.mark.parametrize("module", sorted(m for m in MODULES if layer_of(m) in TORCH_FREE))
def test_the_planning_layers_load_neither_torch_nor_transformers(module):
    chain = heavy_chain(module, set())
    assert chain is None, " -> ".join(chain)


def test_every_module_is_in_a_layer_and_the_test_can_fail():
    assert {layer_of(module) for module in MODULES} == set(LAYERS)
    assert heavy_chain("nmtbench.training.trainer", set())[-1].split(".")[0] == "torch"


def test_an_import_module_literal_loads_torch_like_an_import():
    """Importing by a literal through `importlib` loads the module all the same, directly or
    through a torch-heavy module of ours; a name held in a variable, or a call inside a
    function (`get_method`'s), loads nothing when the module is imported."""
    assert heavy_chain("synthetic", set(), "import importlib\n"
                       "importlib.import_module('torch')\n") == ["synthetic", "torch"]
    assert heavy_chain("synthetic", set(), "__import__('transformers')\n") == [
        "synthetic", "transformers"]
    chain = heavy_chain("synthetic", set(), "from importlib import import_module\n"
                        "TRAINER = import_module('nmtbench.training.trainer')\n")
    assert chain[:2] == ["synthetic", "nmtbench.training.trainer"]
    assert chain[-1].split(".")[0] == "torch"
    assert heavy_chain("synthetic", set(), "from importlib import import_module\n"
                       "def load(name):\n    return import_module('torch')\n"
                       "import_module(NAME)\n") is None


# --- methods: the core reaches them through the registry alone --------------------------------

# Where the core may name a method after all: (module or file, what it names) -> why.
ALLOWED = {
    ("nmtbench.export.fsmt", "nmtbench.methods.transformer"):
        "Hugging Face's FSMT is exactly the Transformer baseline: exporting reads its parts",
}
RULE_FILES = {str(path.relative_to(ROOT)): path
              for path in [*sorted((ROOT / "rules").glob("*.smk")), ROOT / "Snakefile"]}


@functools.cache
def method_names() -> frozenset[str]:
    """Registered method names and the modules of the methods package."""
    import yaml

    schema = yaml.safe_load((ROOT / "config" / "schema.yaml").read_text())
    modules = {name.rsplit(".", 1)[1] for name in MODULES
               if name.startswith("nmtbench.methods.")}
    return frozenset(schema["$defs"]["methods"]) | modules


def names_in(text: str, names: frozenset[str]) -> list[str]:
    """The method names in `text` as whole words, or starting a hyphenated one (an experiment
    named after its method, `abnet-top6`): `bert-kd-teacher` is that method, not `bert-kd`
    (the longest name is tried first), and `transformers` is no `transformer`."""
    words = "|".join(re.escape(name) for name in sorted(names, key=lambda n: (-len(n), n)))
    return re.findall(rf"(?<![\w-])(?:{words})(?!\w)", text)


def method_module(imported: str, names: frozenset[str]) -> str | None:
    """The method's module that importing `imported` loads, if any (not the registry's)."""
    parts = imported.split(".")
    if parts[:2] == ["nmtbench", "methods"] and len(parts) > 2 and parts[2] in names:
        return ".".join(parts[:3])
    return None


def named_methods(source: str, names: frozenset[str]) -> list[tuple[str, str]]:
    """Where Python `source` reaches a method other than through the registry, as (what it
    names, where): an import of a method's module, in a statement or by an `import_module`
    literal, and a method's name as a word of any string but a docstring (f-strings too)."""
    tree = ast.parse(source)
    skipped = {id(node.body[0].value) for node in ast.walk(tree)
               if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                    ast.AsyncFunctionDef))
               and node.body and isinstance(node.body[0], ast.Expr)}
    skipped |= {id(node.args[0]) for node in ast.walk(tree) if imported_literal(node)}
    found = []
    for node in ast.walk(tree):
        loaded = {method_module(name, names) for name in imported_names(node)} - {None}
        found += [(module, f"line {node.lineno}: imports {module}") for module in sorted(loaded)]
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in skipped):
            found += [(name, f"line {node.lineno}: names {name!r} in {node.value!r}")
                      for name in names_in(node.value, names)]
    return found


def named_in_rules(text: str, names: frozenset[str]) -> list[tuple[str, str]]:
    """Where a Snakemake file names a method as a word of its code (comments left out)."""
    return [(name, f"line {token.start[0]}: names {name!r} in {token.line.strip()!r}")
            for token in tokenize.generate_tokens(io.StringIO(text).readline)
            if token.type != tokenize.COMMENT for name in names_in(token.string, names)]


def naming(where: str) -> list[tuple[str, str]]:
    """What a core module or a rule file names, by module name or path from the root."""
    if where in MODULES:
        return named_methods(source_of(where), method_names())
    return named_in_rules(RULE_FILES[where].read_text(), method_names())


@pytest.mark.parametrize("where", [*sorted(m for m in MODULES if layer_of(m) != "methods"),
                                   *RULE_FILES])
def test_no_core_module_names_a_method(where):
    """A method owns everything about itself: the core and the workflow reach methods through
    the registry (`get_method`) and the contract, never by a method's module or name."""
    named = [line for what, line in naming(where) if (where, what) not in ALLOWED]
    assert not named, f"{where} names methods:\n" + "\n".join(named)


def test_every_allowed_naming_is_still_there():
    """An entry that outlived its reason would let a new naming in unseen."""
    for where, what in ALLOWED:
        assert what in {named for named, _ in naming(where)}, (where, what)


@pytest.mark.parametrize("source, named", [
    ("import nmtbench.methods.abnet\n", "nmtbench.methods.abnet"),
    ("from nmtbench.methods import bert_kd, get_method\n", "nmtbench.methods.bert_kd"),
    ("from nmtbench.methods.cmlm import CMLM\n", "nmtbench.methods.cmlm"),
    ("import importlib\nimportlib.import_module('nmtbench.methods.rnn')\n",
     "nmtbench.methods.rnn"),
    ("def f(x):\n    return f'{x} abnet'\n", "abnet"),
    ("MODES = {'bert-kd-teacher': 2}\n", "bert-kd-teacher"),
    ("HELP = 'the teacher of bert-kd, when it runs'\n", "bert-kd"),
    ("def f(x):\n    return f'abnet-{x}'\n", "abnet"),  # an experiment named after it
])
def test_naming_a_method_is_found(source, named):
    assert [what for what, _ in named_methods(source, method_names())] == [named]


def test_docstrings_the_registry_and_longer_words_name_no_method():
    source = ('"""Like the transformer method."""\n'
              "from nmtbench.methods import get_method\n"
              "import transformers\nLABEL = 'transformers, abnets, cmlm2'\n")
    assert named_methods(source, method_names()) == []


def test_a_rule_naming_a_method_is_found_but_not_a_comment():
    rule = ('# deep-fusion gets its own rule\nrule fuse:\n'
            '    params: lm=lambda w: "deep-fusion" in w.run\n')
    assert named_in_rules(rule, method_names()) == [
        ("deep-fusion", "line 3: names 'deep-fusion' in "
                        "'params: lm=lambda w: \"deep-fusion\" in w.run'")]


# --- size: a class or a function a reader can hold at once ----------------------------------

MAX_CLASS_LINES, MAX_FUNCTION_LINES = 200, 60


def oversized(source: str) -> list[str]:
    """Classes over MAX_CLASS_LINES and functions over MAX_FUNCTION_LINES, each counted from
    its `class` or `def` line to its last (decorators left out)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            limit = MAX_CLASS_LINES
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            limit = MAX_FUNCTION_LINES
        else:
            continue
        lines = node.end_lineno - node.lineno + 1
        if lines > limit:
            found.append(f"{node.name} (line {node.lineno}): {lines} lines, over {limit}")
    return found


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_class_or_function_is_too_long(module):
    """Grown past these, a class or a function asks to be split before it is read."""
    found = oversized(source_of(module))
    assert not found, f"{module}: " + "; ".join(found)


def block(header: str, lines: int) -> str:
    """`header` and body lines after it, `lines` lines in all."""
    return header + "\n" + "    x = 1\n" * (lines - 1)


def test_the_size_limits_can_fail():
    assert oversized(block("class Big:", 201)) == ["Big (line 1): 201 lines, over 200"]
    assert oversized(block("def big():", 61)) == ["big (line 1): 61 lines, over 60"]
    assert not oversized(block("class Fits:", 200))
    assert not oversized("@functools.cache\n" + block("def fits():", 60))
