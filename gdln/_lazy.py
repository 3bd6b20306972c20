"""Lazy loading of a package's public names, in the way of SPEC 1 (scientific-python.org).

Each gdln package lists what it exports in a type stub (``__init__.pyi``) of re-exports::

    from ._paths import enumerate_paths as enumerate_paths
    from . import kernels as kernels

Type checkers and editors read the stub; at run time :func:`attach_stub` reads the same
stub and imports a submodule only when one of its names is first used. The stub is the one
list of the public API, and ``import gdln`` or ``gdln --help`` stay cheap: nothing imports
sympy, scipy, networkx or torch until a name that needs it is used.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _exports(stub: Path, package: str) -> tuple[dict[str, str], set[str]]:
    """Map each re-exported name of ``stub`` to the absolute name of its module; list the
    re-exported submodules. Relative imports of any level are read (``from ..settings
    import X`` re-exports a name of a sibling package)."""
    attributes: dict[str, str] = {}
    submodules: set[str] = set()
    for node in ast.parse(stub.read_text(encoding="utf-8"), filename=str(stub)).body:
        if not isinstance(node, ast.ImportFrom) or not node.level:
            continue
        base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
        for alias in node.names:
            name = alias.asname or alias.name
            if node.module is None:
                submodules.add(alias.name)
            else:
                attributes[name] = f"{base}.{node.module}"
    return attributes, submodules


def upstairs(target: str) -> Any:
    """The object ``target`` (``"package.module:name"``), imported when called for: how a
    room calls a room above it without importing it (the layers of
    ``tests/test_layout.py`` stay as they are; e.g. :func:`gdln.solve` with ``schedule=``).

    Parameters
    ----------
    target
        ``"gdln.schedule._engine:schedule_solved"``, say.

    Returns
    -------
    object
        The module's attribute.
    """
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def attach_stub(
    package: str, init_file: str
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """Return ``__getattr__``, ``__dir__`` and ``__all__`` for ``package`` from its stub.

    Parameters
    ----------
    package
        The package's ``__name__``.
    init_file
        The package's ``__file__``; the stub is the ``.pyi`` file beside it.
    """
    attributes, submodules = _exports(Path(init_file).with_suffix(".pyi"), package)
    names = sorted(set(attributes) | submodules)

    def __getattr__(name: str) -> Any:
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")
        module = attributes.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        # Later look-ups find the name directly, without this hook.
        importlib.import_module(package).__dict__[name] = value
        return value

    def __dir__() -> list[str]:
        return list(names)

    return __getattr__, __dir__, list(names)
