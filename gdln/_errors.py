"""One exception hierarchy for gdln.

Every message names where the problem is (file, key or node), the value received and
what was expected, so that a person can act on it without reading a traceback.
"""

from __future__ import annotations

__all__ = [
    "GdlnError",
    "GraphSpecError",
    "NotDiagonalizableError",
    "TaskSpecError",
    "TooManyPathsError",
]


class GdlnError(Exception):
    """Base class of every error gdln raises on purpose."""


class GraphSpecError(GdlnError, ValueError):
    """A graph file, or the parameters it is read with, is malformed.

    Parameters
    ----------
    message
        What is wrong and what was expected.
    source
        The file (or other origin) the problem was found in.
    key
        Where in that file: a key path such as ``edges[2].target``.
    """

    def __init__(self, message: str, *, source: str | None = None, key: str | None = None):
        self.source = source
        self.key = key
        where = ": ".join(part for part in (source, key) if part)
        super().__init__(f"{where}: {message}" if where else message)


class TaskSpecError(GraphSpecError):
    """A task (data, gates, contexts) is malformed or does not fit its graph."""


class NotDiagonalizableError(GdlnError, ValueError):
    """The path statistics admit no common bases (Eqs. 7-8 of Saxe et al. 2022).

    The exact reduction of Eq. (10) needs output bases $U_v$ and input bases $V_v$ in
    which every $\\Sigma^{yx}(p)$ and $\\Sigma^{x}(j,p)$ is diagonal. ``paths`` names the
    statistics that stay off-diagonal and ``residual`` is their largest relative
    off-diagonal part.
    """

    def __init__(self, message: str, *, paths: tuple[str, ...] = (), residual: float = 0.0):
        self.paths = paths
        self.residual = residual
        super().__init__(message)


class TooManyPathsError(GdlnError):
    """A problem has too many paths for the symbolic route, which lists them.

    ``paths`` is the number of active input-output paths (counted, not listed). The moment
    route (:func:`gdln.expected_dynamics`) gives the same loss and dynamics without paths.
    """

    def __init__(self, message: str, *, paths: int = 0):
        self.paths = paths
        super().__init__(message)
