"""The ReLU reference: its gated network of frozen patterns is exact (outputs, gradients, training
while no pattern flips), written out as a GDLN in gated_flow's form."""

from __future__ import annotations

import numpy as np
import pytest
from reference import gated_flow as gf
from reference import relu_net as rn

XOR_X = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])
XOR_Y = np.array([[1.0], [-1.0], [-1.0], [1.0]])


def random_data(seed=0, n=7, d_in=3, d_out=2):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d_in)), rng.normal(size=(n, d_out))


@pytest.mark.parametrize("biases", [False, True])
def test_extracted_gdln_has_the_relu_loss_outputs_and_gradients(biases):
    X, Y = random_data()
    sizes = [3, 6, 4, 2]
    W, b = rn.init_weights(sizes, 0.8, 1, biases=biases, bias_sigma=0.3)
    P = rn.patterns(W, b, X)
    loss, out, gW, gb = rn.relu_loss_and_grads(W, b, X, Y)
    ex = rn.extract_gdln(W, b, X, Y, P)
    assert gf.loss(ex.network, ex.weights, ex.contexts) == pytest.approx(loss, rel=1e-13)
    for c, idx in zip(ex.contexts, ex.examples, strict=True):
        np.testing.assert_allclose(gf.outputs(ex.network, ex.weights, c)["y"], out[idx], atol=1e-13)
    fW, fb = rn.to_layers(ex, gf.gradient(ex.network, ex.weights, ex.contexts), sizes)
    for a, want in zip(fW + (fb or []), gW + (gb or []), strict=True):
        np.testing.assert_allclose(a, want, rtol=1e-12, atol=1e-14)
    rW, _ = rn.to_layers(ex, ex.weights, sizes)
    for a, want in zip(rW, W, strict=True):
        np.testing.assert_array_equal(a, want)


def test_masked_network_with_its_own_patterns_is_the_relu_network():
    X, Y = random_data(1)
    W, _ = rn.init_weights([3, 5, 2], 1.0, 2)
    relu = rn.relu_loss_and_grads(W, None, X, Y, reduction="sum")
    gated = rn.gated_loss_and_grads(W, None, X, Y, rn.patterns(W, None, X), reduction="sum")
    assert gated[0] == relu[0]
    for a, b in zip(gated[2], relu[2], strict=True):
        np.testing.assert_array_equal(a, b)


def test_training_equals_the_frozen_gdln_while_no_pattern_flips():
    X, Y = random_data(2, n=6)
    sizes = [3, 8, 2]
    W, _ = rn.init_weights(sizes, 0.5, 3)
    run = rn.train(X, Y, W, lr=0.01, steps=5, record=[0, 5])
    assert run.flips[1:].sum() == 0  # small steps: no pattern moves
    ex = rn.extract_gdln(W, None, X, Y, run.patterns[0])
    w5 = gf.gd_map(ex.network, ex.weights, ex.contexts, 5, 0.01, record=[5])[0]
    for a, want in zip(rn.to_layers(ex, w5, sizes)[0], run.weights[5], strict=True):
        np.testing.assert_allclose(a, want, rtol=1e-12, atol=1e-15)
    assert run.loss[5] < run.loss[0]


def test_summed_loss_is_the_mean_loss_with_n_times_the_learning_rate():
    X, Y = random_data(3, n=5)
    W, _ = rn.init_weights([3, 4, 2], 0.5, 4)
    a = rn.train(X, Y, W, lr=0.002, steps=3, record=[3], reduction="sum")
    b = rn.train(X, Y, W, lr=0.01, steps=3, record=[3])
    for u, v in zip(a.weights[3], b.weights[3], strict=True):
        np.testing.assert_allclose(u, v, rtol=1e-12)
    np.testing.assert_allclose(a.loss, 5 * b.loss, rtol=1e-12)


def test_without_biases_each_unit_is_on_for_exactly_one_of_x_and_minus_x():
    W, _ = rn.init_weights([2, 128, 1], 2e-4, 0)
    (P,) = rn.patterns(W, None, XOR_X)
    np.testing.assert_array_equal(P[0] ^ P[3], True)  # x and -x: [1, 1], [-1, -1]
    np.testing.assert_array_equal(P[1] ^ P[2], True)
    assert P[0].sum() + P[3].sum() == 128  # half the units per opposite pair, on average


def test_grouping_is_by_identical_columns_and_rows():
    P = np.array([[1, 0, 1, 0], [0, 1, 0, 0], [1, 0, 1, 0]], dtype=bool)
    assert rn.group_columns(P) == [
        ((True, False, True), [0, 2]),
        ((False, True, False), [1]),
        ((False, False, False), [3]),
    ]
    assert [rows for _, rows in rn.group_rows(P)] == [[0, 2], [1]]


def test_context_level_measures_on_a_small_pattern():
    # 2 contexts of 2 examples; unit 0 on everywhere, unit 1 on for one item of context 0,
    # unit 2 on in context 1 only
    P = np.array([[1, 1, 0], [1, 0, 0], [1, 0, 1], [1, 0, 1]], dtype=bool)
    context = [0, 0, 1, 1]
    assert rn.gate_consistency(P, context) == pytest.approx(5 / 6)
    assert rn.context_sets(P, context, rule="any") == [
        frozenset({0, 1}),
        frozenset({0}),
        frozenset({1}),
    ]
    assert rn.context_sets(P, context, rule="all") == [
        frozenset({0, 1}),
        frozenset(),
        frozenset({1}),
    ]
    np.testing.assert_allclose(
        rn.unit_contributions(np.array([[3.0, 0.0]]), np.array([[1.0, 2.0], [0.0, 2.0]])),
        [3.0, 0.0],
    )
