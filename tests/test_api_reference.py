"""The API reference documents every public method, property and table (issue 24, item 8).

The members a reader can call are found here from the classes themselves (every public
function or property on a gdln class of the class's MRO), independently of the docs
extension; each must have a complete numpydoc docstring and be listed in the reference
source that ``docs/_ext/gdln_pages.py`` writes. Public constants must show the docstring
written under them, not their type's (a ``tuple``'s or a ``dict``'s).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import sys
from collections.abc import Mapping
from typing import Any

import pytest
from helpers import ROOT

import gdln

validate = pytest.importorskip("numpydoc.validate").validate

sys.path.insert(0, str(ROOT / "docs" / "_ext"))
gdln_pages = importlib.import_module("gdln_pages")

CHECKED = ("PR01", "PR02", "RT01", "GL08")
SUBPACKAGES = [n for n in gdln.__all__ if inspect.ismodule(getattr(gdln, n))]


def _public(kind: str) -> list[tuple[str, str, Any]]:
    out = []
    for sub in SUBPACKAGES:
        module = importlib.import_module(f"gdln.{sub}")
        for name in module.__all__:
            obj = getattr(module, name)
            is_class = inspect.isclass(obj) and not issubclass(obj, BaseException)
            is_constant = not inspect.isclass(obj) and not callable(obj)
            if (kind == "class" and is_class) or (kind == "constant" and is_constant):
                out.append((sub, name, obj))
    return out


def _callable_members(cls: type) -> list[tuple[str, str]]:
    """``(member, owner's qualified name)`` for what a user can call or read on ``cls``."""
    found = []
    for name, _ in inspect.getmembers(cls):
        if name.startswith("_"):
            continue
        owner = next(k for k in cls.__mro__ if name in vars(k))
        value = vars(owner)[name]
        if isinstance(value, (classmethod, staticmethod)):
            value = value.__func__
        kind_ok = inspect.isfunction(value) or isinstance(
            value, (property, functools.cached_property)
        )
        if kind_ok and owner.__module__.startswith("gdln"):
            found.append((name, f"{owner.__module__}.{owner.__qualname__}.{name}"))
    return found


MEMBERS = [
    (f"gdln.{sub}.{name}", member, defined)
    for sub, name, cls in _public("class")
    for member, defined in _callable_members(cls)
]


@functools.cache
def _listed_members() -> dict[str, set[str]]:
    """``gdln.SUB.Class`` -> the members its reference entry lists (``:members:``)."""
    out: dict[str, set[str]] = {}
    for page, text in gdln_pages.api_pages().items():
        sub = page.removesuffix(".rst")
        prefix = "gdln" if sub == "index" else f"gdln.{sub}"
        for name, members in re.findall(
            r"^\.\. autoclass:: (\w+)\n(?:   :members: (.*)\n)?", text, re.M
        ):
            out[f"{prefix}.{name}"] = {m.strip() for m in members.split(",") if m.strip()}
    return out


def test_the_classes_have_members_to_check() -> None:
    names = {(cls, member) for cls, member, _ in MEMBERS}
    assert ("gdln.reduction.Reduction", "decoupled_weights") in names
    assert ("gdln.solution.Trajectory", "save") in names
    assert ("gdln.solution.Trajectory", "load") in names
    assert ("gdln.sd.SDResNet", "forward") in names
    assert len(MEMBERS) > 80


@pytest.mark.parametrize(("cls", "member", "defined"), MEMBERS, ids=lambda x: x)
def test_every_public_member_is_in_the_reference(cls: str, member: str, defined: str) -> None:
    assert member in _listed_members().get(cls, set()), f"{cls}.{member} is not in the reference"


@pytest.mark.parametrize(("cls", "member", "defined"), MEMBERS, ids=lambda x: x)
def test_every_public_member_has_a_complete_docstring(cls: str, member: str, defined: str) -> None:
    errors = [f"{code} {text}" for code, text in validate(defined)["errors"] if code in CHECKED]
    assert errors == [], f"{cls}.{member}"


@pytest.mark.parametrize(("sub", "name", "obj"), _public("constant"), ids=lambda x: x)
def test_every_constant_shows_its_own_docstring(sub: str, name: str, obj: Any) -> None:
    own = gdln_pages.constant_docs(f"gdln.{sub}", name)
    assert own and "".join(own).strip(), f"gdln.{sub}.{name} has no docstring of its own"
    lines = (inspect.getdoc(type(obj)) or "").splitlines()  # what autodoc starts from
    gdln_pages._constant(None, "data", f"gdln.{sub}.{name}", obj, None, lines)
    shown = "\n".join(lines)
    assert shown.startswith(own[0])
    type_doc = inspect.getdoc(type(obj))
    assert not type_doc or type_doc not in shown
    if isinstance(obj, Mapping):  # a table of names: every entry and what it means
        for key, meaning in obj.items():
            said = ", ".join(meaning) if isinstance(meaning, tuple) else str(meaning)
            assert f"``{key}``" in shown and said in shown


def test_the_lumpings_say_what_each_one_does() -> None:
    lines = list(gdln_pages.constant_docs("gdln.reduction", "LUMPINGS"))
    gdln_pages._constant(None, "data", "gdln.reduction.LUMPINGS", gdln.LUMPINGS, None, lines)
    shown = "\n".join(lines)
    for lumping in ("none", "symmetry", "balanced", "full"):
        assert f"``{lumping}``" in shown
