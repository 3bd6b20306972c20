"""Either kind of deep gated network, for the functions that take both."""

from __future__ import annotations

from typing import TypeAlias

from ._conv import ConvDGN
from ._dgn import DGN

__all__: list[str] = []  # package-internal: the annotation of the kernels of a network

AnyDGN: TypeAlias = DGN | ConvDGN
"""A fully connected (:class:`~gdln.kernels.DGN`) or a convolutional
(:class:`~gdln.kernels.ConvDGN`) deep gated network."""
