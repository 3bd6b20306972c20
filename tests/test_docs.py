"""The documentation site's generated pages cover the whole public API."""

from __future__ import annotations

import importlib
import re
import sys

import pytest
from helpers import ROOT

import gdln

sys.path.insert(0, str(ROOT / "docs" / "_ext"))
gdln_pages = importlib.import_module("gdln_pages")


def test_the_api_reference_documents_every_public_name() -> None:
    pages = gdln_pages.api_pages()
    documented = set()
    for page, text in pages.items():
        sub = page.removesuffix(".rst")
        prefix = "gdln" if sub == "index" else f"gdln.{sub}"
        documented |= {f"{prefix}.{n}" for n in re.findall(r"^\.\. auto\w+:: (\w+)$", text, re.M)}
    subpackages = [n for n in gdln.__all__ if f"{n}.rst" in pages]
    assert sorted(subpackages) == sorted(
        n for n in gdln.__all__ if type(getattr(gdln, n)) is type(gdln)
    )
    for sub in subpackages:
        module = importlib.import_module(f"gdln.{sub}")
        assert {f"gdln.{sub}.{n}" for n in module.__all__} <= documented
    # every top-level name is documented once, here or on its subpackage's page
    for name in gdln.__all__:
        if name in subpackages:
            continue
        assert f"gdln.{name}" in documented or f"``gdln.{name}``" in pages["index.rst"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"loss $\mathcal L$ here", r"loss :math:`\mathcal L` here"),
        ("a $x$ and $$y$$", "a :math:`x` and :math:`y`"),
        ("costs $5 or $6 each", "costs $5 or $6 each"),
        ("``$x$`` stays", "``$x$`` stays"),
        ("the norm |x| of x_", r"the norm \|x\| of x\_"),
    ],
)
def test_dollar_math_becomes_rest_math(text: str, expected: str) -> None:
    assert gdln_pages.dollar_math(text) == expected
