"""The pmap strategy all-reduces a step's gradients as one buffer (one collective call between
processes, see trainer/strategies.py) and the sums are those of an all-reduce per array."""

import json
import subprocess
import sys

from tests.support.paths import REPO_ROOT

# Run with 2 local CPU devices (the device count is fixed when jax starts): for every model and
# all-reduce dtype, the result shapes of the all-reduces in the compiled chunked training loop,
# and whether one-buffer sums equal per-array sums bit for bit.
CHILD = r"""
import json, re
import jax
jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_num_cpu_devices", 2)
import numpy as np
from trainer import models, optimization, strategies

def all_reduce_results(hlo):
    return [m.group(1) for m in re.finditer(r"=\s*(\S.*?)\s+all-reduce(?:-start)?\(", hlo)]

out = {}
for name in models.NAMES:
    params = models.get(name).network().init_params(0)
    optimizer = optimization.make_optimizer("sgd", 0.1, 0.9, 100, "cosine")
    host_state = (params, optimization.init_opt_state(optimizer, params))
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (64, 784), dtype=np.uint8)
    labels = rng.integers(0, 10, 64).astype(np.int32)
    for dtype in ("float32", "bfloat16"):
        s = strategies.make_strategy("pmap", optimizer, 2, allreduce_dtype=dtype, model=name)
        state, data = s.put_state(host_state), s.put_data(images, labels)
        idx = np.zeros((2, 2, 8), np.int32)
        hlo = s._run.lower(state, *data, idx, np.int32(2)).compile().as_text()
        out[f"{name}/{dtype}"] = {"params": sum(int(v.size) for v in params.values()),
                                  "all_reduces": all_reduce_results(hlo)}
    grads = {k: rng.standard_normal((2, *v.shape)).astype(np.float32) for k, v in params.items()}

    def one_buffer(g):
        flat, unflatten = strategies._one_buffer(g)
        return unflatten(jax.lax.psum(flat, "d"))

    per_array = jax.pmap(lambda g: jax.lax.psum(g, "d"), axis_name="d")(grads)
    flat = jax.pmap(one_buffer, axis_name="d")(grads)
    out[f"{name}/same_sums"] = all(np.array_equal(per_array[k], flat[k]) for k in grads)
print(json.dumps(out))
"""


def test_gradients_are_all_reduced_as_one_buffer_with_the_same_sums():
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    for key, value in out.items():
        if key.endswith("/same_sums"):
            assert value is True, key
            continue
        gradients = f"[{value['params']}]"  # (XLA's CPU backend reduces a bfloat16 all-reduce in float32)
        # one all-reduce of the whole gradient buffer alone; the others carry the per-chunk loss and count
        assert [r.split("[")[0] for r in value["all_reduces"] if gradients in r] in (["f32"], ["bf16"]), (key, value)
        assert all(r.endswith(gradients + "{0}") or r.endswith("[2]{0}") for r in value["all_reduces"]), (key, value)
