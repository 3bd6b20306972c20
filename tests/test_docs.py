"""The documentation site: the API reference covers every public name, and every figure
the docs show names the script that makes it, which still makes it."""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from helpers import ROOT, run_cli

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


gdln_gallery = importlib.import_module("gdln_gallery")


def test_gallery_pages_get_math_in_prose_and_keep_code_as_written() -> None:
    page = (
        ".. _sphx_glr_examples_x.py:\n\nTitle with $a_0$.\n\nProse $x$ here.\n\n"
        '.. code-block:: Python\n\n    label = r"$x$"\n\n    y = 1\n\n'
        ".. rst-class:: sphx-glr-script-out\n\n .. code-block:: none\n\n    $5 or $6\n\nEnd $y$.\n"
    )
    out = gdln_gallery._title(gdln_gallery.prose_math(page))
    title = "Title with :math:`a_0`."
    assert f"{title}\n{'=' * len(title)}\n" in out  # the title got its underline
    assert "Prose :math:`x` here." in out and "End :math:`y`." in out
    assert '    label = r"$x$"' in out and "    $5 or $6" in out  # code and output untouched


# -- the gallery: one subsection per paper, each page text and code in turn -------------

EXAMPLES = ROOT / "examples"


def _conf() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_conf", ROOT / "docs" / "conf.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_gallery_is_grouped_by_paper_core_gdln_first() -> None:
    """Every example lies in one folder per paper with its header, and conf.py orders the
    folders with the core paper (Saxe, Sodhani & Lewallen 2022) first."""
    order = _conf().sphinx_gallery_conf["subsection_order"]
    folders = sorted({p.parent.name for p in EXAMPLES.rglob("*.py")})
    assert sorted(Path(f).name for f in order) == folders
    assert not list(EXAMPLES.glob("*.py"))  # no example outside a subsection
    for folder in folders:
        assert (EXAMPLES / folder / "GALLERY_HEADER.rst").is_file(), folder
    first = (EXAMPLES / Path(order[0]).name / "GALLERY_HEADER.rst").read_text(encoding="utf-8")
    assert "Saxe, Sodhani & Lewallen 2022" in first.splitlines()[0]
    stems = [p.stem for p in EXAMPLES.rglob("*.py")]
    assert sorted(gdln_gallery.ORDER) == sorted(stems)  # every page has its place


def _cells(script: Path) -> list[tuple[str, int]]:
    """(text, code lines) of each ``# %%`` cell of a script, after the docstring."""
    cells = []
    for block in script.read_text(encoding="utf-8").split("\n# %%\n")[1:]:
        lines = block.split("\n")
        lead = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
        text = " ".join(line[1:].strip() for line in lines[:lead])
        code = [line for line in lines[lead:] if line.strip() and not line.startswith("#")]
        cells.append((text, len(code)))
    return cells


@pytest.mark.parametrize("script", sorted(EXAMPLES.rglob("*.py")), ids=lambda p: p.stem)
def test_each_example_page_reads_as_text_and_code_cells(script: Path) -> None:
    """The page of an example is not one block: its script is cut into ``# %%`` cells, each
    saying in words what its code does, and no cell runs over 150 lines of code."""
    cells = _cells(script)
    assert len(cells) >= 3, script.name
    assert all(text.strip() for text, _ in cells), script.name
    assert max(lines for _, lines in cells) <= 150, script.name


def test_a_page_in_a_subsection_gets_its_full_size_figures() -> None:
    """The full-size figures stored for ``examples/core/xor.py`` are added to its page,
    ``examples/core/xor``, before the download links."""
    anchor = ".. _sphx_glr_download_examples_core_xor.py:"
    source = [f".. _sphx_glr_examples_core_xor.py:\n\nXoR\n\nText.\n\n{anchor}\n\nlinks\n"]
    gdln_gallery._on_source_read(None, "examples/core/xor", source)
    page = source[0]
    assert "Full-size figures" in page and page.index("Full-size figures") < page.index(anchor)
    assert ".. image:: ../../figures/xor_loss.png" in page
    assert (ROOT / "docs" / "examples" / "core" / "../../figures/xor_loss.png").resolve() == (
        FIGURES / "xor_loss.png"
    )


# -- every figure names its script ---------------------------------------------------------

DOCS = ROOT / "docs"
FIGURES = DOCS / "figures"
MANIFEST = json.loads((FIGURES / "sources.json").read_text(encoding="utf-8"))["figures"]
GENERATED = ("_build", "api", "examples", "notebooks")  # written by the build
_IMAGE = re.compile(
    r"!\[[^\]]*\]\(([^)\s]+)\)|<img [^>]*src=\"([^\"]+)\"|\.\. (?:image|figure):: (\S+)"
)


def _pages() -> list[Path]:
    pages = [p for p in DOCS.rglob("*") if p.suffix in (".md", ".rst")]
    pages = [p for p in pages if p.relative_to(DOCS).parts[0] not in GENERATED]
    return [*sorted(pages), ROOT / "examples" / "GALLERY_HEADER.rst", ROOT / "README.md"]


def _images(page: Path) -> list[tuple[int, Path]]:
    """(line, file) of each image that ``page`` shows, resolved against the page's folder."""
    found = []
    text = page.read_text(encoding="utf-8")
    for match in _IMAGE.finditer(text):
        ref = next(g for g in match.groups() if g)
        line = text.count("\n", 0, match.start())
        found.append((line, (page.parent / ref).resolve()))
    return found


def _script_name(entry: dict[str, str]) -> str:
    """How a page names the script: its file name, or the gdln subcommand."""
    script = entry["script"]
    return script if script.startswith("gdln ") else Path(script).name


def test_every_stored_figure_names_an_existing_script_and_its_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stored = {p.name for p in FIGURES.iterdir() if p.suffix in (".png", ".svg", ".jpg")}
    assert stored == set(MANIFEST)  # every stored figure is in the manifest, and only those
    for name, entry in MANIFEST.items():
        script = entry["script"]
        if script.startswith("gdln "):
            code, out, _ = run_cli([script.split()[1], "--help"], capsys)  # it exists
            assert code == 0 and script in out.lower(), name
        else:
            assert script.split("/")[0] in ("examples", "benchmarks"), name
            assert (ROOT / script).is_file(), name
        assert _script_name(entry) in entry["command"], name
        assert Path(entry["writes"]).suffix == Path(name).suffix, name


def test_every_image_in_the_docs_is_stored_and_named_by_its_page() -> None:
    """Each image a hand-written page (or the README) shows lies in docs/figures, is in the
    manifest, and the page names its script (file name or gdln subcommand) in the 40 lines
    before it or in its caption. (Gallery pages show the figures their run makes;
    sphinx-gallery writes those.)
    """
    shown = 0
    for page in _pages():
        lines = page.read_text(encoding="utf-8").splitlines()
        for line, image in _images(page):
            where = f"{page.relative_to(ROOT)}:{line + 1}"
            assert image.parent == FIGURES, where
            assert image.is_file(), where
            entry = MANIFEST[image.name]
            context = "\n".join(lines[max(0, line - 40) : line + 3])
            assert _script_name(entry) in context, f"{where} does not name {entry['script']}"
            shown += 1
    assert shown >= len(MANIFEST) - 2  # not vacuous: nearly every stored figure is shown


def _example(script: str) -> ModuleType:
    name = f"docs_{Path(script).stem}"
    spec = importlib.util.spec_from_file_location(name, ROOT / script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _quick_runs() -> dict[tuple[str, ...], list[str]]:
    """Each distinct quick run of the manifest -> the files it must write."""
    runs: dict[tuple[str, ...], list[str]] = {}
    for entry in MANIFEST.values():
        runs.setdefault((entry["script"], *entry["quick"]), []).append(entry["writes"])
    return runs


# In-process --quick runs measured on the 2-core machine at a load average below 1; those
# over ~1.5 s run with the slow tests. The gallery runs every example again in the docs build.
_SLOW = {"race.py", "naturalistic.py", "routing.py", "init_scale.py", "dgn_experiments.py"}
_SLOW |= {"sd_linear_dynamics.py", "sd_regulariser.py", "context.py", "unimodal_bias.py"}
_SLOW |= {"relu_gating.py"}
_SLOW |= {"blocked_interleaved.py"}


@pytest.mark.parametrize(
    "run",
    [
        pytest.param(run, marks=[pytest.mark.slow] if Path(run[0]).name in _SLOW else [])
        for run in sorted(_quick_runs())
    ],
    ids=lambda run: " ".join(run),
)
def test_the_script_of_each_stored_figure_still_writes_it(
    run: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script, *argv = run
    if script.startswith("gdln "):
        code, _, err = run_cli([script.split()[1], *argv, "-o", str(tmp_path)], capsys)
        assert code == 0, err
    else:
        _example(script).main([*argv, "-o", str(tmp_path)])
    for name in _quick_runs()[tuple(run)]:
        assert (tmp_path / name).stat().st_size > 0, name
