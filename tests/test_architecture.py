"""The package's architecture as a contract over its import graph, read from the source (no
module is imported): the subpackages form layers, each importing only from itself and the layers
below it; and the layers Snakemake loads to plan the DAG never import torch or transformers at
module level, however indirectly (a model-building function may import them where it runs)."""

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "nmtbench"

# Bottom to top. A module may import from its own layer and the layers before it.
LAYERS = {
    "base": ("nmtbench", "nmtbench.errors", "nmtbench.fileio", "nmtbench.records",
             "nmtbench.run_paths", "nmtbench.layout", "nmtbench.provenance", "nmtbench.devices"),
    "data": ("nmtbench.data",),
    "workflow": ("nmtbench.workflow",),
    "report": ("nmtbench.report",),
    "models": ("nmtbench.models",),
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


def layer_of(module: str) -> str:
    for layer, prefixes in LAYERS.items():
        # "nmtbench" is the package's own __init__ (its subpackages have layers of their own)
        if any(module == p or (p != "nmtbench" and module.startswith(p + ".")) for p in prefixes):
            return layer
    raise AssertionError(f"{module} belongs to no layer: add it to LAYERS")


def imports(path: Path, module_level: bool) -> set[str]:
    """What `path` imports (a `from x import y` counts x and x.y, whichever is a module);
    blocks under `if TYPE_CHECKING:` never run and are left out, and with `module_level` so
    are imports inside functions."""
    found = set()

    def visit(nodes):
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
            if module_level and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            visit(ast.iter_child_nodes(node))

    visit(ast.parse(path.read_text()).body)
    return found


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_only_from_its_layer_and_below(module):
    order = list(LAYERS)
    mine = order.index(layer_of(module))
    above = sorted(name for name in imports(MODULES[module], module_level=False)
                   if name in MODULES and order.index(layer_of(name)) > mine)
    assert not above, (f"{module} ({layer_of(module)}) imports from layers above it: "
                       + ", ".join(f"{name} ({layer_of(name)})" for name in above))


def heavy_chain(module: str, seen: set[str]) -> list[str] | None:
    """The chain of module-level imports from `module` to a heavy library, if there is one."""
    seen.add(module)
    found = imports(MODULES[module], module_level=True)
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


# Core modules that serve one method by what they are: Hugging Face's FSMT holds exactly the
# Transformer baseline, so exporting to it reads that method's parts; the command line offers
# BERT-KD's teacher pass over a training set (`soft-targets`) as a command of its own.
METHOD_SPECIFIC = {"nmtbench.export.fsmt": "nmtbench.methods.transformer",
                   "nmtbench.cli": "nmtbench.methods.bert_kd_soft_targets"}


@functools.cache
def method_names() -> frozenset[str]:
    """Registered method names and the modules of the methods package."""
    import yaml

    schema = yaml.safe_load((PACKAGE.parent / "config" / "schema.yaml").read_text())
    modules = {name.rsplit(".", 1)[1] for name in MODULES
               if name.startswith("nmtbench.methods.")}
    return frozenset(schema["$defs"]["methods"]) | modules


def named_methods(module: str, names: frozenset[str]) -> list[str]:
    """Where a module imports a method's module, or holds a method's name as a string that
    is not a docstring (a special case by name)."""
    tree = ast.parse(MODULES[module].read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nmtbench.methods"):
            imported = [node.module] if node.module != "nmtbench.methods" else [
                f"nmtbench.methods.{alias.name}" for alias in node.names]
            found += [f"line {node.lineno}: imports {name}" for name in imported
                      if name in MODULES and name != METHOD_SPECIFIC.get(module)]
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and id(node) not in docstrings and node.value in names):
            found.append(f"line {node.lineno}: names {node.value!r}")
    return found


@pytest.mark.parametrize("module", sorted(m for m in MODULES if layer_of(m) != "methods"))
def test_no_core_module_names_a_method(module):
    """A method owns everything about itself: the core reaches methods through the registry
    (`get_method`) and the contract, never by a method's module or name."""
    assert not named_methods(module, method_names())


def test_naming_a_method_is_found():
    names = method_names()
    assert "bert-kd-teacher" in names and "bert_kd" in names
    assert named_methods("nmtbench.methods.bert_kd", names)  # it imports its soft targets
