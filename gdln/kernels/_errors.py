"""The error of the deep-gated-network models."""

from __future__ import annotations

from .._errors import GdlnError

__all__ = ["DGNSpecError"]


class DGNSpecError(GdlnError, ValueError):
    """A deep gated network, or the data given to it, is malformed."""
