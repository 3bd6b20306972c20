"""Write the API reference from the code, at the start of each build.

The API reference is generated from the public names (``__all__``) of :mod:`gdln` and of
each public subpackage, never from private module paths, so it follows the code when
modules move. Each name is documented once, on its subpackage's page; the top-level page
lists the names ``gdln`` re-exports and links to them.
(The example gallery is sphinx-gallery's, see ``gdln_gallery.py``.)
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent.parent
ROOT = DOCS.parent


def _write(path: Path, text: str) -> None:
    """Write only when the text changed, so Sphinx rebuilds only what changed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def _directive(obj: Any) -> str:
    if inspect.isclass(obj):
        if issubclass(obj, BaseException):
            return "autoexception"
        return "autoclass"
    if callable(obj):
        return "autofunction"
    return "autodata"


def _is_member(value: Any) -> bool:
    return inspect.isfunction(value) or isinstance(
        value, (property, functools.cached_property, classmethod, staticmethod)
    )


def public_members(cls: type) -> list[str]:
    """The public methods and properties of ``cls`` that gdln defines, its own and inherited.

    Dataclass fields are documented by the class's Parameters; members of non-gdln bases
    (``torch.nn.Module``, ``tuple``, ...) by their own projects.
    """
    names: list[str] = []
    for klass in cls.__mro__:
        if not klass.__module__.startswith("gdln"):
            continue
        for name, value in vars(klass).items():
            if not name.startswith("_") and _is_member(value) and name not in names:
                names.append(name)
    return names


def _entry(name: str, obj: Any) -> str:
    """The directive that documents ``obj`` under ``name``, with its public members."""
    directive = _directive(obj)
    text = f".. {directive}:: {name}\n"
    if directive == "autoclass" and (members := public_members(obj)):
        text += f"   :members: {', '.join(members)}\n"
    if directive == "autodata" and _table(obj):
        text += "   :no-value:\n"  # the docstring lists the entries
    return text


def _table(obj: Any) -> dict[str, str]:
    """A constant that maps names to one-line descriptions (or to tuples of names, shown
    as a list), else ``{}``."""
    if not isinstance(obj, Mapping) or not all(isinstance(k, str) for k in obj):
        return {}
    if all(isinstance(v, str) for v in obj.values()):
        return dict(obj)
    if all(isinstance(v, tuple) and all(isinstance(x, str) for x in v) for v in obj.values()):
        return {k: ", ".join(v) for k, v in obj.items()}
    return {}


def defining_module(package: str, name: str) -> str:
    """The module of ``package`` that defines the public ``name``, read from its stub."""
    from gdln._lazy import _exports

    stub = ROOT / Path(*package.split(".")) / "__init__.pyi"
    return _exports(stub, package)[0][name]  # the absolute name of the defining module


def constant_docs(package: str, name: str) -> list[str]:
    """The docstring written under a constant where it is defined (``X = ...`` then a string).

    ``autodata`` would otherwise show the docstring of the value's type (``tuple``,
    ``dict``), since the package that re-exports it has no such string.
    """
    from sphinx.pycode import ModuleAnalyzer

    docs = ModuleAnalyzer.for_module(defining_module(package, name)).find_attr_docs()
    return list(docs.get(("", name), []))


def _title(text: str, char: str = "=") -> str:
    return f"{text}\n{char * len(text)}\n"


def _summary(module: Any) -> str:
    doc = inspect.getdoc(module) or ""
    return doc.split("\n\n")[0]


def subpackages() -> list[str]:
    import gdln

    return [name for name in gdln.__all__ if inspect.ismodule(getattr(gdln, name))]


def api_pages() -> dict[str, str]:
    """One page per public subpackage documenting every name of its ``__all__``."""
    import gdln

    pages: dict[str, str] = {}
    owner: dict[int, str] = {}
    for sub in subpackages():
        module = importlib.import_module(f"gdln.{sub}")
        lines = [f".. _api-{sub}:\n", _title(f"gdln.{sub}"), _summary(module), ""]
        lines += [f".. currentmodule:: gdln.{sub}\n", ".. autosummary::\n"]
        lines += [f"   {name}" for name in module.__all__] + [""]
        for name in module.__all__:
            obj = getattr(module, name)
            owner.setdefault(id(obj), f"gdln.{sub}.{name}")
            lines.append(_entry(name, obj))
        pages[f"{sub}.rst"] = "\n".join(lines)
    top = [_title("gdln"), _summary(gdln), "", ".. currentmodule:: gdln\n"]
    top.append("Names defined at the top level:\n")
    own = [n for n in gdln.__all__ if n not in subpackages() and id(getattr(gdln, n)) not in owner]
    top += [_entry(n, getattr(gdln, n)) for n in own]
    top.append("Names re-exported from the subpackages (``gdln.NAME`` is ``gdln.SUB.NAME``):\n")
    top += [".. list-table::", "   :header-rows: 1", "", "   * - name", "     - defined in"]
    for name in gdln.__all__:
        obj = getattr(gdln, name)
        if name in subpackages() or name in own:
            continue
        target = owner[id(obj)]
        top += [f"   * - ``gdln.{name}``", f"     - :py:obj:`{target}`"]
    top += ["", ".. toctree::", "   :maxdepth: 1", ""] + [f"   {s}" for s in subpackages()]
    pages["index.rst"] = "\n".join(top) + "\n"
    return pages


def write_api() -> None:
    """Write :func:`api_pages` under ``docs/api``."""
    for name, text in api_pages().items():
        _write(DOCS / "api" / name, text)


_MATH = re.compile(
    r"(?<![\\$])\$\$(.+?)\$\$|(?<![\\$\w])\$((?:[^$\n]|\n(?![ \t]*\n))+?)\$(?![\w$])", re.S
)
_LITERAL = re.compile(r"(``.+?``|:math:`[^`]*`|`[^`]*`)")


def dollar_math(text: str) -> str:
    r"""Turn ``$x$`` into ``:math:`x``` and escape RST markup that plain prose does not mean.

    gdln docstrings write math as ``$\Sigma^{yx}$`` (they read well in a terminal); reST
    would take ``|S|`` for a substitution and ``x_`` for a link target.
    """

    def inline(match: re.Match[str]) -> str:
        body = (match.group(1) or match.group(2)).strip()
        return f":math:`{body}`"

    pieces = re.split(r"(``.+?``)", text)
    for j in range(0, len(pieces), 2):
        parts = _LITERAL.split(_MATH.sub(inline, pieces[j]))
        for i in range(0, len(parts), 2):
            parts[i] = re.sub(r"(?<![\\|])\|(?=\S)([^|\n]*?\S)\|", r"\\|\1\\|", parts[i])
            parts[i] = re.sub(r"(\w)_(?=[\s,.;:)\]]|$)", r"\1\\_", parts[i])
        pieces[j] = "".join(parts)
    return "".join(pieces)


def _process(app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    text = dollar_math("\n".join(lines))
    lines[:] = text.split("\n")


def _constant(app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """A public constant shows the docstring written under it, not its type's."""
    if what == "data" and name.startswith("gdln."):
        package, _, attribute = name.rpartition(".")
        own = constant_docs(package, attribute)
        if own:
            lines[:] = own
        for key, meaning in _table(obj).items():  # a table of names shows every entry
            lines += ["", f"``{key}``", f"    {meaning}"]


def setup(app: Any) -> dict[str, Any]:
    app.connect("autodoc-process-docstring", _constant, priority=50)
    app.connect("autodoc-process-docstring", _process, priority=100)
    write_api()
    return {"parallel_read_safe": True, "parallel_write_safe": True}
