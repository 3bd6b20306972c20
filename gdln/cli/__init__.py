"""The ``gdln`` command line: a thin layer that parses arguments and calls the public API.

One module per command group: :mod:`._theory` (paths, stats, derive, solve),
:mod:`._simulate` (simulate, compare), :mod:`._kernel` and :mod:`._sd`; :mod:`._main` holds
the group, its command table and the error handling, :mod:`._common` the options and the
output writer that every command shares.
"""

from ._main import cli as cli
from ._main import main as main

__all__ = ["cli", "main"]
