r"""Full-matrix gradient flow of a gated deep linear network, written from the equations.

Reference for tests (imports no gdln). A network is plain data: nodes with sizes, edges
``(source, target)``, and a list of :class:`Context`, each with its probability $\pi_c$, its
node and edge gates (0/1, default 1) and its data, either explicit examples (``X`` per input
node, ``Y`` per output node, rows are examples) or second moments. Weights are a dict
``edge -> array (out, in)``.

Within a context the gates are fixed, so the GDLN of Saxe, Sodhani & Lewallen (2022) is a
linear map. Its forward pass (Sec. 2) is, in topological order,

$$h_v = g_v \sum_{q:\,t(q)=v} g_q W_q h_{s(q)}, \qquad h_v = x_v \text{ on input nodes},$$

and the loss is Eq. (1), $\mathcal L = \sum_c \pi_c \mathcal L_c$ with
$\mathcal L_c = \langle \tfrac12 \sum_{o} \lVert y_o - h_o \rVert^2 \rangle_c$. With
$T^c_{oi}$ the gated transfer matrix from input $i$ to output $o$ (the sum over paths
$i \to o$ of gated weight products),

$$\mathcal L_c = \sum_o \Big[\tfrac12 \operatorname{tr}\Sigma^y_o
  - \sum_i \operatorname{tr}(T_{oi}\Sigma^{xy}_{io})
  + \tfrac12 \sum_{i,i'} \operatorname{tr}(T_{oi}\Sigma^x_{ii'}T_{oi'}^\top)\Big].$$

The gradient is written by hand (backpropagation through the gated forward pass: the
error $E_{oi} = \partial\mathcal L_c/\partial T_{oi} = \sum_{i'} T_{oi'}\Sigma^x_{i'i} -
\Sigma^{yx}_{oi}$ is carried back to every node, Eqs. (3)-(4) summed over paths), and the
flow is Eq. (2) with optional weight decay, $\tau\,dW_e/dt = -\partial\mathcal L/\partial W_e
- \gamma W_e$, integrated by ``scipy.integrate.solve_ivp`` (DOP853, rtol 1e-10, atol 1e-12).
Gradient descent with learning rate ``lr`` is the Euler step $dt = $ ``lr`` of that flow
($\tau = 1$).

A schedule (:func:`run_schedule`) is a list of :class:`Phase`, each a duration and the
probability of each context; each phase is integrated from the previous phase's end state
with a fresh integrator (no step across the jump of the right-hand side), and every
context's own loss is recorded at the requested times, also while its probability is 0.

Example (one always-on linear layer on $y = x$, $\Sigma^x = 1$):

>>> import numpy as np
>>> net = Network({"x": 1, "y": 1}, [("x", "y")])
>>> ctx = Context("a", Sigma_x={("x", "x"): [[1.0]]}, Sigma_yx={("y", "x"): [[1.0]]},
...               Sigma_y={"y": 1.0})
>>> W = flow(net, {("x", "y"): np.zeros((1, 1))}, [ctx], [0.0, 1.0])
>>> bool(abs(W[1][("x", "y")][0, 0] - (1 - np.exp(-1.0))) < 1e-9)
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.integrate import solve_ivp

Edge = tuple[str, str]
Weights = dict[Edge, np.ndarray]

RTOL = 1e-10
ATOL = 1e-12


# --------------------------------------------------------------------------------------
# The network and its contexts, as plain data


@dataclass(frozen=True)
class Network:
    """Nodes with sizes and directed edges ``(source, target)``; must be acyclic.

    Input nodes are the nodes without incoming edges, output nodes those without outgoing
    edges (Sec. 2 of Saxe et al. 2022). ``order`` is a topological order.
    """

    sizes: Mapping[str, int]
    edges: Sequence[Edge]
    order: tuple[str, ...] = field(init=False)
    inputs: tuple[str, ...] = field(init=False, repr=False)
    outputs: tuple[str, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        sizes = {str(v): int(n) for v, n in self.sizes.items()}
        edges = tuple((str(s), str(t)) for s, t in self.edges)
        if len(set(edges)) != len(edges):
            raise ValueError("an edge is listed twice")
        for s, t in edges:
            if s not in sizes or t not in sizes:
                raise ValueError(f"edge {s}->{t} names a node without a size")
        touched = {v for e in edges for v in e}
        if touched != set(sizes):
            raise ValueError(f"nodes without edges: {sorted(set(sizes) - touched)}")
        # Kahn's algorithm, keeping the order in which nodes were given
        indegree = {v: 0 for v in sizes}
        for _, t in edges:
            indegree[t] += 1
        ready = [v for v in sizes if indegree[v] == 0]
        order: list[str] = []
        while ready:
            v = ready.pop(0)
            order.append(v)
            for s, t in edges:
                if s == v:
                    indegree[t] -= 1
                    if indegree[t] == 0:
                        ready.append(t)
        if len(order) != len(sizes):
            raise ValueError("the graph has a cycle")
        object.__setattr__(self, "sizes", sizes)
        object.__setattr__(self, "edges", edges)
        object.__setattr__(self, "order", tuple(order))
        object.__setattr__(self, "inputs", tuple(v for v in order if not self.incoming(v)))
        object.__setattr__(self, "outputs", tuple(v for v in order if not self.outgoing(v)))

    def incoming(self, v: str) -> list[Edge]:
        return [e for e in self.edges if e[1] == v]

    def outgoing(self, v: str) -> list[Edge]:
        return [e for e in self.edges if e[0] == v]

    def shape(self, e: Edge) -> tuple[int, int]:
        """The shape of $W_e$: (size of the target, size of the source)."""
        return self.sizes[e[1]], self.sizes[e[0]]


@dataclass(frozen=True)
class Context:
    r"""One gating of the network with its data.

    ``node_gates`` / ``edge_gates`` map a node / edge to its gate (missing: 1; input nodes
    carry no gate). Data: either ``X`` (input node -> (n, size)) and ``Y`` (output node ->
    (n, size)), the same n rows, or moments ``Sigma_x`` ((u, v) -> $E[x_u x_v^\top]$, a
    missing pair is the transpose of (v, u) or zero), ``Sigma_yx`` ((o, u) -> $E[y_o
    x_u^\top]$, missing: zero) and optionally ``Sigma_y`` (o -> $E[y_o y_o^\top]$ or its
    trace; missing: 0, i.e. the loss is then known only up to that constant).
    """

    label: str
    probability: float = 1.0
    node_gates: Mapping[str, float] = field(default_factory=dict)
    edge_gates: Mapping[Edge, float] = field(default_factory=dict)
    X: Mapping[str, np.ndarray] | None = None
    Y: Mapping[str, np.ndarray] | None = None
    Sigma_x: Mapping[tuple[str, str], np.ndarray] | None = None
    Sigma_yx: Mapping[tuple[str, str], np.ndarray] | None = None
    Sigma_y: Mapping[str, np.ndarray | float] | None = None

    def __post_init__(self) -> None:
        examples = self.X is not None or self.Y is not None
        moments = self.Sigma_x is not None or self.Sigma_yx is not None
        if examples == moments:
            raise ValueError(
                f"context {self.label!r}: give either X and Y, or Sigma_x and Sigma_yx"
            )
        if examples and (self.X is None or self.Y is None):
            raise ValueError(f"context {self.label!r}: examples need both X and Y")
        if moments and (self.Sigma_x is None or self.Sigma_yx is None):
            raise ValueError(f"context {self.label!r}: moments need both Sigma_x and Sigma_yx")

    def node_gate(self, v: str) -> float:
        return float(self.node_gates.get(v, 1.0))

    def edge_gate(self, e: Edge) -> float:
        return float(self.edge_gates.get(e, 1.0))


@dataclass(frozen=True)
class Moments:
    """Second moments of one context: ``xx[(u, v)]``, ``yx[(o, u)]``, ``yy[o]`` (a trace)."""

    xx: dict[tuple[str, str], np.ndarray]
    yx: dict[tuple[str, str], np.ndarray]
    yy: dict[str, float]


def moments(net: Network, ctx: Context) -> Moments:
    """The second moments of a context's data (Eqs. 5-6 before gating), per node pair."""
    ins, outs, n = net.inputs, net.outputs, net.sizes
    for v in ctx.node_gates:
        if v in ins:
            raise ValueError(f"context {ctx.label!r}: input node {v!r} cannot carry a gate")
    if ctx.X is not None and ctx.Y is not None:
        X = {u: np.atleast_2d(np.asarray(ctx.X[u], dtype=float)) for u in ins}
        Y = {o: np.atleast_2d(np.asarray(ctx.Y[o], dtype=float)) for o in outs}
        rows = {a.shape[0] for a in (*X.values(), *Y.values())}
        if len(rows) != 1:
            raise ValueError(f"context {ctx.label!r}: X and Y have different numbers of rows")
        m = rows.pop()
        xx = {(u, v): X[u].T @ X[v] / m for u in ins for v in ins}
        yx = {(o, u): Y[o].T @ X[u] / m for o in outs for u in ins}
        yy = {o: float((Y[o] ** 2).sum() / m) for o in outs}
        return Moments(xx, yx, yy)
    given_xx = {k: np.asarray(a, dtype=float) for k, a in (ctx.Sigma_x or {}).items()}
    given_yx = {k: np.asarray(a, dtype=float) for k, a in (ctx.Sigma_yx or {}).items()}
    xx = {}
    for u in ins:
        for v in ins:
            if (u, v) in given_xx:
                xx[(u, v)] = given_xx[(u, v)].reshape(n[u], n[v])
            elif (v, u) in given_xx:
                xx[(u, v)] = given_xx[(v, u)].reshape(n[v], n[u]).T
            else:
                xx[(u, v)] = np.zeros((n[u], n[v]))
    yx = {
        (o, u): given_yx[(o, u)].reshape(n[o], n[u])
        if (o, u) in given_yx
        else np.zeros((n[o], n[u]))
        for o in outs
        for u in ins
    }
    yy = {o: 0.0 for o in outs}
    for o, a in (ctx.Sigma_y or {}).items():
        a = np.asarray(a, dtype=float)
        yy[o] = float(np.trace(a)) if a.ndim == 2 else float(a)
    return Moments(xx, yx, yy)


# --------------------------------------------------------------------------------------
# Forward pass, transfer matrices, loss (Eq. 1)


def forward(
    net: Network,
    weights: Mapping[Edge, np.ndarray],
    ctx: Context,
    X: Mapping[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Every node's activity on examples (rows): $h_v = g_v \\sum_q g_q W_q h_{s(q)}$."""
    X = ctx.X if X is None else X
    if X is None:
        raise ValueError(f"context {ctx.label!r} has no examples; pass X")
    h: dict[str, np.ndarray] = {}
    for v in net.order:
        if v in net.inputs:
            h[v] = np.atleast_2d(np.asarray(X[v], dtype=float))
            continue
        total = sum(ctx.edge_gate(q) * h[q[0]] @ np.asarray(weights[q]).T for q in net.incoming(v))
        h[v] = ctx.node_gate(v) * total
    return h


def outputs(
    net: Network,
    weights: Mapping[Edge, np.ndarray],
    ctx: Context,
    X: Mapping[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """The network output per output node on examples (rows), in context ``ctx``."""
    h = forward(net, weights, ctx, X)
    return {o: h[o] for o in net.outputs}


def transfers(
    net: Network, weights: Mapping[Edge, np.ndarray], ctx: Context
) -> dict[str, dict[str, np.ndarray]]:
    """``A[i][v]``: the gated linear map from input node ``i`` to node ``v`` (|v| x |i|).

    ``A[i][o]`` for an output ``o`` is $T_{oi}$, the sum over paths $i \\to o$ of $g_p W_p$.
    """
    A: dict[str, dict[str, np.ndarray]] = {}
    for i in net.inputs:
        a: dict[str, np.ndarray] = {}
        for v in net.order:
            if v in net.inputs:
                a[v] = np.eye(net.sizes[i]) if v == i else np.zeros((net.sizes[v], net.sizes[i]))
                continue
            total = sum(
                ctx.edge_gate(q) * np.asarray(weights[q]) @ a[q[0]] for q in net.incoming(v)
            )
            a[v] = ctx.node_gate(v) * total
        A[i] = a
    return A


def transfer(
    net: Network, weights: Mapping[Edge, np.ndarray], ctx: Context
) -> dict[tuple[str, str], np.ndarray]:
    """$T_{oi}$ per (output, input) pair in context ``ctx``."""
    A = transfers(net, weights, ctx)
    return {(o, i): A[i][o] for o in net.outputs for i in net.inputs}


def context_loss(net: Network, weights: Mapping[Edge, np.ndarray], ctx: Context) -> float:
    """$\\mathcal L_c$ of Eq. (1) within one context (from its moments)."""
    m = moments(net, ctx)
    T = transfer(net, weights, ctx)
    ins = net.inputs
    total = 0.0
    for o in net.outputs:
        total += 0.5 * m.yy[o]
        for i in ins:
            total -= np.sum(T[(o, i)] * m.yx[(o, i)])
            for j in ins:
                total += 0.5 * np.sum((T[(o, i)] @ m.xx[(i, j)]) * T[(o, j)])
    return float(total)


def _probabilities(
    contexts: Sequence[Context], probabilities: Mapping[str, float] | None
) -> list[float]:
    labels = [c.label for c in contexts]
    if len(set(labels)) != len(labels):
        raise ValueError(f"context labels repeat: {labels}")
    if probabilities is None:
        return [float(c.probability) for c in contexts]
    unknown = set(probabilities) - set(labels)
    if unknown:
        raise ValueError(
            f"probabilities name unknown contexts {sorted(unknown)}; contexts are {labels}"
        )
    p = [float(probabilities.get(label, 0.0)) for label in labels]
    if min(p) < 0 or abs(sum(p) - 1.0) > 1e-12:
        raise ValueError(
            f"probabilities must be >= 0 and sum to 1, got {dict(zip(labels, p, strict=True))}"
        )
    return p


def loss(
    net: Network,
    weights: Mapping[Edge, np.ndarray],
    contexts: Sequence[Context],
    probabilities: Mapping[str, float] | None = None,
) -> float:
    """$\\mathcal L = \\sum_c \\pi_c \\mathcal L_c$ (Eq. 1); ``probabilities`` overrides $\\pi_c$."""
    p = _probabilities(contexts, probabilities)
    return float(
        sum(pc * context_loss(net, weights, c) for pc, c in zip(p, contexts, strict=True) if pc)
    )


# --------------------------------------------------------------------------------------
# Gradient (by hand), flow, gradient descent


def context_gradient(net: Network, weights: Mapping[Edge, np.ndarray], ctx: Context) -> Weights:
    """$\\partial \\mathcal L_c / \\partial W_e$ for every edge, by backpropagation.

    Forward: ``A[i][v]`` (:func:`transfers`). Output error $E_{oi} = \\sum_{i'} T_{oi'}
    \\Sigma^x_{i'i} - \\Sigma^{yx}_{oi}$. Backward, per input $i$: $\\delta_o = E_{oi}$,
    $\\delta_v = \\sum_{q:\\,s(q)=v} (g_{t(q)} g_q W_q)^\\top \\delta_{t(q)}$. Then
    $\\partial\\mathcal L_c/\\partial W_e = g_{t(e)} g_e \\sum_i \\delta_{t(e)} A[i][s(e)]^\\top$,
    which is Eqs. (3)-(4) with the sum over paths through $e$ done by the two passes.
    """
    m = moments(net, ctx)
    A = transfers(net, weights, ctx)
    ins = net.inputs
    grad = {e: np.zeros(net.shape(e)) for e in net.edges}
    for i in ins:
        delta: dict[str, np.ndarray] = {}
        for v in reversed(net.order):
            if v in ins:
                continue
            if not net.outgoing(v):  # an output node
                delta[v] = sum(A[j][v] @ m.xx[(j, i)] for j in ins) - m.yx[(v, i)]
            else:
                delta[v] = sum(
                    ctx.node_gate(q[1]) * ctx.edge_gate(q) * np.asarray(weights[q]).T @ delta[q[1]]
                    for q in net.outgoing(v)
                )
        for e in net.edges:
            s, t = e
            grad[e] += ctx.node_gate(t) * ctx.edge_gate(e) * delta[t] @ A[i][s].T
    return grad


def gradient(
    net: Network,
    weights: Mapping[Edge, np.ndarray],
    contexts: Sequence[Context],
    probabilities: Mapping[str, float] | None = None,
) -> Weights:
    """$\\partial \\mathcal L/\\partial W_e = \\sum_c \\pi_c \\partial \\mathcal L_c/\\partial W_e$."""
    p = _probabilities(contexts, probabilities)
    total = {e: np.zeros(net.shape(e)) for e in net.edges}
    for pc, c in zip(p, contexts, strict=True):
        if pc:
            for e, g in context_gradient(net, weights, c).items():
                total[e] += pc * g
    return total


def pack(net: Network, weights: Mapping[Edge, np.ndarray]) -> np.ndarray:
    """All weights as one vector (edges in ``net.edges`` order, each row-major)."""
    return np.concatenate([np.asarray(weights[e], dtype=float).reshape(-1) for e in net.edges])


def unpack(net: Network, y: np.ndarray) -> Weights:
    """The inverse of :func:`pack`."""
    out, k = {}, 0
    for e in net.edges:
        r, c = net.shape(e)
        out[e] = np.array(y[k : k + r * c]).reshape(r, c)
        k += r * c
    return out


def _check_weights(net: Network, weights: Mapping[Edge, np.ndarray]) -> None:
    for e in net.edges:
        if e not in weights:
            raise ValueError(f"no weights for edge {e[0]}->{e[1]}")
        if np.shape(weights[e]) != net.shape(e):
            raise ValueError(
                f"W[{e[0]}->{e[1]}] has shape {np.shape(weights[e])}, expected {net.shape(e)}"
            )


def with_moments(net: Network, contexts: Sequence[Context]) -> list[Context]:
    """The same contexts with their data as moments (computed once, for repeated gradients)."""
    out = []
    for c in contexts:
        m = moments(net, c)
        out.append(
            Context(
                c.label,
                c.probability,
                c.node_gates,
                c.edge_gates,
                Sigma_x=m.xx,
                Sigma_yx=m.yx,
                Sigma_y=m.yy,
            )
        )
    return out


def _integrate(net, w0, contexts, p, t0, t1, t_eval, tau, gamma, rtol, atol):
    """One solve_ivp run on [t0, t1] (one phase): states at t_eval and at t1."""
    contexts = with_moments(net, contexts)

    def rhs(_t, y):
        g = gradient(net, unpack(net, y), contexts, p)
        return -(pack(net, g) + gamma * y) / tau

    y0 = pack(net, w0)
    t_eval = [float(t) for t in t_eval]
    if t1 == t0:
        return [unpack(net, y0) for _ in t_eval], unpack(net, y0)
    marks = t_eval if t_eval and t_eval[-1] == t1 else [*t_eval, t1]
    sol = solve_ivp(rhs, (t0, t1), y0, method="DOP853", t_eval=marks, rtol=rtol, atol=atol)
    if not sol.success:
        raise RuntimeError(f"solve_ivp failed on [{t0}, {t1}]: {sol.message}")
    states = [unpack(net, sol.y[:, k]) for k in range(len(t_eval))]
    return states, unpack(net, sol.y[:, -1])


def flow(
    net: Network,
    weights0: Mapping[Edge, np.ndarray],
    contexts: Sequence[Context],
    times: Sequence[float],
    *,
    probabilities: Mapping[str, float] | None = None,
    tau: float = 1.0,
    gamma: float = 0.0,
    rtol: float = RTOL,
    atol: float = ATOL,
) -> list[Weights]:
    """Eq. (2): $\\tau\\,dW_e/dt = -\\partial\\mathcal L/\\partial W_e - \\gamma W_e$ from ``weights0``.

    Returns the weights at each of ``times`` (sorted, >= 0; t = 0 is the start).
    """
    _check_weights(net, weights0)
    times = np.asarray(times, dtype=float)
    if times.ndim != 1 or np.any(np.diff(times) < 0) or (len(times) and times[0] < 0):
        raise ValueError("times must be sorted and >= 0")
    p = dict(zip([c.label for c in contexts], _probabilities(contexts, probabilities), strict=True))
    t_end = float(times[-1]) if len(times) else 0.0
    states, _ = _integrate(net, weights0, contexts, p, 0.0, t_end, times, tau, gamma, rtol, atol)
    return states


def gd_step(
    net: Network,
    weights: Mapping[Edge, np.ndarray],
    contexts: Sequence[Context],
    lr: float,
    *,
    probabilities: Mapping[str, float] | None = None,
    tau: float = 1.0,
    gamma: float = 0.0,
) -> Weights:
    """One step of full-batch gradient descent: $W \\leftarrow W - (lr/\\tau)(\\nabla\\mathcal L + \\gamma W)$."""
    g = gradient(net, weights, contexts, probabilities)
    return {
        e: np.asarray(weights[e]) - lr / tau * (g[e] + gamma * np.asarray(weights[e]))
        for e in net.edges
    }


def gd_map(
    net: Network,
    weights0: Mapping[Edge, np.ndarray],
    contexts: Sequence[Context],
    steps: int,
    lr: float,
    *,
    probabilities: Mapping[str, float] | None = None,
    tau: float = 1.0,
    gamma: float = 0.0,
    record: Sequence[int] | None = None,
) -> list[Weights]:
    """``steps`` gradient-descent steps (the Euler map of :func:`flow` with dt = lr).

    Returns the weights after each step count in ``record`` (default 0..steps).
    """
    _check_weights(net, weights0)
    record = list(range(steps + 1)) if record is None else [int(k) for k in record]
    if any(k < 0 or k > steps for k in record):
        raise ValueError("record must lie in 0..steps")
    w = {e: np.asarray(weights0[e], dtype=float).copy() for e in net.edges}
    contexts = with_moments(net, contexts)
    out: dict[int, Weights] = {}
    for k in range(steps + 1):
        if k in record:
            out[k] = {e: a.copy() for e, a in w.items()}
        if k < steps:
            w = gd_step(net, w, contexts, lr, probabilities=probabilities, tau=tau, gamma=gamma)
    return [out[k] for k in record]


# --------------------------------------------------------------------------------------
# Schedules


@dataclass(frozen=True)
class Phase:
    """A phase of a schedule: a duration (in units of $\\tau$) and context label -> probability.

    Labels left out have probability 0; the given probabilities must sum to 1.
    """

    duration: float
    probabilities: Mapping[str, float]

    def __post_init__(self) -> None:
        if not self.duration > 0:
            raise ValueError(f"a phase needs a duration > 0, got {self.duration}")


def blocked(labels: Sequence[str], duration: float, repeats: int = 1) -> list[Phase]:
    """One phase per context in turn (probability 1), the whole cycle ``repeats`` times."""
    return [Phase(duration, {lab: 1.0}) for _ in range(repeats) for lab in labels]


def interleaved(labels: Sequence[str], duration: float) -> list[Phase]:
    """One phase with every context at equal probability."""
    return [Phase(duration, {lab: 1.0 / len(labels) for lab in labels})]


@dataclass(frozen=True)
class ScheduleRun:
    """What :func:`run_schedule` recorded.

    ``times`` (sorted), ``context_loss[label]`` ($\\mathcal L_c$ at each time, for every
    context), ``loss`` (the loss of the phase in force at each time, a boundary time
    counting to the phase it ends), ``weights`` at each time, ``boundaries`` (0, the end of
    each phase), ``final`` (the weights at the end of the schedule).
    """

    times: np.ndarray
    context_loss: dict[str, np.ndarray]
    loss: np.ndarray
    weights: list[Weights]
    boundaries: np.ndarray
    final: Weights


def run_schedule(
    net: Network,
    weights0: Mapping[Edge, np.ndarray],
    contexts: Sequence[Context],
    phases: Sequence[Phase],
    times: Sequence[float],
    *,
    method: str = "flow",
    lr: float | None = None,
    tau: float = 1.0,
    gamma: float = 0.0,
    rtol: float = RTOL,
    atol: float = ATOL,
) -> ScheduleRun:
    """Train through ``phases`` in order, each from the previous phase's end state.

    ``method="flow"``: Eq. (2) per phase with a fresh ``solve_ivp`` on each phase interval
    (the stepper is restarted at each boundary). ``method="gd"``: gradient descent with
    learning rate ``lr``, ``duration / lr`` steps per phase (must be whole numbers, as must
    ``t / lr`` for each recorded time). ``times`` lie in [0, total duration].
    """
    _check_weights(net, weights0)
    if not phases:
        raise ValueError("a schedule needs at least one phase")
    labels = [c.label for c in contexts]
    probs = [
        dict(zip(labels, _probabilities(contexts, ph.probabilities), strict=True)) for ph in phases
    ]
    bounds = np.concatenate([[0.0], np.cumsum([float(ph.duration) for ph in phases])])
    times = np.asarray(times, dtype=float)
    if (
        times.ndim != 1
        or not len(times)
        or np.any(np.diff(times) < 0)
        or times.min() < 0
        or times.max() > bounds[-1] * (1 + 1e-12)
    ):
        raise ValueError(f"times must be sorted and lie in [0, {bounds[-1]}]")
    if method not in ("flow", "gd"):
        raise ValueError(f"method must be 'flow' or 'gd', got {method!r}")
    if method == "gd":
        if lr is None or not lr > 0:
            raise ValueError("method='gd' needs lr > 0")
        for name, values in (("phase boundary", bounds), ("recorded time", times)):
            steps = values / lr
            if np.any(np.abs(steps - np.round(steps)) > 1e-9 * np.maximum(1.0, steps)):
                raise ValueError(f"a {name} is not a whole number of steps of lr={lr}")

    w = {e: np.asarray(weights0[e], dtype=float).copy() for e in net.edges}
    recorded: list[Weights] = []
    phase_of: list[int] = []
    done = 0  # times recorded so far
    for k, p in enumerate(probs):
        t0, t1 = bounds[k], bounds[k + 1]
        sel = [min(float(t), t1) for t in times[done:] if t <= t1 * (1 + 1e-12)]
        if method == "flow":
            states, w = _integrate(net, w, contexts, p, t0, t1, sel, tau, gamma, rtol, atol)
        else:
            n0, n1 = round(t0 / lr), round(t1 / lr)
            marks = [round(t / lr) - n0 for t in sel]
            run = gd_map(
                net,
                w,
                contexts,
                n1 - n0,
                lr,
                probabilities=p,
                tau=tau,
                gamma=gamma,
                record=[*marks, n1 - n0],
            )
            states, w = run[:-1], run[-1]
        recorded.extend(states)
        phase_of.extend([k] * len(states))
        done += len(sel)
    ctx_loss = {c.label: np.array([context_loss(net, s, c) for s in recorded]) for c in contexts}
    phase_loss = np.array(
        [loss(net, s, contexts, probs[k]) for s, k in zip(recorded, phase_of, strict=True)]
    )
    return ScheduleRun(times, ctx_loss, phase_loss, recorded, bounds, w)
