"""gdln: the path-based theory of gated networks.

A Gated Deep Linear Network (GDLN) is an architecture graph whose nodes and edges carry
gates (Saxe, Sodhani & Lewallen 2022). gdln reads such graphs and their tasks from files,
enumerates paths, derives the path statistics and the exact reduced learning dynamics
symbolically, solves them numerically, and checks them against simulations.
"""

from importlib.metadata import PackageNotFoundError, version

from ._errors import GdlnError as GdlnError
from ._errors import GraphSpecError as GraphSpecError
from ._errors import NotDiagonalizableError as NotDiagonalizableError
from ._errors import TaskSpecError as TaskSpecError

try:
    __version__ = version("gdln")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"
