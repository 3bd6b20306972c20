"""The routes of :func:`gdln.timescales`, named in one table that imports nothing heavy."""

from __future__ import annotations

__all__ = ["ROUTES"]

ROUTES: dict[str, str] = {
    "auto": "aligned when the path statistics share bases, else asymptotic",
    "aligned": "leading order of the exact reduced ODE (Eq. 10), mode by mode",
    "asymptotic": "rank-one stages from each small pathway's residual correlation, any statistics",
}
"""Route name -> what it does (``route=`` of :func:`gdln.timescales`, ``--route``)."""
