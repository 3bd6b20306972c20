"""Sphinx configuration of the gdln documentation site."""

from __future__ import annotations

import sys
from importlib.metadata import version as _version
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

project = "gdln"
author = "gdln contributors"
copyright = "2022-2026, gdln contributors"
release = _version("gdln")
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_nb",  # MyST Markdown pages and the walkthrough notebook (run by gdln_gallery)
    "sphinx_gallery.gen_gallery",
    "gdln_pages",
    "gdln_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
# sphinx-gallery writes a notebook beside each example page (examples/GROUP/NAME.ipynb):
# only the .rst it writes is a page
exclude_patterns = ["_build", "README.md", "examples/*.ipynb", "examples/*/*.ipynb"]
html_theme = "pydata_sphinx_theme"
html_title = "gdln"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
# The pages listed directly in index.md's toctrees have no pages below them, so the theme's
# left sidebar ("Section Navigation") would be empty there: those pages go without it.
# The gallery (examples/) and the API reference (api/) keep theirs.
_HERE = Path(__file__).resolve().parent
# The walkthrough notebook (notebooks/, written by gdln_gallery.run_notebooks) is such a page.
html_sidebars: dict[str, list[str]] = {
    page.relative_to(_HERE).with_suffix("").as_posix(): []
    for page in (*_HERE.glob("*.md"), *(_HERE / "guide").glob("*.md"))
}
html_sidebars["notebooks/*"] = []

myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
nb_execution_mode = "off"  # gdln_gallery.run_notebooks has run them, from their own folder

autosummary_generate = False
autodoc_typehints = "none"  # numpydoc shows the documented types; signatures show hints
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# numpydoc validation (with -W a finding fails the build): every documented parameter
# exists (PR02), every parameter is documented (PR01), what a function returns is
# described (RT01) and every object has a docstring (GL08). tests/test_docstrings.py runs
# the same checks without Sphinx. Excluded: gdln.cli, whose docstrings are not yet
# complete, and constants (a dict or tuple holds no docstring of its own; their ``#:``
# comments document them).
numpydoc_validation_checks = {"PR01", "PR02", "RT01", "GL08"}
numpydoc_validation_exclude = {
    r"^gdln\.cli\.",
    r"^gdln\.[A-Za-z_]\w*$",
    r"\.[A-Z][A-Z0-9_]*$",
}
numpydoc_xref_param_type = False

intersphinx_mapping: dict[str, tuple[str, None]] = {}
nitpicky = False

# The example gallery: every examples/GROUP/*.py is run in its --quick mode while the docs
# build and its page shows the figures that run writes (docs/_ext/gdln_gallery.py), then the
# full-size figures stored under docs/figures. The whole build (examples, walkthrough
# notebook, API pages; `python -m sphinx -W -q -b html docs OUT` from a clean checkout) takes
# about 60-90 s: 61 s and 88 s of wall time (60 s and 80 s CPU) in two single runs on this
# project's shared 2-core x86_64 machine at load averages 1.1-1.3 and 2.0-2.6 (2026-11-25),
# of which the 20 examples took 23 s and 26 s; at a load average of about 4 it took 196 s.
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "examples",
    "filename_pattern": r"\.py$",  # execute every example, not only plot_*.py
    # one subsection (folder with a GALLERY_HEADER.rst) per paper, the core GDLN paper first
    "subsection_order": [
        "../examples/core",
        "../examples/kernels",
        "../examples/stochastic_depth",
        "../examples/frontier",
    ],
    "within_subsection_order": "gdln_gallery.example_order",  # the papers' order
    "reset_argv": "gdln_gallery.reset_argv",
    "image_scrapers": ("gdln_gallery.scrape_saved_pngs", "matplotlib"),
    "download_all_examples": False,
    "remove_config_comments": True,
    "min_reported_time": 1,
    "show_signature": False,
}
