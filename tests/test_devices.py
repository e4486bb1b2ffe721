"""The Cleanba/Sebulba skeleton every script shares: the pmapped update over forced CPU devices, actor and
learner on separate devices, bad device flags (each run in a fresh process, since the device count is fixed
when jax starts)."""

import glob
import os
import socket
import subprocess
import sys

import jax
import numpy as np
import pytest

import muzero_minatar as m
import muzero_tools as tools
from test_runs import ENV, SCRIPT, SMALL_RUN, assert_refused, run_together, scalars

ENV2 = {**ENV, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}

# script: (Args of a small network, observation shape, |A^a|)
SMALL_NET = dict(
    channels=8,
    repr_blocks=1,
    dyn_blocks=1,
    pred_blocks=0,
    head_hidden=16,
    support_size=10,
    unroll_steps=2,
    td_steps=2,
    batch_size=16,
)
SCRIPTS = {
    "muzero_minatar": (SMALL_NET, (10, 10, 4), 4),
    # its defaults but for the sampled search: each device searches again the first samples of its own share of the
    # batch, with its own noise, so that part is the one-device update in distribution, not value for value
    "muzero_minatar_reanalyze": ({**SMALL_NET, "reanalyze_ratio": 0.0}, (10, 10, 4), 4),
    "muzero_breakthrough": (SMALL_NET, (5, 5, 4), 301),
    "muzero_atari_multigpu": ({**SMALL_NET, "resolution": 32}, (32, 32, 1), 5),
}

SAME_UPDATE = """
import sys
import jax, jax.numpy as jnp, numpy as np, optax
sys.path[:0] = [".", "tests"]
from test_devices import SCRIPTS
name = sys.argv[1]
m = __import__(name)
kwargs, obs_shape, num_actions = SCRIPTS[name]
assert len(jax.local_devices()) == 2
args = m.Args(**kwargs)
net = m.make_network(args, num_actions)
params = m.init_params(net, args, jax.random.PRNGKey(0))
opt = optax.sgd(0.1)  # not Adam: its steps hardly change when the gradient doubles (a sum for a mean)
rng = np.random.default_rng(0)
B, w = args.batch_size, args.history_length + args.unroll_steps + args.td_steps + 1
def batch():  # every field of a replay window, at random (episodes start at one of the first three steps)
    b = m.empty_segments(B, w, obs_shape, num_actions)
    b["obs"] = rng.integers(0, 2, b["obs"].shape).astype(np.uint8)
    b["reward"] = rng.choice([0.0, 1.0], (B, w)).astype(np.float32)
    b["is_first"] = np.eye(w, dtype=bool)[rng.integers(0, 3, B)]
    b["action"] = rng.integers(0, num_actions, (B, w)).astype(np.int32)
    b["value"] = rng.normal(size=(B, w)).astype(np.float32)
    b["policy"] = rng.dirichlet(np.ones(num_actions), (B, w)).astype(np.float32)
    b["valid"][:] = True
    return b
batches = [(batch(), rng.uniform(0.5, 1.5, B).astype(np.float32)) for _ in range(3)]
results = []
for ids in [(0,), (0, 1)]:
    a = m.Args(**kwargs, learner_device_ids=ids)
    update = m.make_update_fn(net, a, opt)
    state = m.replicate(m.TrainState(params, params, opt.init(params), jnp.zeros((), jnp.int32)), a)
    for b, weights in batches:
        state, metrics = update(state, b, weights)[:2]
    leaf = jax.tree.leaves(state.params)[0]
    assert leaf.shape[0] == len(ids) and len(leaf.sharding.device_set) == len(ids)
    copies = jax.device_get(state.params)
    for i in range(1, len(ids)):  # every device holds the same parameters
        assert all((x[0] == x[i]).all() for x in jax.tree.leaves(copies))
    results.append((m.unreplicate(copies), float(metrics["losses/total_loss"][0])))
(p1, l1), (p2, l2) = results
diff = max(float(np.max(np.abs(a - b))) for a, b in zip(jax.tree.leaves(p1), jax.tree.leaves(p2)))
moved = max(float(np.max(np.abs(a - b))) for a, b in zip(jax.tree.leaves(p1), jax.tree.leaves(params)))
print("max param diff", diff, "max update", moved, "losses", l1, l2)
assert moved > 1e-3 and diff < 1e-3 * moved and abs(l1 - l2) < 1e-5 * abs(l1)
"""


@pytest.mark.parametrize("script", SCRIPTS)
def test_pmap_update_over_two_devices_equals_the_one_device_update(script):
    out = subprocess.run(
        [sys.executable, "-c", SAME_UPDATE, script],
        cwd=os.path.dirname(SCRIPT),
        env=ENV2,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]


# --- actor threads and processes (muzero_minatar.py; the other scripts hold the same lines) -------------------
THREADED = [*SMALL_RUN, "--num-envs", "4", "--save-model"]  # 2 threads x 4 games x 32 steps: SMALL_RUN's 256 a iteration
MODEL = "muzero_minatar.muzero_model"


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    """One seed, 2 actor threads, in two layouts started together: one process with both threads and the learner
    pmapped over 2 devices, and two localhost processes under jax.distributed with 1 thread and 1 learner device
    each. The same global threads, replays and batch; the second layout has no thread race inside a process, so
    equal logs show the first's threads do not make the run depend on their timing."""
    dirs = [tmp_path_factory.mktemp(name) for name in ("one_process", "two_processes")]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    one = [*THREADED, "--num-actor-threads", "2", "--actor-device-ids", "0", "1", "--learner-device-ids", "0", "1"]
    run_together(
        [(one, dirs[0], SCRIPT, ENV2)]
        + [
            (
                [*THREADED, "--num-processes", "2", "--coordinator-address", f"127.0.0.1:{port}", "--process-id", str(i)],
                dirs[1],
                SCRIPT,
                {**ENV2, "XLA_FLAGS": "--xla_force_host_platform_device_count=1"},
            )
            for i in range(2)
        ]
    )
    return [glob.glob(str(d / "runs" / "*"))[0] for d in dirs]


def test_two_actor_threads_give_the_same_logs_in_one_process_or_two(layouts):
    one, two = layouts
    prefixes = ("charts/episodic", "charts/eval", "losses/", "charts/num_updates")
    a, b0, b1 = scalars(one, prefixes), scalars(two, prefixes), scalars(os.path.join(two, "process_1"), prefixes)
    # 1536 / 256 = 6 iterations; updates start at the 2nd, once 256 positions are stored
    assert len(a["losses/total_loss"]) == 5 and [s for s, _ in a["charts/eval_episodic_return"]] == [768, 1536]
    for tag in a:
        if tag.startswith("charts/episodic"):  # each process logs its own thread's games; one process logs both
            assert sorted(a[tag]) == sorted(b0.get(tag, []) + b1.get(tag, [])), tag
        elif tag.startswith("charts/eval"):  # process 0 evaluates
            assert a[tag] == b0[tag] and tag not in b1, tag
        elif tag.startswith(("losses/", "charts/num_updates")):  # averaged over all devices of all processes: the
            # same in both processes, and the one process's up to float rounding (XLA's CPU convolutions sum in an
            # order that depends on the threads the process has)
            assert b0[tag] == b1[tag], tag
            assert [s for s, _ in a[tag]] == [s for s, _ in b0[tag]], tag
            np.testing.assert_allclose([v for _, v in a[tag]], [v for _, v in b0[tag]], rtol=1e-4, atol=1e-6, err_msg=tag)
    assert b1.get("charts/episodic_return")  # games of the second process's thread ended


def test_two_processes_end_with_the_parameters_of_one_process_with_the_same_global_batch(layouts):
    one, two = layouts
    p0, p1, p = (
        jax.tree.leaves(tools.load_model(os.path.join(d, MODEL))[3]) for d in (two, os.path.join(two, "process_1"), one)
    )
    for x, y, z in zip(p0, p1, p):
        np.testing.assert_array_equal(x, y)  # both processes hold the same parameters
        np.testing.assert_allclose(x, z, rtol=0, atol=1e-4)  # the losses' rounding (above) through 5 Adam steps
    _, args, net, _ = tools.load_model(os.path.join(two, MODEL))
    init = jax.tree.leaves(m.init_params(net, args, jax.random.split(jax.random.PRNGKey(args.seed), 2 + 2)[1]))
    assert max(float(np.abs(x - y).max()) for x, y in zip(p0, init)) > 1e-3  # it trained


def test_learner_devices_must_split_the_batch(tmp_path):
    out = subprocess.run(
        [sys.executable, SCRIPT, "--learner-device-ids", "0", "1", "--batch-size", "33"],
        cwd=tmp_path,
        env=ENV2,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "--batch-size" in out.stderr, out.stderr[-2000:]
    assert not os.path.exists(tmp_path / "runs")


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--learner-device-ids", "0", "2"], "--learner-device-ids"),
        (["--actor-device-ids", "-1"], "--actor-device-ids"),
        (["--learner-device-ids", "0", "0"], "--learner-device-ids"),
        (["--num-actor-threads", "0"], "--num-actor-threads"),
        (["--num-actor-threads", "3", "--batch-size", "64"], "--batch-size"),
        (["--num-processes", "2"], "--coordinator-address"),
        (["--num-processes", "2", "--process-id", "2", "--coordinator-address", "127.0.0.1:1234"], "--process-id"),
    ],
)
def test_bad_device_thread_and_host_flags(tmp_path, monkeypatch, capsys, flags, named):
    assert_refused(m, flags, named, tmp_path, monkeypatch, capsys)
