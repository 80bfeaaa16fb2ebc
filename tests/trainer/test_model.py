"""The models' host-side initialisation (no XLA program is compiled for it), their precisions and
the registry facts jaxgen and the benchmarks read."""

import jax
import numpy as np
import pytest

from trainer import models, optimization
from trainer.models.mlp import network as mlp


def test_initial_parameters_are_seeded_he_normal():
    a, b, other = mlp.init_params(3, (64, 32)), mlp.init_params(3, (64, 32)), mlp.init_params(4, (64, 32))
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
    params = mlp.init_params(0, (16,))
    optimizer = optimization.make_optimizer(name, 0.1, 0.9, 100, schedule)
    expected, actual = optimizer.init(params), optimization.init_opt_state(optimizer, params)
    assert jax.tree.structure(expected) == jax.tree.structure(actual)
    for e, a in zip(jax.tree.leaves(expected), jax.tree.leaves(actual)):
        assert isinstance(a, np.ndarray) and a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_array_equal(a, np.asarray(e))


def _batch(n=32, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, models.get('mlp').inputs), np.float32), rng.integers(0, models.get('mlp').classes, n).astype(np.int32)


def _equations(jaxpr):
    """Every equation of a jaxpr and of the jaxprs nested in it (pjit, custom_jvp, ...)."""
    for eqn in jaxpr.eqns:
        yield eqn
        for param in eqn.params.values():
            for sub in param if isinstance(param, (list, tuple)) else [param]:
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    yield from _equations(inner)


@pytest.mark.slow
def test_bfloat16_multiplies_in_bfloat16_and_keeps_float32_parameters_loss_and_gradients():
    params = mlp.init_params(0, (64, 32))
    x, y = _batch()
    loss_grads = jax.value_and_grad(optimization.loss_and_correct, has_aux=True)
    jaxpr = jax.make_jaxpr(lambda p: loss_grads(p, x, y, "bfloat16"))(params).jaxpr
    dots = [[str(v.aval.dtype) for v in eqn.invars] for eqn in _equations(jaxpr) if eqn.primitive.name == "dot_general"]
    # 3 forward matmuls, 3 weight and 3 input gradients (XLA drops the images' unused one): all bfloat16
    assert dots == [["bfloat16", "bfloat16"]] * 9
    (loss16, _), grads16 = loss_grads(params, x, y, "bfloat16")
    (loss32, _), grads32 = loss_grads(params, x, y, "float32")
    assert loss16.dtype == np.float32 and {g.dtype for g in jax.tree.leaves(grads16)} == {np.dtype(np.float32)}
    assert float(loss16) != float(loss32) and abs(float(loss16) - float(loss32)) < 0.02 * float(loss32)
    for key in params:  # bfloat16 keeps 8 significant bits: gradients agree to a few percent
        error = np.linalg.norm(grads16[key] - grads32[key]) / np.linalg.norm(grads32[key])
        assert 0 < error < 0.05, (key, error)


def test_float32_is_exactly_the_plain_mlp():
    params = mlp.init_params(1, (64, 32))
    x, _ = _batch()
    h = np.maximum(x @ params["w0"] + params["b0"], 0)
    h = np.maximum(h @ params["w1"] + params["b1"], 0)
    expected = h @ params["w2"] + params["b2"]
    logits = mlp.apply(params, x)
    assert logits.dtype == np.float32
    np.testing.assert_allclose(np.asarray(logits), expected, rtol=1e-5, atol=1e-5)


def test_registry_facts_match_the_network():
    facts = models.get("mlp")
    params = mlp.init_params(0, (64, 32))
    assert sum(v.size for v in params.values()) == facts.param_count((64, 32))
    assert set(facts.param_specs((64, 32))) == set(params)
    for name, axes in facts.param_specs((64, 32)).items():
        assert len(axes) in (0, params[name].ndim)
    with pytest.raises(ValueError, match="unknown model 'cnn'"):
        models.get("cnn")
