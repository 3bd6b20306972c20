r"""The 3-context task of Jarvis, Klein, Rosman & Saxe, *Make Haste Slowly* (ICLR 2025).

Reference for issue 37 (imports no gdln). Facts from the paper's code
(``CAandL-Lab/make-haste-slowly``, folder ``3_context_diff``; see FACTS.md for files and
lines), re-implemented here:

- :func:`task_arrays`: their ``gen_data3(8, diff_struct=True)``: 8 items in 3 contexts,
  24 examples (columns), inputs = item one-hot (8) stacked on context one-hot (3), targets
  (60 rows) = a hierarchy shared by all contexts (15 rows) stacked on one 15-row block per
  context: the hierarchy in context 1, a "ring" in context 2, a "cross" variant of the
  hierarchy in context 3, zero outside the block's own context.
- ReLU network ``W2 relu(W1 x)``, no biases, hidden 700, weights i.i.d.
  N(0, (0.005/700)^2) drawn with ``numpy.random.seed(seed)``, W1 (700, 11) then W2 (60, 700);
  loss $\tfrac12\sum$ over the 24 examples (a sum, not a mean); full-batch GD, lr 0.001,
  8001 epochs; their ``losses[e]`` is the loss after e+1 updates.
- Their hand-built GDLN (``gdln.py``): 7 modules of 100 hidden units, one per non-empty
  subset of the 3 contexts (module 0 = all three, reads all 11 inputs; modules 1-3 = one
  context each; 4 = {1,2}, 5 = {2,3}, 6 = {1,3}; modules 1-6 read the 8 item inputs only and
  are on for the examples of their contexts). Init N(0, s^2) per module block, s = 10 * base
  for module 0 and 20 * base for the others, base = 0.0005/700. Update rule (theirs, not joint
  gradient descent): module 0 descends $\tfrac12\lVert Y - \hat Y_0\rVert^2$ on its own
  output; modules 1-6 descend $\tfrac12\lVert (Y - \hat Y_0) - \hat Y_{1..6}\rVert^2$ with
  module 0's output held fixed.

Conventions here: examples in rows (``X`` (24, 11), ``Y`` (24, 60)), contexts 0, 1, 2.

>>> X, Y, context = task()
>>> X.shape, Y.shape, context.tolist()[::8]
((24, 11), (24, 60), [0, 1, 2])
"""

from __future__ import annotations

import numpy as np

N_ITEMS = 8
HIDDEN = 700
SIGMA = 0.005 / HIDDEN
LR = 0.001
EPOCHS = 8001
GDLN_MODULE_HIDDEN = 100
GDLN_BASE = 0.0005 / (7 * GDLN_MODULE_HIDDEN)
#: the contexts (0-based) each module of their hand-built GDLN is on in
GDLN_MODULES = ((0, 1, 2), (0,), (1,), (2,), (0, 1), (1, 2), (0, 2))


def hierarchy(n: int = N_ITEMS) -> np.ndarray:
    """Rows: one block of 1 row with all ones, then 2 rows of n/2 ones, 4 rows, ... n rows of one."""
    rows, height = [], 1
    while height <= n:
        width = n // height
        for i in range(height):
            r = np.zeros(n)
            r[i * width : (i + 1) * width] = 1
            rows.append(r)
        height *= 2
    return np.array(rows)


def ring() -> np.ndarray:
    """Their ring features (15 x 8): a constant row, then the bump (0, .33, .66, 1, 1, .66, .33, 0)
    shifted left by 0..7 items, then by 0..5 again; scaled by 0.5 then by 2.0 as in their code."""
    bump = [0.0, 0.33, 0.66, 1.0, 1.0, 0.66, 0.33, 0.0]
    shifts = [np.roll(bump, -k) for k in range(8)]
    rows = [np.ones(8), *shifts, *shifts[:6]]
    return (np.array(rows) * 0.5) * 2.0


def cross() -> np.ndarray:
    """The hierarchy with its 4-row level (rows 3-6) replaced by pairs of non-adjacent items."""
    c = hierarchy().copy()
    c[3] = [1, 0, 1, 0, 0, 0, 0, 0]
    c[4] = [0, 1, 0, 1, 0, 0, 0, 0]
    c[5] = [0, 0, 0, 0, 1, 0, 1, 0]
    c[6] = [0, 0, 0, 0, 0, 1, 0, 1]
    return c


def task_arrays() -> tuple[np.ndarray, np.ndarray]:
    """Their ``X`` (11, 24) and ``Y`` (60, 24), examples in columns (context-major, item-minor)."""
    h, z = hierarchy(), np.zeros((2 * N_ITEMS - 1, N_ITEMS))
    Y = np.vstack(
        [
            np.hstack([h, h, h]),
            np.hstack([h, z, z]),
            np.hstack([z, ring(), z]),
            np.hstack([z, z, cross()]),
        ]
    )
    items = np.hstack([np.eye(N_ITEMS)] * 3)
    contexts = np.kron(np.eye(3), np.ones((1, N_ITEMS)))
    return np.vstack([items, contexts]), Y


def task() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``X`` (24, 11), ``Y`` (24, 60) with examples in rows, and each example's context (0, 1, 2)."""
    X, Y = task_arrays()
    return X.T.copy(), Y.T.copy(), np.repeat(np.arange(3), N_ITEMS)


def relu_init(seed: int) -> list[np.ndarray]:
    """Their ReLU init: ``numpy.random.seed(seed)``, W1 ~ N(0, SIGMA^2) (700, 11), then W2 (60, 700)."""
    rs = np.random.RandomState(seed)
    return [rs.normal(0.0, SIGMA, (HIDDEN, 11)), rs.normal(0.0, SIGMA, (60, HIDDEN))]


def half_loss_epoch(losses_after_update: np.ndarray, initial: float) -> int:
    """Their epoch index (``losses[e]`` = loss after e+1 updates) at which the loss first falls
    to half of the initial loss."""
    below = np.nonzero(np.asarray(losses_after_update) <= 0.5 * initial)[0]
    return int(below[0]) if len(below) else -1


# --------------------------------------------------------------------------------------
# Their hand-built GDLN


def gdln_init(seed: int) -> list[np.ndarray]:
    """W1 (700, 11) as 7 row blocks, then W2 (60, 700) as 7 column blocks, in their draw order."""
    rs = np.random.RandomState(seed)
    scale = [10 * GDLN_BASE] + [20 * GDLN_BASE] * 6
    n = GDLN_MODULE_HIDDEN
    W1 = np.vstack([rs.normal(0.0, s, (n, 11)) for s in scale])
    W2 = np.hstack([rs.normal(0.0, s, (60, n)) for s in scale])
    return [W1, W2]


def _examples(contexts: tuple[int, ...]) -> np.ndarray:
    return np.concatenate([np.arange(c * N_ITEMS, (c + 1) * N_ITEMS) for c in contexts])


def gdln_module_outputs(W: list[np.ndarray], X: np.ndarray) -> list[np.ndarray]:
    """Each module's contribution to the output (60, 24); ``X`` is their (11, 24) input."""
    W1, W2 = W
    n, out = GDLN_MODULE_HIDDEN, []
    for k, cs in enumerate(GDLN_MODULES):
        rows = slice(k * n, (k + 1) * n)
        o = np.zeros((W2.shape[0], X.shape[1]), dtype=W2.dtype)
        if k == 0:
            o[:] = W2[:, rows] @ (W1[rows] @ X)
        else:
            ex = _examples(cs)
            o[:, ex] = W2[:, rows] @ (W1[rows, :N_ITEMS] @ X[:N_ITEMS, ex])
        out.append(o)
    return out


def gdln_step(
    W: list[np.ndarray], X: np.ndarray, Y: np.ndarray, lr: float = LR, *, rule: str = "theirs"
) -> list[np.ndarray]:
    """One update: ``rule="theirs"`` (module 0 on its own loss, modules 1-6 on the residual) or
    ``"joint"`` (every module on the total loss: plain gradient descent on the GDLN)."""
    W1, W2 = (a.copy() for a in W)
    n = GDLN_MODULE_HIDDEN
    parts = gdln_module_outputs(W, X)
    Ec = Y - sum(parts)  # the context modules' error (on the residual of module 0)
    E0 = Y - parts[0] if rule == "theirs" else Ec  # module 0's own error, or the total
    for k, cs in enumerate(GDLN_MODULES):
        rows = slice(k * n, (k + 1) * n)
        if k == 0:
            h = W[0][rows] @ X
            W2[:, rows] += lr * E0 @ h.T
            W1[rows] += lr * W[1][:, rows].T @ E0 @ X.T
        else:
            ex = _examples(cs)
            h = W[0][rows, :N_ITEMS] @ X[:N_ITEMS, ex]
            W2[:, rows] += lr * Ec[:, ex] @ h.T
            W1[rows, :N_ITEMS] += lr * W[1][:, rows].T @ Ec[:, ex] @ X[:N_ITEMS, ex].T
    return [W1, W2]


def gdln_train(
    seed: int, epochs: int = EPOCHS, dtype=np.float64, *, rule: str = "theirs"
) -> tuple[np.ndarray, float, list[np.ndarray]]:
    """Their GDLN run: ``(losses, initial loss, final weights)``, ``losses[e]`` after e+1 updates,
    loss $\\tfrac12\\sum(\\hat Y - Y)^2$ of the summed module outputs. Their jax code runs in
    float32 (jax's default); ``dtype`` chooses."""
    X, Y = (a.astype(dtype) for a in task_arrays())
    W = [a.astype(dtype) for a in gdln_init(seed)]
    initial = 0.5 * float(((sum(gdln_module_outputs(W, X)) - Y) ** 2).sum())
    losses = np.empty(epochs)
    for e in range(epochs):
        W = gdln_step(W, X, Y, rule=rule)
        losses[e] = 0.5 * float(((sum(gdln_module_outputs(W, X)) - Y) ** 2).sum())
    return losses, initial, W
