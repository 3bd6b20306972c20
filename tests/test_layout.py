"""The package's shape: layers, module size, and the public API (issue "One house").

These are properties of the source tree, checked by parsing it; each can fail when a change
breaks the architecture that the README and STYLE describe.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

import gdln

PACKAGE = Path(gdln.__file__).parent

# Lower layers first; a module may import from its own layer or below, never above.
LAYERS: list[set[str]] = [
    {
        "_errors",
        "_edge",
        "_html",
        "_lazy",
        "_device",
        "_bounded",
        "_runtime",
        "outputs",
        "settings",
    },
    {"task"},
    {"graphfile"},
    {"paths"},
    {"reduction"},
    {"report", "solution"},
    {"simulation", "stages", "balanced"},
    {"comparison", "schedule"},
    {"sweep"},
    {"kernels", "sd", "plotting", "gating"},
    {"cli", "__init__", "__main__"},
]
LAYER = {name: k for k, names in enumerate(LAYERS) for name in names}
MAX_LINES = 650


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _top(path: Path) -> str:
    """The top-level unit of gdln a file belongs to: its subpackage, or its module name."""
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imported_units(path: Path) -> set[str]:
    """The top-level gdln units a module imports (relative or absolute imports)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1]
    if path.name == "__init__.py":
        package = path.relative_to(PACKAGE.parent).parts[:-1]
    units = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[: len(package) - node.level + 1])
                target = base + (node.module.split(".") if node.module else [])
                names = [target] if node.module else [[*target, a.name] for a in node.names]
            elif node.module and node.module.split(".")[0] == "gdln":
                names = [node.module.split(".")]
            else:
                continue
            for parts in names:
                if len(parts) >= 2 and parts[0] == "gdln":
                    units.add(parts[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "gdln" and len(parts) >= 2:
                    units.add(parts[1])
    return units


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_import_runs_up_a_layer(path: Path) -> None:
    own = _top(path)
    assert own in LAYER, f"{own}: add this unit to LAYERS in tests/test_layout.py"
    upward = sorted(u for u in _imported_units(path) if LAYER.get(u, -1) > LAYER[own])
    assert not upward, f"{path.relative_to(PACKAGE)} ({own}) imports from higher layers {upward}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_stay_about_one_idea(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE)} has {lines} lines"


def _stubs() -> list[Path]:
    return sorted(PACKAGE.rglob("__init__.pyi"))


@pytest.mark.parametrize("stub", _stubs(), ids=lambda p: str(p.parent.relative_to(PACKAGE.parent)))
def test_every_stub_name_resolves(stub: Path) -> None:
    name = ".".join(stub.parent.relative_to(PACKAGE.parent).parts)
    module = importlib.import_module(name)
    assert module.__all__, name
    for public in module.__all__:
        assert not public.startswith("_"), f"{name}.{public} is private"
        getattr(module, public)  # raises if the stub names something that is not there
    assert sorted(dir(module)) == sorted(module.__all__)


def test_top_level_exports_nothing_private_or_typing_only() -> None:
    leaked = {"Any", "TYPE_CHECKING", "PackageNotFoundError", "annotations", "importlib"}
    assert not leaked & set(gdln.__all__)
    assert all(not n.startswith("_") for n in gdln.__all__)
    assert {"kernels", "sd"} <= set(gdln.__all__)


def _loaded_after(statements: str, libraries: tuple[str, ...]) -> list[str]:
    """Which of ``libraries`` a fresh interpreter has imported after ``statements``."""
    code = f"import sys; {statements}; print(sorted(m for m in {libraries!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return ast.literal_eval(out.stdout.strip())


def test_import_gdln_loads_no_heavy_library() -> None:
    heavy = ("torch", "sympy", "scipy", "networkx", "numpy")
    assert _loaded_after("import gdln; gdln.__all__", heavy) == []


def test_the_simulation_worker_imports_no_symbolic_library() -> None:
    """The process compare simulates in imports torch, not sympy or scipy (issue 25: the
    reader of graph files took 0.35 s of its start, on the comparison's critical path)."""
    statements = (
        "from gdln._runtime._worker import serve; from gdln.simulation._simulate import simulate"
    )
    assert _loaded_after(statements, ("sympy", "scipy", "matplotlib")) == []


def _cli_imports(path: Path) -> list[str]:
    """Import statements of a CLI module that reach a private part of gdln."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            parts = module.split(".")
            inside_cli = node.level == 1 or (node.level == 0 and parts[:2] == ["gdln", "cli"])
            if inside_cli or module == "__future__":
                continue
            names = [a.name for a in node.names]
            if any(p.startswith("_") for p in parts) or any(n.startswith("_") for n in names):
                bad.append(f"from {'.' * node.level}{module} import {', '.join(names)}")
    return bad


@pytest.mark.parametrize("path", sorted((PACKAGE / "cli").glob("*.py")), ids=lambda p: p.name)
def test_cli_uses_only_the_public_api(path: Path) -> None:
    assert _cli_imports(path) == []


# ---------------------------------------------------------------------------- import cycles
def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _stub_exports(package: Path) -> dict[str, str]:
    """Name -> the submodule that defines it, from a package's ``__init__.pyi``."""
    stub = package / "__init__.pyi"
    if not stub.exists():
        return {}
    out = {}
    for node in ast.parse(stub.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            for alias in node.names:  # ``from . import kernels``: the submodule itself
                out[alias.asname or alias.name] = node.module or alias.name
    return out


def import_graph() -> nx.DiGraph:
    """Module -> the gdln modules it imports anywhere in its text.

    Imports inside functions and under ``TYPE_CHECKING`` count too. ``from pkg import
    name`` leads to the submodule ``pkg.name`` when there is one, else to the module the
    package's stub names for ``name`` (what the lazy ``__init__`` imports on first use).
    """
    modules = {_module_name(p): p for p in _modules()}
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)

    def resolve(target: str, name: str | None) -> str | None:
        if name is not None and f"{target}.{name}" in modules:
            return f"{target}.{name}"
        if name is not None and target in modules and modules[target].name == "__init__.py":
            defined = _stub_exports(modules[target].parent).get(name)
            if defined is not None:
                return f"{target}.{defined}"
        return target if target in modules else None

    for name, path in modules.items():
        if path.name == "__init__.py":  # the lazy __init__ imports what its stub lists
            for defined in set(_stub_exports(path.parent).values()):
                graph.add_edge(name, resolve(name, defined) or name)
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            found: list[str | None] = []
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                target = ".".join(base + (node.module.split(".") if node.module else []))
                found = [resolve(target, alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                found = [resolve(alias.name, None) for alias in node.names]
            graph.add_edges_from((name, t) for t in found if t is not None and t != name)
    return graph


def import_cycles(graph: nx.DiGraph) -> list[list[str]]:
    """Every group of modules that import each other, directly or around a loop."""
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)


def test_the_import_graph_sees_imports_in_functions_stubs_and_type_checking() -> None:
    graph = import_graph()
    # in a method (PathStatistics._repr_latex_, Trajectory._repr_html_)
    assert graph.has_edge("gdln.paths._statistics", "gdln.paths._latex")
    assert graph.has_edge("gdln.solution._trajectory", "gdln.report._notebook")
    # through a package's stub, and the lazy __init__ to what its stub lists
    assert graph.has_edge("gdln.balanced._weights", "gdln.solution._series")
    assert graph.has_edge("gdln.cli._simulate", "gdln")
    assert graph.has_edge("gdln.outputs", "gdln.outputs._atomic")
    assert graph.has_edge("gdln", "gdln.kernels")
    loop = nx.DiGraph([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])
    assert import_cycles(loop) == [["a", "b", "c"]]


def test_no_import_cycles_among_gdln_modules() -> None:
    assert import_cycles(import_graph()) == []


# ------------------------------------------------------------------- Problem beside Task
def test_problem_lives_beside_the_task() -> None:
    from gdln.task import Problem, Task

    assert gdln.Problem is Problem
    assert Problem.__module__ == Task.__module__.rsplit(".", 1)[0] + "._problem"
    assert "Problem" not in gdln.graphfile.__all__


def test_the_old_name_still_imports_with_a_deprecation_warning() -> None:
    with pytest.warns(DeprecationWarning, match=r"gdln.graphfile.Problem is now gdln.task.Problem"):
        from gdln.graphfile import Problem
    assert Problem is gdln.Problem


# ------------------------------------------------------------------ private stays private
def _public_classes() -> list[tuple[str, type]]:
    out = []
    for sub in [n for n in gdln.__all__ if inspect.ismodule(getattr(gdln, n))]:
        module = importlib.import_module(f"gdln.{sub}")
        out += [
            (f"gdln.{sub}.{name}", obj)
            for name in module.__all__
            if inspect.isclass(obj := getattr(module, name))
        ]
    return out


@pytest.mark.parametrize(
    ("name", "cls"), _public_classes(), ids=lambda x: x if isinstance(x, str) else ""
)
def test_no_private_field_in_a_public_signature(name: str, cls: type) -> None:
    try:
        parameters = inspect.signature(cls).parameters
    except (TypeError, ValueError):  # no signature to show (e.g. a builtin base)
        return
    assert [p for p in parameters if p.startswith("_")] == [], name


@functools.cache
def _private_attributes_by_unit() -> dict[str, frozenset[str]]:
    """``_name`` -> the units whose classes define it (fields, methods, ``self._x =``)."""
    defined: dict[str, set[str]] = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            for item in ast.walk(node):
                name = None
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    name = item.target.id
                elif isinstance(item, ast.FunctionDef):
                    name = item.name
                elif (
                    isinstance(item, ast.Attribute)
                    and isinstance(item.ctx, ast.Store)
                    and isinstance(item.value, ast.Name)
                    and item.value.id == "self"
                ):
                    name = item.attr
                if name and name.startswith("_") and not name.startswith("__"):
                    defined.setdefault(name, set()).add(_top(path))
    return {name: frozenset(units) for name, units in defined.items()}


# Reads allowed while another branch replaces them (module -> reads); none pending now.
PENDING_READS: dict[str, set[str]] = {}


def _foreign_private_reads(path: Path, defined: dict[str, frozenset[str]]) -> set[str]:
    own = _top(path)
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        mine = isinstance(node, ast.Attribute) and (
            own in defined.get(node.attr, {own})
            or (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        )
        if isinstance(node, ast.Attribute) and not mine:
            found.add(ast.unparse(node))
        if isinstance(node, ast.ImportFrom) and node.level >= 2:  # from another unit
            found |= {f"import {a.name}" for a in node.names if a.name.startswith("_")}
    return found - PENDING_READS.get(str(path.relative_to(PACKAGE)), set())


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_reads_another_packages_private_names(path: Path) -> None:
    assert _foreign_private_reads(path, _private_attributes_by_unit()) == set()
