"""Every public function and class of the finished subpackages has a complete numpydoc docstring.

Issue 17: the API reference is built from the docstrings, so each public name documents
its parameters (PR01, PR02), what it returns (RT01) and exists at all (GL08), checked by
``numpydoc.validate`` on the names each subpackage's ``__init__.pyi`` exports. Constants
(``INITS``, ``DTYPES``, ...) carry no docstring of their own and are skipped.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

validate = pytest.importorskip("numpydoc.validate").validate

GDLN = Path(__file__).resolve().parent.parent / "gdln"
CHECKED = ("PR01", "PR02", "RT01", "GL08")
FINISHED = (
    "simulation",
    "comparison",
    "graphfile",
    "paths",
    "task",
    "sd",
    "kernels",
    "sweep",
    "solution",
    "report",
    "reduction",
    "balanced",
    "outputs",
    "settings",
    "stages",
    "plotting",
    "gating",
    "schedule",
)


def public_names(package: str) -> list[str]:
    """The names a subpackage's stub re-exports (``from ._m import name as name``)."""
    stub = (GDLN / package / "__init__.pyi").read_text()
    return re.findall(r"import (\w+) as \1\b", stub)


def documentable(package: str) -> list[str]:
    """The stub's functions and classes, as dotted names; constants have no docstring."""
    module = importlib.import_module(f"gdln.{package}")
    return [
        f"gdln.{package}.{name}"
        for name in public_names(package)
        if inspect.isclass(getattr(module, name)) or inspect.isroutine(getattr(module, name))
    ]


def checked_errors(result: dict[str, Any]) -> list[str]:
    return [f"{code} {message}" for code, message in result["errors"] if code in CHECKED]


@pytest.mark.parametrize("package", FINISHED)
def test_public_names_have_complete_docstrings(package: str) -> None:
    names = documentable(package)
    assert names, f"gdln.{package}: no public function or class found in __init__.pyi"
    problems = {name: checked_errors(validate(name)) for name in names}
    assert {name: errs for name, errs in problems.items() if errs} == {}


def _documented(lr: float, steps: int) -> float:
    """Scale a learning rate.

    Parameters
    ----------
    lr
        The learning rate.
    steps
        The number of steps.

    Returns
    -------
    float
        ``lr * steps``.
    """
    return lr * steps


def _undocumented_parameter(lr: float, steps: int, momentum: float) -> float:
    """Scale a learning rate.

    Parameters
    ----------
    lr
        The learning rate.
    steps
        The number of steps.

    Returns
    -------
    float
        ``lr * steps * momentum``.
    """
    return lr * steps * momentum


def _no_returns(lr: float) -> float:
    """Scale a learning rate.

    Parameters
    ----------
    lr
        The learning rate.
    """
    return 2 * lr


def test_the_check_catches_what_it_is_meant_to() -> None:
    """The checker flags a new undocumented parameter and a missing Returns section."""
    here = __name__
    assert checked_errors(validate(f"{here}._documented")) == []
    missing = checked_errors(validate(f"{here}._undocumented_parameter"))
    assert len(missing) == 1 and missing[0].startswith("PR01") and "momentum" in missing[0]
    assert [e[:4] for e in checked_errors(validate(f"{here}._no_returns"))] == ["RT01"]


_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")


def control_characters(doc: str | None) -> list[str]:
    """The control characters of a docstring (tab and form feed included), with context."""
    return [repr(doc[max(0, m.start() - 20) : m.end() + 20]) for m in _CONTROL.finditer(doc or "")]


@pytest.mark.parametrize("package", FINISHED)
def test_docstrings_hold_no_control_characters(package: str) -> None:
    """A LaTeX escape in a docstring that is not raw (``\\tau``, ``\\rVert``) turns into a tab
    or a line break and the rest of the line is lost; a raw docstring keeps it."""
    module = importlib.import_module(f"gdln.{package}")
    found = {
        # __doc__ as written: inspect.getdoc would turn a tab into spaces
        name: control_characters(getattr(module, name.rsplit(".", 1)[1]).__doc__)
        for name in documentable(package)
    }
    assert {name: hits for name, hits in found.items() if hits} == {}


def test_the_control_character_check_sees_a_swallowed_escape() -> None:
    assert control_characters("time in units of $\tau$") == ["'time in units of $\\tau$'"]
    assert control_characters(r"time in units of $\tau$") == []
