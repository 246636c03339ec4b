"""The package's architecture as a contract over its import graph, read from the source (no
module is imported): the subpackages form layers, each importing only from itself and the layers
below it; and the layers Snakemake loads to plan the DAG never import torch or transformers at
module level, however indirectly (a model-building function may import them where it runs)."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "nmtbench"

# Bottom to top. A module may import from its own layer and the layers before it.
LAYERS = {
    "base": ("nmtbench", "nmtbench.errors", "nmtbench.fileio", "nmtbench.records",
             "nmtbench.layout", "nmtbench.provenance", "nmtbench.devices"),
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
