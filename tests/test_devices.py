"""The Cleanba/Sebulba device split on forced CPU devices (each test in a fresh process, since the
device count is fixed when jax starts)."""
import os
import subprocess
import sys

import pytest

from test_runs import SCRIPT, SMALL_RUN, scalars

ENV2 = {**os.environ, "WANDB_MODE": "disabled", "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}

SAME_UPDATE = """
import sys
sys.path[:0] = [".", "tests"]
import jax, jax.numpy as jnp, numpy as np, optax
import muzero_minatar as m
assert len(jax.local_devices()) == 2
from test_components import synthetic_replay, tiny_args
args = tiny_args(batch_size=32, unroll_steps=2, td_steps=2)  # a short unroll compiles faster
replay = synthetic_replay(args)
batches = [replay.sample(32) for _ in range(3)]
net = m.make_network(args, 4)
params = m.init_params(net, args, jax.random.PRNGKey(0))
opt = optax.chain(optax.clip_by_global_norm(args.max_grad_norm), optax.adam(args.learning_rate))
results = []
for ids in [(0,), (0, 1)]:
    mesh = m.learner_mesh(ids)
    state = m.TrainState(params, params, opt.init(params), jnp.zeros((), jnp.int32))
    update = m.make_update_fn(net, args, opt, mesh)
    for batch, weights in batches:
        state, metrics = update(state, batch, weights)
    assert len(state.params["params"]["repr_stem"]["kernel"].sharding.device_set) == len(ids)
    results.append((jax.device_get(state.params), float(metrics["losses/total_loss"])))
(p1, l1), (p2, l2) = results
diff = max(float(np.max(np.abs(a - b))) for a, b in zip(jax.tree.leaves(p1), jax.tree.leaves(p2)))
moved = max(float(np.max(np.abs(a - b))) for a, b in zip(jax.tree.leaves(p1), jax.tree.leaves(params)))
print("max param diff", diff, "max update", moved, "losses", l1, l2)
assert moved > 1e-3 and diff < 1e-5 and abs(l1 - l2) < 1e-4 * abs(l1)
"""


def test_two_device_update_equals_one_device_update(tmp_path):
    out = subprocess.run([sys.executable, "-c", SAME_UPDATE], cwd=os.path.dirname(SCRIPT), env=ENV2,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]


def test_actor_and_learner_on_separate_devices(tmp_path):
    out = subprocess.run([sys.executable, SCRIPT, *SMALL_RUN, "--actor-device-id", "1", "--learner-device-ids", "0", "1"],
                         cwd=tmp_path, env=ENV2, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    (run_dir,) = [os.path.join(tmp_path, "runs", d) for d in os.listdir(tmp_path / "runs")]
    logged = scalars(run_dir, ("losses/total_loss", "charts/eval_episodic_return"))
    assert len(logged["losses/total_loss"]) == 5
    assert [s for s, _ in logged["charts/eval_episodic_return"]] == [768, 1536]


@pytest.mark.parametrize("flags, named", [
    (["--learner-device-ids", "0", "2"], "--learner-device-ids"),
    (["--actor-device-id", "-1"], "--actor-device-id"),
    (["--learner-device-ids", "0", "1", "--batch-size", "33"], "--batch-size"),
])
def test_bad_device_flags(tmp_path, flags, named):
    out = subprocess.run([sys.executable, SCRIPT, *flags], cwd=tmp_path, env=ENV2, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2 and named in out.stderr, out.stderr[-2000:]
    assert not os.path.exists(tmp_path / "runs")
