r"""ReLU networks trained by full-batch gradient descent, and the gated linear networks of their
activation patterns (reference for issue 37; imports no gdln).

A network with layer sizes $(n_0, n_1, \dots, n_L)$ computes, on examples in rows,
$z_l = h_{l-1}W_l^\top + b_l$, $h_l = \mathrm{ReLU}(z_l)$ for the hidden layers $l < L$ and
$f(x) = h_{L-1}W_L^\top + b_L$ (biases optional, absent by default). The loss is Eq. (1) of
Saxe, Sodhani & Lewallen (2022), $\tfrac12\langle\lVert y - f(x)\rVert^2\rangle$ averaged over
the examples (``reduction="mean"``) or summed (``reduction="sum"``, as Jarvis et al. 2025's
code does). Training is plain torch autograd in float64.

The activation pattern of layer $l$ is $P_l = \mathbf 1[z_l > 0]$ (examples x units). With
the patterns frozen, $h_l = P_l \odot z_l$ is a gated linear network (Sec. 2: "a ReLU
neuron's activity can be written as $\max(0, wx) = \mathrm{step}(wx)\,wx$"); its output and
gradient equal the ReLU network's wherever the patterns are those of the current weights
(the step function has zero derivative almost everywhere). :func:`gated_loss_and_grads`
computes that gated network independently (mask and autograd), and :func:`extract_gdln`
writes it as a GDLN in :mod:`reference.gated_flow`'s plain-data form: hidden units with
identical pattern columns become one gated node, examples with identical pattern rows one
context.

>>> import numpy as np
>>> X = np.array([[1.0, 1.0], [-1.0, -1.0]])
>>> P = patterns([np.array([[1.0, 0.0], [0.0, -1.0], [2.0, 0.0]]), np.ones((1, 3))], None, X)
>>> P[0].astype(int).tolist()
[[1, 0, 1], [0, 1, 0]]
>>> [units for _, units in group_columns(P[0])]
[[0, 2], [1]]
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from . import gated_flow as gf

Layers = list[np.ndarray]


def init_weights(
    layer_sizes: Sequence[int],
    sigma: float,
    seed: int,
    *,
    biases: bool = False,
    bias_sigma: float = 0.0,
) -> tuple[Layers, Layers | None]:
    """I.i.d. $\\mathcal N(0, \\sigma^2)$ weights, layer by layer from ``numpy.random.default_rng(seed)``.

    Returns ``(weights, biases)``: ``weights[l]`` has shape (n_{l+1}, n_l); ``biases`` is
    None, or per layer a vector drawn with ``bias_sigma`` (after all weights; 0: zeros).
    """
    rng = np.random.default_rng(seed)
    W = [rng.normal(0.0, sigma, (m, n)) for n, m in itertools.pairwise(layer_sizes)]
    if not biases:
        return W, None
    b = [rng.normal(0.0, bias_sigma, m) if bias_sigma else np.zeros(m) for m in layer_sizes[1:]]
    return W, b


def _tensors(arrays, grad: bool):
    return (
        None
        if arrays is None
        else [torch.tensor(np.asarray(a, dtype=float), requires_grad=grad) for a in arrays]
    )


def _forward(W, b, X, masks=None):
    """Pre-activations of the hidden layers and the output; ``masks`` freezes the gates."""
    h, pre = X, []
    for layer, w in enumerate(W):
        z = h @ w.T + (b[layer] if b is not None else 0.0)
        if layer == len(W) - 1:
            return pre, z
        pre.append(z)
        h = masks[layer] * z if masks is not None else torch.relu(z)
    raise AssertionError("unreachable")


def patterns(weights: Layers, biases: Layers | None, X: np.ndarray) -> list[np.ndarray]:
    """$P_l = \\mathbf 1[z_l > 0]$ for each hidden layer: bool arrays (examples, units)."""
    with torch.no_grad():
        pre, _ = _forward(
            _tensors(weights, False), _tensors(biases, False), torch.tensor(np.asarray(X, float))
        )
    return [z.numpy() > 0 for z in pre]


def _loss(out, Y, reduction):
    per_example = 0.5 * ((out - Y) ** 2).sum(dim=1)
    return per_example.mean() if reduction == "mean" else per_example.sum()


def _loss_and_grads(weights, biases, X, Y, reduction, masks):
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    W, b = _tensors(weights, True), _tensors(biases, True)
    Xt, Yt = torch.tensor(np.asarray(X, float)), torch.tensor(np.asarray(Y, float))
    m = None if masks is None else [torch.tensor(np.asarray(p, dtype=float)) for p in masks]
    _, out = _forward(W, b, Xt, m)
    loss = _loss(out, Yt, reduction)
    loss.backward()
    gW = [w.grad.numpy() for w in W]
    gb = None if b is None else [v.grad.numpy() for v in b]
    return float(loss.detach()), out.detach().numpy(), gW, gb


def relu_loss_and_grads(weights, biases, X, Y, *, reduction: str = "mean"):
    """``(loss, output, weight grads, bias grads)`` of the ReLU network (torch autograd)."""
    return _loss_and_grads(weights, biases, X, Y, reduction, None)


def gated_loss_and_grads(weights, biases, X, Y, masks, *, reduction: str = "mean"):
    """The same for the gated linear network $h_l = P_l \\odot z_l$ with the given masks frozen."""
    return _loss_and_grads(weights, biases, X, Y, reduction, masks)


@dataclass
class ReluRun:
    """What :func:`train` recorded.

    ``loss[k]``: the loss after k steps (k = 0..steps). ``flips[k]``: the number of
    (example, unit) pattern entries, all hidden layers, that differ between steps k-1 and k
    (``flips[0] = 0``). ``patterns[k]``, ``weights[k]``, ``biases[k]`` at the recorded steps.
    """

    loss: np.ndarray
    flips: np.ndarray
    patterns: dict[int, list[np.ndarray]] = field(default_factory=dict)
    weights: dict[int, Layers] = field(default_factory=dict)
    biases: dict[int, Layers | None] = field(default_factory=dict)


def train(
    X: np.ndarray,
    Y: np.ndarray,
    weights: Layers,
    biases: Layers | None = None,
    *,
    lr: float,
    steps: int,
    record: Sequence[int] = (),
    reduction: str = "mean",
) -> ReluRun:
    """Full-batch gradient descent $\\theta \\leftarrow \\theta - \\mathrm{lr}\\,\\nabla\\mathcal L$, float64.

    ``X`` (examples, n_0), ``Y`` (examples, n_L). Records the loss and the pattern flips at
    every step and the patterns and weights at the steps in ``record`` (step k = after k
    updates).
    """
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    W, b = _tensors(weights, True), _tensors(biases, True)
    params = W + (b or [])
    Xt, Yt = torch.tensor(np.asarray(X, float)), torch.tensor(np.asarray(Y, float))
    record = set(int(k) for k in record)
    losses, flips = np.empty(steps + 1), np.zeros(steps + 1, dtype=np.int64)
    run = ReluRun(losses, flips)
    before = None
    for k in range(steps + 1):
        pre, out = _forward(W, b, Xt)
        loss = _loss(out, Yt, reduction)
        losses[k] = float(loss.detach())
        now = torch.cat([z.detach() > 0 for z in pre], dim=1)
        if before is not None:
            flips[k] = int((now != before).sum())
        before = now
        if k in record:
            run.patterns[k] = [z.detach().numpy() > 0 for z in pre]
            run.weights[k] = [w.detach().numpy().copy() for w in W]
            run.biases[k] = None if b is None else [v.detach().numpy().copy() for v in b]
        if k == steps:
            break
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads, strict=True):
                p -= lr * g
    return run


# --------------------------------------------------------------------------------------
# Grouping by pattern, brute force


def group_columns(P: np.ndarray) -> list[tuple[tuple[bool, ...], list[int]]]:
    """Units (columns of ``P``) grouped by identical pattern column, in order of first unit."""
    groups: dict[tuple[bool, ...], list[int]] = {}
    for j in range(P.shape[1]):
        groups.setdefault(tuple(bool(v) for v in P[:, j]), []).append(j)
    return list(groups.items())


def group_rows(P: np.ndarray) -> list[tuple[tuple[bool, ...], list[int]]]:
    """Examples (rows of ``P``) grouped by identical pattern row, in order of first example."""
    return group_columns(np.asarray(P).T)


# --------------------------------------------------------------------------------------
# The GDLN of frozen patterns, in gated_flow's plain-data form


@dataclass(frozen=True)
class Extraction:
    """The GDLN of a ReLU network's patterns: ``network``, ``contexts``, ``weights`` (per edge),
    ``units[l][k]`` (the units of hidden layer l in node ``h{l}.{k}``) and ``examples[c]``
    (the examples of context ``c{c}``). Input node ``x``, output node ``y``, and with biases an
    input node ``one`` of size 1 whose value is 1 on every example."""

    network: gf.Network
    contexts: list[gf.Context]
    weights: dict[gf.Edge, np.ndarray]
    units: list[list[list[int]]]
    examples: list[list[int]]


def extract_gdln(
    weights: Layers,
    biases: Layers | None,
    X: np.ndarray,
    Y: np.ndarray,
    masks: Sequence[np.ndarray],
) -> Extraction:
    """Hidden units with identical pattern columns -> one gated node per group and layer;
    examples with identical rows of the joint pattern ``[P_1 | P_2 | ...]`` -> one context
    (probability = its share of the examples); node gate = the group's (constant) pattern value
    on the context's examples. Edges join every group of consecutive layers."""
    X, Y = np.asarray(X, float), np.asarray(Y, float)
    L = len(weights)
    units = [[u for _, u in group_columns(np.asarray(P))] for P in masks]
    rows = group_rows(np.hstack([np.asarray(P) for P in masks]))
    sizes = {"x": X.shape[1], "y": Y.shape[1]}
    nodes = [["x"]]
    for layer, groups in enumerate(units, start=1):
        names = [f"h{layer}.{k}" for k in range(len(groups))]
        sizes.update({n: len(g) for n, g in zip(names, groups, strict=True)})
        nodes.append(names)
    nodes.append(["y"])
    edges, W = [], {}
    for layer in range(1, L + 1):  # weights[layer - 1] maps layer-1 -> layer
        A = np.asarray(weights[layer - 1], float)
        src_groups = [list(range(X.shape[1]))] if layer == 1 else units[layer - 2]
        dst_groups = [list(range(Y.shape[1]))] if layer == L else units[layer - 1]
        for s, sg in zip(nodes[layer - 1], src_groups, strict=True):
            for t, tg in zip(nodes[layer], dst_groups, strict=True):
                edges.append((s, t))
                W[(s, t)] = A[np.ix_(tg, sg)]
        if biases is not None:
            sizes["one"] = 1
            for t, tg in zip(nodes[layer], dst_groups, strict=True):
                edges.append(("one", t))
                W[("one", t)] = np.asarray(biases[layer - 1], float)[tg][:, None]
    net = gf.Network(sizes, edges)
    contexts, examples = [], []
    for c, (row, idx) in enumerate(rows):
        # the joint row lists layer 1's units, then layer 2's, ...; a group's gate is its first unit's
        offsets = np.cumsum([0] + [np.asarray(P).shape[1] for P in masks])
        gates = {
            name: float(row[offsets[layer] + group[0]])
            for layer, (names, groups) in enumerate(zip(nodes[1:-1], units, strict=True))
            for name, group in zip(names, groups, strict=True)
        }
        Xc = {"x": X[idx]}
        if biases is not None:
            Xc["one"] = np.ones((len(idx), 1))
        contexts.append(
            gf.Context(f"c{c}", len(idx) / len(X), node_gates=gates, X=Xc, Y={"y": Y[idx]})
        )
        examples.append(list(idx))
    return Extraction(net, contexts, W, units, examples)


def to_layers(
    ex: Extraction, per_edge: dict[gf.Edge, np.ndarray], layer_sizes: Sequence[int]
) -> tuple[Layers, Layers | None]:
    """Per-edge matrices (weights or gradients of an :class:`Extraction`) back to full layers."""
    L = len(layer_sizes) - 1
    full = [np.zeros((m, n)) for n, m in itertools.pairwise(layer_sizes)]
    bias = [np.zeros(m) for m in layer_sizes[1:]] if ("one", "y") in per_edge else None
    every_in = list(range(layer_sizes[0]))
    every_out = list(range(layer_sizes[-1]))
    groups = [[every_in], *ex.units, [every_out]]
    names = (
        [["x"]]
        + [[f"h{layer}.{k}" for k in range(len(g))] for layer, g in enumerate(ex.units, 1)]
        + [["y"]]
    )
    for layer in range(1, L + 1):
        for s, sg in zip(names[layer - 1], groups[layer - 1], strict=True):
            for t, tg in zip(names[layer], groups[layer], strict=True):
                full[layer - 1][np.ix_(tg, sg)] = per_edge[(s, t)]
        if bias is not None:
            for t, tg in zip(names[layer], groups[layer], strict=True):
                bias[layer - 1][tg] = per_edge[("one", t)][:, 0]
    return full, bias


# --------------------------------------------------------------------------------------
# Context-level coarse-graining (measured, never assumed)


def gate_consistency(P: np.ndarray, context_of: Sequence[int]) -> float:
    """Share of (unit, context) pairs whose unit has one pattern value on every example of the context."""
    P, context_of = np.asarray(P, bool), np.asarray(context_of)
    held = [
        (P[context_of == c].all(axis=0) | (~P[context_of == c]).all(axis=0))
        for c in np.unique(context_of)
    ]
    return float(np.mean(held))


def context_sets(
    P: np.ndarray, context_of: Sequence[int], *, rule: str = "any"
) -> list[frozenset[int]]:
    """Per unit, the contexts in which it is on: on ``"any"`` example, on ``"all"`` of them, or on a
    ``"majority"`` (more than half) of the context's examples."""
    P, context_of = np.asarray(P, bool), np.asarray(context_of)
    cs = np.unique(context_of)
    frac = np.stack([P[context_of == c].mean(axis=0) for c in cs])  # contexts x units
    on = {"any": frac > 0, "all": frac == 1, "majority": frac > 0.5}[rule]
    return [
        frozenset(int(c) for c, o in zip(cs, on[:, j], strict=True) if o) for j in range(P.shape[1])
    ]


def unit_contributions(W_out: np.ndarray, H: np.ndarray) -> np.ndarray:
    """$\\lVert W_{:,u} h_u \\rVert_F$ per unit u: the size of its share of the output (examples x outputs)."""
    W_out, H = np.asarray(W_out, float), np.asarray(H, float)
    return np.linalg.norm(W_out, axis=0) * np.linalg.norm(H, axis=0)
