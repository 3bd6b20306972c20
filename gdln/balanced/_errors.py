"""The errors of the λ-balanced solution: a problem or start it cannot solve exactly."""

from __future__ import annotations

from .._errors import GdlnError

__all__ = ["BalancedSpecError", "NotBalancedError"]


class BalancedSpecError(GdlnError, ValueError):
    """A graph, pathway or set of weights lies outside what the λ-balanced solution covers.

    The message names the file, the pathway or edge, and the reason.
    """


class NotBalancedError(BalancedSpecError):
    r"""A start is not λ-balanced: $\Lambda = W_2^\top W_2 - W_1W_1^\top \ne \lambda I$.

    Parameters
    ----------
    message
        The one-line message, with $\lVert\Lambda-\lambda I\rVert_F$ in it.
    pathway
        The pathway whose weights are not balanced, e.g. ``"x->h0->y"``.
    lam
        $\lambda = \operatorname{tr}\Lambda / N_h$, the closest multiple of the identity.
    residual
        $\lVert\Lambda - \lambda I\rVert_F$.

    Attributes
    ----------
    pathway
        As given.
    lam
        As given.
    residual
        As given.
    """

    def __init__(self, message: str, *, pathway: str, lam: float, residual: float) -> None:
        self.pathway = pathway
        self.lam = lam
        self.residual = residual
        super().__init__(message)
