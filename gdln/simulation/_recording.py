r"""What a simulation records, and when.

At each recorded step: the loss of Eq. (1) (Saxe et al. 2022) and its average within each
context, the singular values of every $W_e$, optionally the weights themselves, their
projections on given mode vectors (the reduced variables $b_e^\alpha$ of Eq. 9),
representational similarity matrices $h_v h_v^\top$ at hidden nodes (Fig. 4g) and the
losses and outputs on a second set of examples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from .._edge import Edge, edge_name
from ._data import Data
from ._errors import SimulationSpecError
from ._forward import Activations, forward
from ._plan import Plan

__all__ = ["Recorder", "projection_bases", "record_at"]


def record_at(steps: int, record_every: int, record_steps: Sequence[int] | None) -> set[int]:
    """The steps to record: every ``record_every`` (and the last), or exactly ``record_steps``."""
    if record_steps is None:
        return set(range(0, steps + 1, record_every)) | {steps}
    if max(record_steps) > steps:
        raise SimulationSpecError(
            f"record_steps: expected a non-empty list of ints in [0, steps={steps}], "
            f"got {list(record_steps)}"
        )
    return set(record_steps)


def projection_bases(
    net: Plan,
    bases: Mapping[Edge, tuple[np.ndarray, np.ndarray]] | None,
    dtype: torch.dtype,
    device: torch.device,
) -> dict[Edge, tuple[torch.Tensor, torch.Tensor]]:
    """The ``bases`` of :func:`gdln.simulate`, checked against the graph, as tensors."""
    out: dict[Edge, tuple[torch.Tensor, torch.Tensor]] = {}
    for key, pair in (bases or {}).items():
        e = (str(key[0]), str(key[1]))
        if e not in net.edges:
            raise SimulationSpecError(
                f"bases: {e!r} is not an edge of the graph; expected one of {list(net.edges)}"
            )
        try:
            left, right = (np.asarray(b, dtype=np.float64) for b in pair)
        except (TypeError, ValueError) as exc:
            raise SimulationSpecError(
                f"bases[{e!r}]: expected a pair (left, right) of arrays, got {pair!r}"
            ) from exc
        rows, cols = net.sizes[e[1]], net.sizes[e[0]]
        if (
            left.ndim != 2
            or right.ndim != 2
            or left.shape[0] != rows
            or right.shape[0] != cols
            or left.shape[1] != right.shape[1]
        ):
            raise SimulationSpecError(
                f"bases[{e!r}]: expected left ({rows}, k) and right ({cols}, k), got "
                f"{left.shape} and {right.shape}"
            )
        out[e] = (
            torch.as_tensor(left, dtype=dtype, device=device),
            torch.as_tensor(right, dtype=dtype, device=device),
        )
    return out


class Recorder:
    """Collects the series of a run, one row per recorded step; :meth:`arrays` stacks them.

    ``bases``: edge -> ``(left, right)`` mode vectors to project on; ``rsm`` and
    ``weights`` switch on the similarity matrices and the weights.
    """

    def __init__(
        self,
        net: Plan,
        train: Data,
        evaluation: Data | None,
        bases: Mapping[Edge, tuple[torch.Tensor, torch.Tensor]],
        rsm: bool,
        weights: bool,
    ) -> None:
        self.net, self.train, self.eval, self.bases, self.rsm = net, train, evaluation, bases, rsm
        self.weights = weights
        self.steps: list[int] = []
        self.rows: dict[str, list[np.ndarray]] = {}

    def _put(self, name: str, value: torch.Tensor) -> None:
        # copy: on CPU in float64 .numpy() shares memory with weights updated in place
        array = np.array(value.detach().to("cpu", torch.float64).numpy(), copy=True)
        self.rows.setdefault(name, []).append(array)

    def record(
        self,
        step: int,
        weights: Sequence[torch.Tensor],
        acts: Activations,
        per_example: torch.Tensor,
    ) -> None:
        """Record step ``step``: its weights, and the full-batch pass ``acts, per_example``."""
        net = self.net
        self.steps.append(step)
        self._put("loss", per_example @ self.train.w)
        ctx = per_example @ self.train.context_avg
        for c, label in enumerate(self.train.labels):
            self._put(f"loss/{label}", ctx[:, c])
        with torch.no_grad():
            for e, w in zip(net.edges, weights, strict=True):
                self._put(f"sv/{edge_name(e)}", torch.linalg.svdvals(w))
                if self.weights:
                    self._put(f"W/{edge_name(e)}", w)
                if e in self.bases:
                    left, right = self.bases[e]
                    self._put(f"proj/{edge_name(e)}", torch.einsum("ta,Sts,sa->Sa", left, w, right))
            rsm_acts = acts
            if self.eval is not None:
                eval_acts, eval_loss = forward(net, weights, self.eval, outputs=True)
                rsm_acts = eval_acts
                self._put("eval/loss", eval_loss @ self.eval.w)
                ectx = eval_loss @ self.eval.context_avg
                for c, label in enumerate(self.eval.labels):
                    self._put(f"eval/loss/{label}", ectx[:, c])
                self._put("eval/example_loss", eval_loss)
                for v in net.outputs:
                    self._put(f"eval/output/{v}", eval_acts[v])
            if self.rsm:
                for v in net.hidden:
                    a = rsm_acts[v]
                    self._put(f"rsm/{v}", a @ a.transpose(-1, -2))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """The recorded steps ``(T,)``, the loss ``(T, S)`` and every other series."""
        series = {k: np.stack(v) for k, v in self.rows.items()}
        loss = series.pop("loss")
        return np.asarray(self.steps), loss, series
