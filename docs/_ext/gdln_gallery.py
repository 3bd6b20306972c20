"""sphinx-gallery settings: run each ``examples/GROUP/*.py`` in its ``--quick`` mode and show its figures.

Every example saves its figures with :func:`gdln.save_figure`, which closes them, so the
matplotlib scraper of sphinx-gallery would find nothing. :func:`reset_argv` instead gives
each script ``--quick -o DIR`` with a fresh ``DIR`` under the build folder, and
:func:`scrape_saved_pngs` shows the PNG files the script wrote there. The full-size figures
(from full runs, stored under ``docs/figures``) are added to each page by
:func:`add_stored_figures`, from the manifest ``docs/figures/sources.json`` that names
the script and command of every stored figure (``tests/test_docs.py`` checks it).

The example docstrings write math as ``$x$`` (they read well in a terminal, as the rest of
gdln's docstrings do); :func:`prose_math` turns it into reST on the generated pages.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from gdln_pages import dollar_math

DOCS = Path(__file__).resolve().parent.parent
ROOT = DOCS.parent
#: where the examples write while the docs build (``GDLN_EXAMPLE_OUT`` overrides it)
OUT = Path(os.environ.get("GDLN_EXAMPLE_OUT", DOCS / "_build" / "example_output"))
MANIFEST = DOCS / "figures" / "sources.json"
GALLERY = "examples"  # the gallery's folder under docs/, and its docnames' prefix

_seen: dict[str, set[str]] = {}


def out_dir(src_file: str | Path) -> Path:
    """The folder that the example ``src_file`` writes into during the build."""
    return OUT / Path(src_file).stem


#: the order of the pages within each gallery subsection: the order of the papers' figures,
#: tables and sections; an example not listed comes after these, by name
ORDER = (
    *("xor", "context", "routing", "race", "init_scale", "naturalistic"),  # Figs. 3-7
    "blocked_interleaved",  # App. A.2's task under schedules (Flesch et al. 2023)
    *("dgn_experiments", "npk_thm51", "npk_table2", "npk_fig3", "pathgram_teacher_student"),
    *("sd_depth_concentration", "sd_gradient_growth", "sd_max_regularisation"),
    *("sd_regulariser", "sd_gaussian_noise", "sd_budget", "sd_linear_dynamics"),
    *("unimodal_bias", "lazy_rich", "relu_gating"),
)


def example_order(filename: str) -> tuple[int, str]:
    """Sort key of an example within its subsection (sphinx-gallery ``within_subsection_order``)."""
    stem = Path(filename).stem
    return (ORDER.index(stem) if stem in ORDER else len(ORDER), stem)


def reset_argv(gallery_conf: dict[str, Any], script_vars: dict[str, Any]) -> list[str]:
    """``sys.argv[1:]`` of each example: its quick mode, into an emptied folder."""
    out = out_dir(script_vars["src_file"])
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    _seen[out.name] = set()
    return ["--quick", "-o", str(out)]


def scrape_saved_pngs(block: Any, block_vars: dict[str, Any], gallery_conf: dict[str, Any]) -> str:
    """Show the PNG files the example wrote since the last code block (a sphinx-gallery scraper)."""
    from sphinx_gallery.scrapers import figure_rst

    out = out_dir(block_vars["src_file"])
    seen = _seen.setdefault(out.name, set())
    new = [p for p in sorted(out.rglob("*.png"), key=os.path.getmtime) if str(p) not in seen]
    shown = []
    for path, target in zip(new, block_vars["image_path_iterator"], strict=False):
        shutil.copyfile(path, target)
        seen.add(str(path))
        shown.append(target)
    return figure_rst(shown, gallery_conf["src_dir"])


def stored_figures() -> dict[str, dict[str, str]]:
    """The manifest of ``docs/figures``: file name -> script, command, file the script writes."""
    return json.loads(MANIFEST.read_text(encoding="utf-8"))["figures"]


def _stored_section(script: str) -> str:
    """The full-size figures of ``script`` (``examples/GROUP/NAME.py``), as reST."""
    figures = {name: entry for name, entry in stored_figures().items() if entry["script"] == script}
    if not figures:
        return ""
    lines = ["Full-size figures", "-----------------", ""]
    lines.append(
        "The figures above come from the ``--quick`` run made while building this page. "
        "The full-size ones below are stored under ``docs/figures`` and were made by:\n"
    )
    for command in sorted({entry["command"] for entry in figures.values()}):
        lines += [".. code-block:: console", "", f"   {command}", ""]
    for name in sorted(figures):
        lines += [f".. image:: ../../figures/{name}", f"   :alt: {name}", ""]
    return "\n".join(lines) + "\n"


_DIRECTIVE = re.compile(r"^\.\. [\w:-]+::")


def prose_math(text: str) -> str:
    r"""Apply :func:`dollar_math` to the prose of a generated page, not to its code blocks.

    A paragraph is prose when it is not indented and not a directive or a comment; the
    page's title gets its underline if the docstring's first line had none.
    """
    paragraphs = re.split(r"(\n[ \t]*\n)", text)
    in_block = False
    for i in range(0, len(paragraphs), 2):
        para = paragraphs[i]
        if not para.strip():
            continue
        first = para.lstrip("\n").split("\n", 1)[0]
        if first.startswith((" ", "\t")):
            continue  # body of the directive before it (code, output, image options)
        in_block = bool(_DIRECTIVE.match(first)) or first.startswith("..")
        if not in_block:
            paragraphs[i] = dollar_math(para)
    return "".join(paragraphs)


def _title(text: str) -> str:
    """Give the docstring's first line an underline, so that it is the page's title."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith(".. _sphx_glr_"):
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j + 1 < len(lines) and not re.fullmatch(r"[=\-~^\"]{3,}", lines[j + 1]):
                lines.insert(j + 1, "=" * len(lines[j]))
            break
    return "\n".join(lines)


def _on_source_read(app: Any, docname: str, source: list[str]) -> None:
    """Math, title and full-size figures on each generated example page.

    The examples lie in one folder per paper (``examples/GROUP/NAME.py``, a gallery
    subsection each), so an example's page is ``examples/GROUP/NAME``.
    """
    parts = docname.split("/")
    if len(parts) != 3 or parts[0] != GALLERY:
        return
    group, stem = parts[1], parts[2]
    script = f"examples/{group}/{stem}.py"
    if not (ROOT / script).is_file():
        return
    text = _title(prose_math(source[0]))  # underline the title as it reads after the math
    stored = _stored_section(script)
    anchor = f".. _sphx_glr_download_{GALLERY}_{group}_{stem}.py:"
    before, found, after = text.partition(anchor)
    source[0] = before + stored + "\n" + found + after if found else text + "\n\n" + stored


NOTEBOOKS = ("routing_walkthrough.ipynb",)


def run_notebooks(app: Any) -> None:
    """Run each notebook of ``examples/`` headless and write it, with its outputs, under docs.

    The notebooks are shipped without outputs and run from their own folder (they read
    ``../graphs``), as Jupyter runs them; myst-nb then renders the stored outputs
    (``nb_execution_mode = "off"``), among them the LaTeX and HTML reprs of gdln's results.
    """
    import nbclient
    import nbformat

    folder = ROOT / "examples"
    for name in NOTEBOOKS:
        notebook = nbformat.read(folder / name, as_version=4)
        client = nbclient.NotebookClient(
            notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": folder}}
        )
        client.execute()
        target = DOCS / "notebooks" / name
        target.parent.mkdir(exist_ok=True)
        nbformat.write(notebook, target)


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", run_notebooks)
    app.connect("source-read", _on_source_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
