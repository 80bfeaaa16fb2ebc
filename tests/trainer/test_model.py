"""Every registered model: its host-side initialisation (no XLA program is compiled for it), its
precisions, and the facts its __init__.py states (what jaxgen, the chart and the benchmarks read)
against its jax implementation."""

import argparse

import jax
import numpy as np
import pytest

from trainer import models, optimization
from trainer.models.mlp import network as mlp

MODELS = pytest.mark.parametrize("name", models.NAMES)


def _small(name: str) -> dict:
    """Each setting at its default, list settings shortened: small networks that still have every layer kind."""
    return {s.name: tuple(max(2, v // 16) for v in s.default) if s.is_list else s.default
            for s in models.get(name).settings}


def _batch(n=32, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, models.base.INPUTS), np.float32), rng.integers(0, models.base.CLASSES, n).astype(np.int32)


@MODELS
def test_initial_parameters_are_seeded_float32_host_arrays(name):
    network, settings = models.get(name).network(), _small(name)
    a, b, other = network.init_params(3, settings), network.init_params(3, settings), network.init_params(4, settings)
    assert list(a) == list(b) == list(other)
    for key in a:
        assert isinstance(a[key], np.ndarray) and a[key].dtype == np.float32
        np.testing.assert_array_equal(a[key], b[key])
    weights = [k for k in a if a[k].ndim > 1]
    assert weights and all(not np.array_equal(a[k], other[k]) for k in weights)
    assert not any(np.any(a[k]) for k in a if a[k].ndim == 1)  # zero biases


def test_mlp_layers_are_he_normal():
    a = mlp.init_params(3, {"hidden_sizes": (64, 32)})
    assert [(k, v.shape) for k, v in a.items()] == [
        ("w0", (784, 64)), ("b0", (64,)), ("w1", (64, 32)), ("b1", (32,)), ("w2", (32, 10)), ("b2", (10,))]
    assert abs(float(np.std(a["w0"])) - np.sqrt(2 / 784)) < 0.002


@pytest.mark.parametrize("name", ["sgd", "adam", "adamw"])
@pytest.mark.parametrize("schedule", ["cosine", "constant"])
def test_zero_optimizer_state_equals_optax_init(name, schedule):
    params = mlp.init_params(0, {"hidden_sizes": (16,)})
    optimizer = optimization.make_optimizer(name, 0.1, 0.9, 100, schedule)
    expected, actual = optimizer.init(params), optimization.init_opt_state(optimizer, params)
    assert jax.tree.structure(expected) == jax.tree.structure(actual)
    for e, a in zip(jax.tree.leaves(expected), jax.tree.leaves(actual)):
        assert isinstance(a, np.ndarray) and a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_array_equal(a, np.asarray(e))


def _equations(jaxpr):
    """Every equation of a jaxpr and of the jaxprs nested in it (pjit, custom_jvp, ...)."""
    for eqn in jaxpr.eqns:
        yield eqn
        for param in eqn.params.values():
            for sub in param if isinstance(param, (list, tuple)) else [param]:
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    yield from _equations(inner)


PRODUCTS = ("dot_general", "conv_general_dilated")


def _products(name, params, x, y, precision):
    """Operand dtypes of every matmul and convolution of a training step's loss and gradients."""
    loss_grads = jax.value_and_grad(optimization.loss_and_correct, has_aux=True)
    jaxpr = jax.make_jaxpr(lambda p: loss_grads(p, x, y, precision, name))(params).jaxpr
    return [[str(v.aval.dtype) for v in eqn.invars] for eqn in _equations(jaxpr) if eqn.primitive.name in PRODUCTS]


@pytest.mark.slow
@MODELS
def test_bfloat16_multiplies_in_bfloat16_and_keeps_float32_parameters_loss_and_gradients(name):
    # the default sizes: a network of a few channels sums gradients that nearly cancel
    params = models.get(name).network().init_params(0, models.get(name).resolve())
    x, y = _batch()
    products = _products(name, params, x, y, "bfloat16")
    assert products and all(p == ["bfloat16", "bfloat16"] for p in products), products
    assert all(p == ["float32", "float32"] for p in _products(name, params, x, y, "float32"))
    loss_grads = jax.value_and_grad(optimization.loss_and_correct, has_aux=True)
    (loss16, _), grads16 = loss_grads(params, x, y, "bfloat16", name)
    (loss32, _), grads32 = loss_grads(params, x, y, "float32", name)
    assert loss16.dtype == np.float32 and {g.dtype for g in jax.tree.leaves(grads16)} == {np.dtype(np.float32)}
    assert float(loss16) != float(loss32) and abs(float(loss16) - float(loss32)) < 0.02 * float(loss32)
    for key in params:  # bfloat16 keeps 8 significant bits: gradients agree to a few percent
        error = np.linalg.norm(grads16[key] - grads32[key]) / np.linalg.norm(grads32[key])
        assert 0 < error < 0.05, (key, error)


def test_mlp_bfloat16_runs_every_matmul_of_the_step_in_bfloat16():
    params = mlp.init_params(0, {"hidden_sizes": (64, 32)})
    x, y = _batch()
    # 3 forward matmuls, 3 weight and 3 input gradients (XLA drops the images' unused one)
    assert _products("mlp", params, x, y, "bfloat16") == [["bfloat16", "bfloat16"]] * 9


def test_float32_is_exactly_the_plain_mlp():
    params = mlp.init_params(1, {"hidden_sizes": (64, 32)})
    x, _ = _batch()
    h = np.maximum(x @ params["w0"] + params["b0"], 0)
    h = np.maximum(h @ params["w1"] + params["b1"], 0)
    expected = h @ params["w2"] + params["b2"]
    logits = mlp.apply(params, x)
    assert logits.dtype == np.float32
    np.testing.assert_allclose(np.asarray(logits), expected, rtol=1e-5, atol=1e-5)


@MODELS
@pytest.mark.parametrize("size", ["small", "default"])
def test_parameter_count_and_sharding_rules_match_the_network(name, size):
    model = models.get(name)
    settings = _small(name) if size == "small" else model.resolve()
    params = model.network().init_params(0, settings)
    assert sum(v.size for v in params.values()) == model.param_count(settings)
    specs = model.param_specs(settings)
    assert set(specs) == set(params)
    split = settings[model.model_axis]  # a model axis must divide these sizes, and only these are split
    for key, axes in specs.items():
        assert len(axes) in (0, params[key].ndim) and set(axes) <= {None, "model"}, key
        for dim, axis in enumerate(axes):
            if axis == "model":
                assert params[key].shape[dim] in split, (key, params[key].shape)
    assert any("model" in axes for axes in specs.values())


@MODELS
def test_flop_facts_are_xlas_count_of_the_step(name):
    """The analytic matmul and convolution FLOPs of a training step against XLA's cost analysis of
    its loss and gradients: XLA adds only the element-wise work (bias, ReLU, pooling, softmax)."""
    model, batch = models.get(name), 64
    settings = model.resolve()
    params = model.network().init_params(0, settings)
    x, y = _batch(batch)
    grads = jax.jit(jax.grad(lambda p: optimization.loss_and_correct(p, x, y, "float32", name)[0]))
    cost = grads.lower(params).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    assert 1.0 <= cost["flops"] / model.step_flops(batch, settings) < 1.05, (cost["flops"], model.step_flops(batch))


@MODELS
def test_settings_parse_their_defaults_and_refuse_out_of_bounds_values(name):
    for s in models.get(name).settings:
        text = ",".join(map(str, s.default)) if s.is_list else str(s.default)
        assert s.parse(text) == s.default
        assert s.schema()["default"] == (list(s.default) if s.is_list else s.default)
        for bad in ("x", str(s.minimum - 1), str(s.maximum + 1)):
            with pytest.raises(argparse.ArgumentTypeError):
                s.parse(bad)


def test_an_unknown_model_names_the_registered_ones():
    with pytest.raises(ValueError, match=f"unknown model 'nope' \\(one of {', '.join(models.NAMES)}\\)"):
        models.get("nope")
