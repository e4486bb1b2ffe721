"""Tests of muzero_atari_multigpu.py: envpool's Atari games, the pmap learner, actor threads and processes.
Runs that need forced CPU devices or several processes start fresh interpreters (the device count is fixed
when jax starts)."""
import glob
import os
import socket
import subprocess
import sys
from functools import partial

import jax
import numpy as np
import pytest

import muzero_atari_multigpu as ma
from test_runs import assert_refused, run_together, scalars

ENV = {**os.environ, "WANDB_MODE": "disabled", "COLUMNS": "500"}
ENV2 = {**ENV, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
SMALL = ["--resolution", "32", "--num-envs", "4", "--num-steps", "16", "--channels", "8",
         "--downsample-blocks", "0", "0", "0", "--repr-blocks", "1", "--pred-blocks", "0", "--head-hidden", "16",
         "--num-simulations", "2", "--unroll-steps", "2", "--td-steps", "3", "--max-episode-steps", "100"]


def small_args(**kw) -> ma.Args:
    return ma.Args(**{**dict(resolution=32, num_envs=4, num_steps=16, channels=8, downsample_blocks=(0, 0, 0),
                             repr_blocks=1, pred_blocks=0, head_hidden=16, num_simulations=2, unroll_steps=2,
                             td_steps=3, max_episode_steps=100), **kw})


# --- environment bridge ------------------------------------------------------------------------------
def test_atari_bridge_resets_after_the_last_step_and_tells_a_lost_life_from_game_over():
    args = small_args(max_episode_steps=2000)
    envs = ma.AtariVecEnv(args, 4, (1, 0), episodic_life=True)
    assert envs.num_actions == 5  # Breakout's 4 actions + the dummy
    step = envs.step(np.zeros(4, np.int32))
    assert step.obs.shape == (4, 32, 32, 1) and step.obs.dtype == np.uint8 and step.is_first.all()
    rng = np.random.default_rng(0)
    lives_lost = games_over = 0
    since_first = np.zeros(4, int)
    for _ in range(1500):
        since_first = np.where(step.is_first, 0, since_first + 1)
        legal = envs.legal_actions(step.is_last)
        serve = ~step.is_last & (since_first < 2)  # --fire-steps 2: a life's first two steps may only serve
        assert (legal[:, 0] == step.is_last).all() and (legal[:, 2] == ~step.is_last).all()
        assert (legal[:, [1, 3, 4]] == (~step.is_last & ~serve)[:, None]).all()
        action = np.where(step.is_last, 0, np.where(serve, 2, rng.integers(1, 5, 4)))
        was_last, was_over = step.is_last, step.game_over
        step = envs.step(action)
        assert (step.is_first == was_last).all()  # the step after an episode's last starts the next
        assert (step.reward[was_last] == 0).all()
        lives_lost += int((was_last & ~was_over).sum())
        games_over += int(was_over.sum())
    # Breakout has 5 lives: a random player loses several per game, and games end
    assert lives_lost >= 4 * games_over and games_over >= 1


def noop_player(params, state, obs, is_first, legal, key):
    """An act function that never chooses to serve: NOOP whenever it is legal, else the first legal action."""
    action = np.where(legal[:, 1], 1, np.argmax(legal, 1))
    return state, action, np.zeros(len(legal)), legal / legal.sum(1, keepdims=True), None


@pytest.mark.parametrize("fire_steps, ended", [(2, True), (0, False)])
def test_games_of_a_player_that_never_serves_end_only_with_the_fire_rule(fire_steps, ended):
    """Breakout serves only on FIRE. With --fire-steps each life starts with FIRE and a NOOP player loses its
    5 lives in ~125 steps; without it, it stands until --max-episode-steps."""
    args = small_args(max_episode_steps=600, fire_steps=fire_steps)
    returns, lengths, _ = ma.evaluate_policy(noop_player, None, args, 8, (3, 0))
    if ended:
        assert (lengths < 200).all() and (lengths > 100).all() and (returns == 0).all()
    else:
        assert (lengths == 600).all()


def test_environment_streams_are_fixed_by_the_seed_and_differ_between_seeds():
    args = small_args()

    def frames(seed):
        envs = ma.AtariVecEnv(args, 2, seed, episodic_life=True)
        step, out = envs.step(np.zeros(2, np.int32)), []
        for t in range(60):
            step = envs.step(np.full(2, 1 + t % 4))
            out.append(step.obs)
        return np.stack(out)

    a, b, c = frames((1, 0)), frames((1, 0)), frames((2, 0))
    assert (a == b).all() and not (a == c).all()
    assert not (a[:, 0] == a[:, 1]).all()  # the copies of one pool get streams of their own


def test_downsampling_gives_the_papers_board():
    args = small_args(resolution=96, channels=16, downsample_blocks=(1, 1, 1))
    net = ma.make_network(args, 5)
    stacked = jax.ShapeDtypeStruct((2, 96, 96, args.history_length * (1 + 5)), np.float32)
    # shapes only (jax.eval_shape traces without computing): the full-size network is slow to run on a CPU
    params = jax.eval_shape(partial(ma.init_params, net, args), jax.random.PRNGKey(0))
    x = jax.eval_shape(partial(net.apply, method=ma.MuZeroNet.represent), params, stacked)
    assert x.shape == (2, 6, 6, 16)  # MuZero appendix: 96 x 96 pixels -> 6 x 6


# --- the pmap learner ------------------------------------------------------------------------------
SAME_UPDATE = """
import sys
sys.path[:0] = [".", "tests"]
import jax, jax.numpy as jnp, numpy as np, optax
import muzero_atari_multigpu as ma
from test_atari import small_args
assert len(jax.local_devices()) == 2
args = small_args(batch_size=16)
net = ma.make_network(args, 5)
params = ma.init_params(net, args, jax.random.PRNGKey(0))
opt = optax.chain(optax.clip_by_global_norm(args.max_grad_norm), optax.adam(args.learning_rate))
rng = np.random.default_rng(0)
L, K, N = args.history_length, args.unroll_steps, args.td_steps
w = L + K + N + 1
def batch():
    return {"obs": rng.integers(0, 255, (16, w, 32, 32, 1)).astype(np.uint8),
            "reward": rng.choice([0.0, 1.0], (16, w)).astype(np.float32),
            "is_first": np.eye(w, dtype=bool)[rng.integers(0, 3, 16)], "is_last": np.zeros((16, w), bool),
            "action": rng.integers(0, 5, (16, w)).astype(np.int32),
            "value": rng.normal(size=(16, w)).astype(np.float32),
            "policy": rng.dirichlet(np.ones(5), (16, w)).astype(np.float32), "valid": np.ones((16, w), bool)}
batches = [(batch(), rng.uniform(0.5, 1.5, 16).astype(np.float32)) for _ in range(3)]
results = []
for ids in [(0,), (0, 1)]:
    a = small_args(batch_size=16, learner_device_ids=ids)
    update = ma.make_update_fn(net, a, opt)
    state = ma.replicate(ma.TrainState(params, params, opt.init(params), jnp.zeros((), jnp.int32)), a)
    for b, weights in batches:
        state, metrics = update(state, b, weights)
    leaf = state.params["params"]["repr_stem"]["Conv_0"]["kernel"]
    assert leaf.shape[0] == len(ids) and len(leaf.sharding.device_set) == len(ids)
    copies = jax.device_get(state.params)
    for i in range(1, len(ids)):  # every device holds the same parameters
        assert all((x[0] == x[i]).all() for x in jax.tree.leaves(copies))
    results.append((ma.unreplicate(copies), float(metrics["losses/total_loss"][0])))
(p1, l1), (p2, l2) = results
diff = max(float(np.max(np.abs(a - b))) for a, b in zip(jax.tree.leaves(p1), jax.tree.leaves(p2)))
moved = max(float(np.max(np.abs(a - b))) for a, b in zip(jax.tree.leaves(p1), jax.tree.leaves(params)))
print("max param diff", diff, "max update", moved, "losses", l1, l2)
assert moved > 1e-3 and diff < 1e-5 and abs(l1 - l2) < 1e-4 * abs(l1)
"""


def test_pmap_update_over_two_devices_equals_the_one_device_update():
    out = subprocess.run([sys.executable, "-c", SAME_UPDATE], cwd=os.path.dirname(ma.__file__), env=ENV2,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]


# --- runs: actor threads, devices, processes ------------------------------------------------------------
RUN = [*SMALL, "--total-timesteps", "768", "--learning-starts", "128", "--batch-size", "16", "--buffer-size", "1024",
       "--eval-episodes", "2", "--eval-interval", "384", "--seed", "3", "--save-model", "--num-envs", "2"]
MODEL = "muzero_atari_multigpu.muzero_model"


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    """One seed, 2 actor threads of 2 games each (2 x 2 x 16 = 64 steps an iteration), in two layouts started
    together: one process with both threads and the learner pmapped over 2 devices, and two localhost processes
    under jax.distributed with 1 thread and 1 learner device each. The same global threads, replays and batch;
    the second layout has no thread race inside a process, so equal logs show the first's threads do not make
    the run depend on their timing."""
    one, two = tmp_path_factory.mktemp("one_process"), tmp_path_factory.mktemp("two_processes")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run_together([([*RUN, "--num-actor-threads", "2", "--actor-device-ids", "0", "1", "--learner-device-ids", "0", "1"],
                   one, ma.__file__, ENV2)]
                 + [([*RUN, "--num-processes", "2", "--coordinator-address", f"127.0.0.1:{port}", "--process-id", str(i)],
                     two, ma.__file__, {**ENV, "XLA_FLAGS": "--xla_force_host_platform_device_count=1"}) for i in range(2)])
    (one_dir,), (two_dir,) = glob.glob(str(one / "runs" / "*")), glob.glob(str(two / "runs" / "*"))
    return one_dir, two_dir


def params_of(path):
    return jax.tree.leaves(ma.load_model(path)[2])


def test_same_seed_same_logs_with_two_actor_threads_in_one_process_or_two(layouts):
    one, two = layouts
    prefixes = ("charts/episodic", "charts/eval", "losses/", "charts/num_updates")
    a, b0, b1 = scalars(one, prefixes), scalars(two, prefixes), scalars(os.path.join(two, "process_1"), prefixes)
    # 768 / 64 = 12 iterations; updates start at the 3rd, once 128 positions (with their K + N steps after) are stored
    assert len(a["losses/total_loss"]) == 10 and [s for s, _ in a["charts/eval_episodic_return"]] == [384, 768]
    for tag in a:
        if tag.startswith("charts/episodic"):  # each process logs its own thread's games; one process logs both
            assert sorted(a[tag]) == sorted(b0.get(tag, []) + b1.get(tag, [])), tag
        elif tag.startswith("charts/eval"):  # process 0 evaluates
            assert a[tag] == b0[tag] and tag not in b1, tag
        else:  # the learner's metrics are averaged over all devices of all processes: the same in both processes,
            # and the one process's up to float rounding (XLA's CPU convolutions sum in an order that depends on the
            # threads the process has)
            assert b0[tag] == b1[tag], tag
            assert [s for s, _ in a[tag]] == [s for s, _ in b0[tag]], tag
            np.testing.assert_allclose([v for _, v in a[tag]], [v for _, v in b0[tag]], rtol=1e-4, atol=1e-6,
                                       err_msg=tag)
    assert len(a["charts/episodic_return"]) > 0 and b1.get("charts/episodic_return")  # games of both threads ended


def test_golden_run_muzero_atari_multigpu(layouts, golden):
    golden("muzero_atari_multigpu", ["XLA_FLAGS=--xla_force_host_platform_device_count=2", "python",
                                     "muzero_atari_multigpu.py", *RUN, "--num-actor-threads", "2", "--actor-device-ids",
                                     "0", "1", "--learner-device-ids", "0", "1"],
           scalars(layouts[0], ("losses/", "charts/episodic", "charts/eval_episodic", "charts/num_updates",
                                "charts/root_value", "charts/policy_entropy", "stats/replay_size")))


def test_two_processes_end_with_the_parameters_of_one_process_with_the_same_global_batch(layouts):
    one, two = layouts
    p0, p1, p = (params_of(os.path.join(d, MODEL)) for d in (two, os.path.join(two, "process_1"), one))
    for x, y, z in zip(p0, p1, p):
        np.testing.assert_array_equal(x, y)  # both processes hold the same parameters
        np.testing.assert_allclose(x, z, rtol=0, atol=1e-4)  # the losses' rounding (above) through 10 Adam steps
    args, net, _ = ma.load_model(os.path.join(two, MODEL))
    init = jax.tree.leaves(ma.init_params(net, args, jax.random.split(jax.random.PRNGKey(args.seed), 3)[1]))
    assert max(float(np.abs(x - y).max()) for x, y in zip(p0, init)) > 1e-3  # it trained
    # the saved model plays whole games
    returns = ma.evaluate(os.path.join(one, MODEL), eval_episodes=2)
    assert returns.shape == (2,) and (returns >= 0).all()


@pytest.mark.parametrize("flags, named", [
    (["--actor-device-ids", "1"], "--actor-device-ids"),
    (["--learner-device-ids", "0", "0"], "--learner-device-ids"),
    (["--num-actor-threads", "0"], "--num-actor-threads"),
    (["--num-actor-threads", "3", "--batch-size", "64"], "--batch-size"),
    (["--num-processes", "2"], "--coordinator-address"),
    (["--num-processes", "2", "--process-id", "2", "--coordinator-address", "127.0.0.1:1234"], "--process-id"),
    (["--env-id", "CartPole-v1"], "--env-id"),
    (["--resolution", "40"], "--resolution"),
])
def test_bad_device_thread_and_host_flags_exit_with_a_message(tmp_path, monkeypatch, capsys, flags, named):
    assert_refused(ma, flags, named, tmp_path, monkeypatch, capsys)
