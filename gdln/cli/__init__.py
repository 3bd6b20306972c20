"""The ``gdln`` command line: a thin layer that parses arguments and calls the public API."""

from ._graph import cli as cli
from ._graph import main as main

__all__ = ["cli", "main"]
