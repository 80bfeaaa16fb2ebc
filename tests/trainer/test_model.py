"""The model's host-side initialisation (no XLA program is compiled for it)."""

import jax
import numpy as np
import pytest

from trainer import model


def test_initial_parameters_are_seeded_he_normal():
    a, b, other = model.init_params(3, (64, 32)), model.init_params(3, (64, 32)), model.init_params(4, (64, 32))
    assert [(k, v.shape, v.dtype) for k, v in a.items()] == [
        ("w0", (784, 64), np.float32), ("b0", (64,), np.float32), ("w1", (64, 32), np.float32),
        ("b1", (32,), np.float32), ("w2", (32, 10), np.float32), ("b2", (10,), np.float32)]
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(a["w0"], other["w0"])
    assert abs(float(np.std(a["w0"])) - np.sqrt(2 / 784)) < 0.002
    assert not np.any(a["b0"])


@pytest.mark.parametrize("name", ["sgd", "adam", "adamw"])
@pytest.mark.parametrize("schedule", ["cosine", "constant"])
def test_zero_optimizer_state_equals_optax_init(name, schedule):
    params = model.init_params(0, (16,))
    optimizer = model.make_optimizer(name, 0.1, 0.9, 100, schedule)
    expected, actual = optimizer.init(params), model.init_opt_state(optimizer, params)
    assert jax.tree.structure(expected) == jax.tree.structure(actual)
    for e, a in zip(jax.tree.leaves(expected), jax.tree.leaves(actual)):
        assert isinstance(a, np.ndarray) and a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_array_equal(a, np.asarray(e))
