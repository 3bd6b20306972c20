r"""What a simulation records, and when.

At each recorded step: the loss of Eq. (1) (Saxe et al. 2022) and its average within each
context, the singular values of every $W_e$, optionally the weights themselves, their
projections on given mode vectors (the reduced variables $b_e^\alpha$ of Eq. 9),
representational similarity matrices $h_v h_v^\top$ at hidden nodes (Fig. 4g) and the
losses and outputs on a second set of examples.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

import numpy as np
import torch

from .._edge import Edge
from ..solution._recording import Recording
from ..solution._series import EVAL_EXAMPLE_LOSS, EVAL_LOSS, context_key, edge_key, node_key
from ._data import Data
from ._errors import SimulationSpecError
from ._forward import forward
from ._plan import Plan
from ._weights import Weights

__all__ = ["Recorder", "projection_bases", "record_at"]

Names = str | tuple[str, ...]
"""A series' name, or the names of the slices of a tensor along axis 1."""

_Bases = tuple[Names, int | None, torch.Tensor, torch.Tensor]
"""Projection names, the slot of the edge in its block (``None``: the block, or all its
slots stacked), and the left and right bases."""


def record_at(steps: int, recording: Recording) -> set[int]:
    """The steps of a run of ``steps`` steps that ``recording`` records (its ``every``-th
    and the last, or exactly its ``steps``), as a set to test each step against."""
    if recording.steps is not None and max(recording.steps) > steps:
        raise SimulationSpecError(
            f"record_steps: expected a non-empty list of ints in [0, steps={steps}], "
            f"got {list(recording.steps)}"
        )
    return set(recording.steps_of(steps).tolist())


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


class Divergence(Protocol):
    """What :meth:`Recorder.record` checks: a :class:`~gdln.simulation._training.Divergence`."""

    def state(self) -> list[torch.Tensor]: ...
    def raise_if_bad(self, ring: np.ndarray) -> None: ...


SVD_CHUNK = 16
"""Recorded steps whose singular values the second thread computes in one batched SVD."""


class Recorder:
    """Collects the series of a run, one row per recorded step; :meth:`arrays` stacks them.

    ``bases``: edge -> ``(left, right)`` mode vectors to project on; ``rsm`` and
    ``weights`` switch on the similarity matrices and the weights; ``patterns``: the ReLU
    nodes whose activation patterns $1[z_v > 0]$ are recorded; ``singular_values``
    ``False`` leaves the singular values out (and then ``background`` must be ``False``:
    :func:`gdln.simulate` decides both). ``background``: the singular values are computed
    on a second thread while training goes on (the SVDs were half of a small network's
    run; torch releases the GIL in them), from copies of the weights taken at the steps,
    :data:`SVD_CHUNK` recorded steps in one batched SVD per block (a hand-over per step
    cost more than a small network's SVDs); :meth:`arrays` waits for them, :meth:`close`
    ends the thread. Used as a context manager, it is closed on the way out.
    """

    def __init__(
        self,
        net: Plan,
        train: Data,
        evaluation: Data | None,
        bases: Mapping[Edge, tuple[torch.Tensor, torch.Tensor]],
        rsm: bool,
        weights: bool,
        *,
        background: bool = False,
        patterns: Sequence[Hashable] = (),
        singular_values: bool = True,
    ) -> None:
        self.net, self.train, self.eval, self.bases, self.rsm = net, train, evaluation, bases, rsm
        self.weights = weights
        self.patterns = {node_key("pattern", v): v for v in patterns}
        self.steps: list[int] = []
        self.rows: dict[Names, list[np.ndarray]] = {}
        self.block_bases: dict[int, list[_Bases]] | None = None
        self.singular_values = singular_values
        self.pool = (
            ThreadPoolExecutor(1, "gdln-svd", initializer=_same_threads) if background else None
        )
        self.sv_names: list[Names] = []  # the singular values' series, one per block
        self.copies: list[list[torch.Tensor]] = []  # per recorded step not yet sent: blocks
        self.chunks: list[Future[list[np.ndarray]]] = []  # per chunk: (steps, ...) per block

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the singular values' thread (waiting for the SVDs it has begun)."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def record(
        self,
        step: int,
        weights: Weights,
        acts: Mapping[Hashable, torch.Tensor],
        per_example: torch.Tensor,
        *,
        divergence: Divergence | None = None,
    ) -> None:
        """Record step ``step``: its weights, and the full-batch pass ``acts, per_example``.

        Every series comes to the host in one copy, with ``divergence``'s state, which is
        checked before anything is stored.
        """
        series = self._series(weights, acts, per_example)
        # one batched SVD per block, of a copy with non-finite entries zeroed (a diverged
        # step raises before storing), here or on the second thread
        blocks = (
            [
                (_block_keys("sv", weights, b, self.net.edges), block.detach().nan_to_num(0, 0, 0))
                for b, block in enumerate(weights.blocks)
            ]
            if self.singular_values
            else []
        )
        if self.pool is None:
            series += [(names, singular_values(copy)) for names, copy in blocks]
        if divergence is not None:
            series += [("", t) for t in divergence.state()]
        flat = torch.cat([t.detach().to(torch.float64).flatten() for _, t in series])
        host = flat.cpu().numpy()
        sizes = np.cumsum([t.numel() for _, t in series])[:-1]
        arrays = [
            a.reshape(t.shape) for a, (_, t) in zip(np.split(host, sizes), series, strict=True)
        ]
        if divergence is not None:
            divergence.raise_if_bad(arrays[-1])
        self.steps.append(step)
        for (names, _), array in zip(series, arrays, strict=True):
            if names:
                self.rows.setdefault(names, []).append(array)
        if self.pool is not None:
            self.sv_names = [names for names, _ in blocks]
            self.copies.append([copy for _, copy in blocks])
            if len(self.copies) == SVD_CHUNK:
                self._send_copies()

    def _send_copies(self) -> None:
        """Hand the copies taken so far to the second thread, as one chunk."""
        if self.copies and self.pool is not None:
            self.chunks.append(self.pool.submit(_chunk_singular_values, self.copies))
            self.copies = []

    def _series(
        self, weights: Weights, acts: Mapping[Hashable, torch.Tensor], per_example: torch.Tensor
    ) -> list[tuple[Names, torch.Tensor]]:
        """The recorded series of one step, as tensors on the device.

        A tuple of names stands for the slices of its tensor along axis 1, one series each.
        """
        out: list[tuple[Names, torch.Tensor]] = [("loss", per_example @ self.train.w)]
        labels = tuple(context_key(label) for label in self.train.labels)
        out.append((labels, self.train.per_context(per_example)))
        with torch.no_grad():
            out += self._weight_series(weights)
            rsm_acts = acts
            if self.eval is not None:
                eval_acts, eval_loss = forward(self.net, weights, self.eval, outputs=True)
                rsm_acts = eval_acts
                out.append((EVAL_LOSS, eval_loss @ self.eval.w))
                labels = tuple(context_key(lab, evaluation=True) for lab in self.eval.labels)
                out.append((labels, self.eval.per_context(eval_loss)))
                out.append((EVAL_EXAMPLE_LOSS, eval_loss))
                out += [(node_key("output", v), eval_acts[v]) for v in self.net.outputs]
            if self.rsm:
                out += [(node_key("rsm", v), rsm_acts[v] @ rsm_acts[v].mT) for v in self.net.hidden]
            out += [(name, acts[v] > 0) for name, v in self.patterns.items()]  # 1[z > 0]
        return out

    def _weight_series(self, weights: Weights) -> list[tuple[Names, torch.Tensor]]:
        """Weights and projections (the singular values are :meth:`record`'s).

        A block of stacked edges gives one tensor of each, its slots along axis 1.
        """
        out: list[tuple[Names, torch.Tensor]] = []
        for b, block in enumerate(weights.blocks):
            if self.weights:
                out.append((_block_keys("W", weights, b, self.net.edges), block))
        for b, groups in self._bases(weights).items():
            block = weights.blocks[b]
            for group, slot, left, right in groups:
                w = block if isinstance(group, tuple) or slot is None else block[:, slot]
                # b^a = l_a^T W r_a for each mode a (stacked slots: for each edge too), as
                # two products: einsum would plan its contraction at every record
                out.append((group, ((w @ right) * left).sum(-2)))
        return out

    def _bases(self, weights: Weights) -> dict[int, list[_Bases]]:
        """The projection bases of each block: stacked when every slot has bases of one
        shape, else one entry per edge (made at the first record)."""
        if self.block_bases is not None:
            return self.block_bases
        found: dict[int, list[_Bases]] = {}
        for b, block in enumerate(weights.blocks):
            edges = [i for i, (bb, _) in enumerate(weights.where) if bb == b]
            edges.sort(key=lambda i: weights.where[i][1] or 0)
            pairs = [self.bases.get(self.net.edges[i]) for i in edges]
            if not any(p is not None for p in pairs):
                continue
            stacked = block.ndim == 4
            shapes = {None if p is None else (p[0].shape, p[1].shape) for p in pairs}
            if stacked and len(shapes) == 1 and None not in shapes:
                names = tuple(edge_key("proj", self.net.edges[i]) for i in edges)
                left = torch.stack([p[0] for p in pairs if p is not None])
                right = torch.stack([p[1] for p in pairs if p is not None])
                found[b] = [(names, None, left, right)]
                continue
            found[b] = []
            for i, pair in zip(edges, pairs, strict=True):
                if pair is not None:
                    name = edge_key("proj", self.net.edges[i])
                    found[b].append((name, weights.where[i][1], *pair))
        self.block_bases = found
        return found

    def arrays(self) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """The recorded steps ``(T,)``, the loss ``(T, S)`` and every other series."""
        series: dict[str, np.ndarray] = {}
        self._send_copies()
        done = [chunk.result() for chunk in self.chunks]
        stacks = {names: np.stack(rows) for names, rows in self.rows.items()}
        stacks.update(  # after the others, as when they are computed here
            (names, np.concatenate([chunk[b] for chunk in done]))
            for b, names in enumerate(self.sv_names)
        )
        for names, stacked in stacks.items():
            if names in self.patterns:  # recorded as 0/1, stored as bool
                stacked = stacked > 0.5
            if isinstance(names, str):
                series[names] = stacked
            else:
                series.update((name, stacked[:, :, j]) for j, name in enumerate(names))
        loss = series.pop("loss")
        return np.asarray(self.steps), loss, series


def _same_threads() -> None:
    """Give the second thread the run's thread count (set before its first record): a new
    thread starts with OpenMP's default team, every core, and its SVDs would then differ
    from the run's own in the last bits."""
    torch.set_num_threads(torch.get_num_threads())


def singular_values(block: torch.Tensor) -> torch.Tensor:
    """The singular values of each matrix of ``block``, in descending order.

    A wide matrix is factored as its transpose (the same values): LAPACK's SVD of a
    ``7 x 64`` matrix took twice as long as of its ``64 x 7`` transpose.
    """
    return torch.linalg.svdvals(block.mT if block.shape[-2] < block.shape[-1] else block)


def _chunk_singular_values(copies: list[list[torch.Tensor]]) -> list[np.ndarray]:
    """The second thread's job: per block, :func:`singular_values` of its copies at the
    chunk's recorded steps stacked ``(steps, ...)``, in float64 as numpy (on the CPU only:
    no copy from a device)."""
    return [
        singular_values(torch.stack(list(block))).to(torch.float64).numpy()
        for block in zip(*copies, strict=True)
    ]


def _block_keys(quantity: str, weights: Weights, b: int, edges: Sequence[Edge]) -> Names:
    """The series name of ``quantity`` of block ``b``'s edge, or of each of its slots in
    order (a stacked block)."""
    slots = {slot: i for i, (bb, slot) in enumerate(weights.where) if bb == b}
    if None in slots:
        return edge_key(quantity, edges[slots[None]])
    return tuple(edge_key(quantity, edges[slots[j]]) for j in range(len(slots)))
