"""Tests of muzero_atari_multigpu.py: envpool's Atari games, the down-sampling network, a run with two actor
threads on two forced CPU devices (a fresh interpreter: the device count is fixed when jax starts). The
skeleton it shares with muzero_minatar.py is tested in test_devices.py."""

import glob
import os
import signal
import subprocess
import time
from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pandas as pd
import pytest

import muzero_atari_multigpu as ma
import muzero_run
import muzero_tools as tools
from test_runs import resume_to_the_end, run_together, scalars, stop
from test_tools import load_benchmark

ENV = {**os.environ, "WANDB_MODE": "disabled", "COLUMNS": "500"}
ENV2 = {**ENV, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
SMALL = (
    "--resolution 32 --num-envs 4 --num-steps 16 --channels 8 --repr-blocks 1 "
    "--pred-blocks 0 --head-hidden 16 --num-simulations 2 --unroll-steps 2 --td-steps 3 --max-episode-steps 100 "
    "--sticky-action-prob 0.25"  # the default before the Atari 100k suite
).split()


def small_args(**kw) -> ma.Args:
    return ma.Args(
        **{
            **dict(
                resolution=32,
                num_envs=4,
                num_steps=16,
                channels=8,
                repr_blocks=1,
                pred_blocks=0,
                head_hidden=16,
                num_simulations=2,
                unroll_steps=2,
                td_steps=3,
                max_episode_steps=100,
                sticky_action_prob=0.25,  # the default before the Atari 100k suite, as SMALL
            ),
            **kw,
        }
    )


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


def pixel_player(params, state: ma.ActorState, obs, is_first, legal, key):
    """An act function whose action in each game depends on that game's screen and last action alone (its state):
    the legal action that a sum of both picks."""
    last_action = np.asarray(state.actions)[:, -1]
    picks = ((obs.reshape(len(obs), -1).sum(1) + last_action)[:, None] * np.arange(1, legal.shape[1] + 1)) % 7
    action = np.argmax(np.where(legal, picks, -1), 1)
    state = ma.ActorState(state.frames, jnp.concatenate([state.actions[:, 1:], action[:, None]], axis=1))
    return state, action, np.zeros(len(legal)), legal / legal.sum(1, keepdims=True), None


def test_the_evaluation_searches_only_the_games_still_playing_and_each_plays_as_in_the_whole_batch():
    """A game that has ended leaves the searched batch (halved to a power of two as games end), so that one game
    playing on to the step cap does not cost the search of all; every game's returns and length are those of the
    same player searching all games at every step."""
    args = small_args(max_episode_steps=400)
    widths = []

    def counting_player(*inputs):
        widths.append(len(inputs[2]))
        return pixel_player(*inputs)

    returns, lengths, _ = ma.evaluate_policy(counting_player, None, args, 8, (3, 0))
    envs = ma.AtariVecEnv(args, 8, (3, 0), episodic_life=False)  # the whole batch at every step, as before
    state = ma.initial_actor_state(8, args.history_length, envs.obs_shape)
    step = envs.step(np.zeros(8, np.int32))
    episodes = ma.EpisodeTracker(8)
    whole_returns, whole_lengths = np.full(8, np.nan), np.zeros(8, np.int64)
    while np.isnan(whole_returns).any():
        state, action = pixel_player(None, state, step.obs, step.is_first, envs.legal_actions(step.is_last), None)[:2]
        ended, ended_returns, ended_lengths = episodes.update(step)
        first_time = np.isnan(whole_returns[ended])
        whole_returns[ended[first_time]] = ended_returns[first_time]
        whole_lengths[ended[first_time]] = ended_lengths[first_time]
        step = envs.step(action)
    assert len(set(lengths)) > 2 and returns.sum() > 0  # games that end at different times, with points scored
    np.testing.assert_array_equal(returns, whole_returns)
    np.testing.assert_array_equal(lengths, whole_lengths)
    assert widths[0] == 8 and widths[-1] in (1, 2) and set(widths) <= {8, 4, 2, 1} and widths == sorted(widths)[::-1]


def test_the_fire_rule_holds_only_in_games_whose_action_set_has_fire():
    """FIRE's agent action comes from the emulator's action set: Breakout's and Pong's second, none in Freeway's, whose
    lives start with every action open (the rule would otherwise force UP)."""
    assert ma.fire_action("Breakout-v5") == 2 and ma.fire_action("Pong-v5") == 2 and ma.fire_action("Freeway-v5") is None
    envs = ma.AtariVecEnv(small_args(env_id="Freeway-v5"), 2, (1, 0), episodic_life=True)
    step = envs.step(np.zeros(2, np.int32))
    assert envs.num_actions == 4 and step.is_first.all()
    np.testing.assert_array_equal(envs.legal_actions(step.is_last), [[False, True, True, True]] * 2)


def test_a_game_cut_at_the_step_cap_is_truncated_not_ended():
    envs = ma.AtariVecEnv(small_args(env_id="Pong-v5", max_episode_steps=20), 2, (1, 0), episodic_life=True)
    step, steps = envs.step(np.zeros(2, np.int32)), 0
    while not step.is_last.any():
        step, steps = envs.step(np.full(2, 1 + steps % 2)), steps + 1
    assert steps == 20 and step.is_last.all() and step.truncated.all() and step.game_over.all()
    assert envs.legal_actions(step.is_last)[:, 1:].all()  # the actors search a cut game's last step


def window(is_first, is_last, truncated, rewards, n=8, size=4):
    """A window of n steps of size x size frames of 255 (v*_j = 10 + j, actions 1, uniform policies)."""
    return {
        "obs": jnp.full((n, size, size, 1), 255, jnp.uint8),
        "reward": jnp.asarray(rewards, jnp.float32),
        "is_first": jnp.asarray(is_first, bool),
        "is_last": jnp.asarray(is_last, bool),
        "truncated": jnp.asarray(truncated, bool),
        "action": jnp.ones(n, jnp.int32),
        "value": 10.0 + jnp.arange(n, dtype=jnp.float32),
        "policy": jnp.full((n, 5), 0.2),
        "valid": jnp.ones(n, bool),
    }


def test_pixels_enter_the_network_scaled_to_0_1():
    """The actors stack float frames of 0-255, the learner uint8 windows: both reach h in [0, 1]."""
    planes, actions = ma.stack_history(jnp.full((2, 4, 6, 6, 1), 255.0), jnp.full((2, 4), 3, jnp.int32))
    np.testing.assert_allclose(planes, 1.0)  # the 4 frame planes; the actions stay numbers for ActionConv
    np.testing.assert_array_equal(actions, 3)
    t = ma.compute_targets(window([1] + [0] * 7, [0] * 8, [0] * 8, [0] * 8), 2, 2, 3, 0.5)
    np.testing.assert_allclose(t.stacked[0][..., :2], 1.0)
    assert float(t.stacked[0].max()) == 1.0


@pytest.mark.parametrize("size, kernel, stride", [(96, 8, 4), (12, 3, 2), (10, 4, 3)])
def test_the_first_convolution_equals_nn_conv_over_the_tiled_action_planes(size, kernel, stride):
    """ActionConv never builds the one-hot planes: its output, the edges included (where SAME padding cuts the
    window), is nn.Conv's over [frame planes, one-hot planes tiled over the board], with the same parameters."""
    frames, num_actions = 3, 5
    conv = ma.ActionConv(7, num_actions, kernel, stride)
    planes = jax.random.uniform(jax.random.PRNGKey(1), (2, size, size, frames))
    actions = jnp.array([[0, 4], [2, 2]])
    params = conv.init(jax.random.PRNGKey(0), planes, actions)
    tiled = jnp.broadcast_to(jax.nn.one_hot(actions, num_actions).reshape(2, 1, 1, -1), (2, size, size, 2 * num_actions))
    reference = nn.Conv(7, (kernel, kernel), strides=stride).apply(params, jnp.concatenate([planes, tiled], -1))
    got = conv.apply(params, planes, actions)
    assert got.shape == reference.shape == (2, -(-size // stride), -(-size // stride), 7)
    np.testing.assert_allclose(got, reference, rtol=1e-5, atol=1e-5)
    edge = conv.apply(params, planes, actions.at[1].set(jnp.array([0, 4])))[1, 0, 0]
    assert not np.allclose(edge, got[1, 0, 0])  # the actions reach the corner square too


def test_g_reads_the_move_as_an_undivided_one_hot():
    """g's stem: planes @ kernel + one-hot(a) @ the move rows: changing the move moves g's input by whole rows."""
    stem = ma.ActionStem(4, num_actions=5)
    planes = jnp.zeros((2, 3, 3, 2))
    params = stem.init(jax.random.PRNGKey(0), planes, jnp.zeros((2, 1), jnp.int32))
    out = stem.apply(params, planes, jnp.array([[1], [3]]))
    kernel = params["params"]["kernel"][0, 0]
    np.testing.assert_allclose(out[1, 0, 0] - out[0, 0, 0], kernel[2 + 3] - kernel[2 + 1], atol=1e-6)


@pytest.mark.parametrize("q_min_range, favoured", [(0.01, 1), (1e-8, 2)])
def test_a_q_difference_of_1e_4_decides_the_search_only_without_the_range_floor(q_min_range, favoured):
    """A model whose only difference is a reward of 1e-4 for action 2 at the root: min-max normalisation over a range
    of 1e-4 makes it the whole [0, 1] and the search follows it; with a floor of 0.01 the visits follow the prior."""
    args = small_args(q_min_range=q_min_range, dirichlet_fraction=0.0, num_simulations=32)
    search = ma.planner_configs(args)[0]
    root = mctx.RootFnOutput(prior_logits=jnp.array([[-1e9, 2.0, 0.0]]), value=jnp.zeros(1), embedding=jnp.zeros(1))

    def recurrent_fn(params, rng, action, depth):  # the embedding: the node's depth
        reward = 1e-4 * ((action == 2) & (depth == 0))
        output = mctx.RecurrentFnOutput(
            reward=reward, discount=jnp.ones(1), prior_logits=jnp.zeros((1, 3)), value=jnp.zeros(1)
        )
        return output, depth + 1

    visits = search((), jax.random.PRNGKey(0), root, recurrent_fn).search_tree.summary().visit_counts[0]
    assert int(jnp.argmax(visits)) == favoured and visits[favoured] > 2 * visits[3 - favoured]


def test_values_of_large_reward_games_fit_the_default_support():
    """phi^-1(300) = 58,700 (MuZero's support): a value of 20,000 survives the categorical round trip; at 30, 905."""

    def round_trip(x, size):
        return float(ma.categorical_to_scalar(ma.scalar_to_categorical(jnp.float32(x), size), size))

    assert ma.Args().support_size == 300
    assert np.isclose(round_trip(20_000.0, 300), 20_000.0, rtol=1e-4)
    assert np.isclose(round_trip(20_000.0, 30), float(ma.phi_inverse(jnp.float32(30))), rtol=1e-4)
    assert 58_000 < float(ma.phi_inverse(jnp.float32(300))) < 59_000


def test_value_range_returns_run_to_each_episodes_end():
    returns_to_go = load_benchmark("muzero_atari_value_range").returns_to_go
    rewards = np.array([[0.0], [1.0], [2.0], [0.0], [4.0]])  # rewards[t]: of the step into t
    is_last = np.array([[False], [False], [True], [False], [False]])
    np.testing.assert_allclose(returns_to_go(rewards, is_last, 0.5).ravel(), [1 + 0.5 * 2, 2, 0, 4, 0])


@pytest.mark.parametrize("cut", [True, False])
def test_a_cut_game_bootstraps_from_its_last_value_and_an_ended_one_from_zero(cut):
    # steps 0-4: the episode of c = 2, whose last step 4 is the cap (cut) or the game's end; 5-8: the next game
    is_first, is_last, truncated = [1, 0, 0, 0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 1, 0, 0, 0, 0], [0, 0, 0, 0, cut, 0, 0, 0, 0]
    w = window(is_first, is_last, truncated, [0, 7, 0, 1, 2, 9, 6, 4, 3], n=9)
    t = ma.compute_targets(w, history_length=2, unroll_steps=3, td_steps=3, gamma=0.5)
    v4 = 14.0 if cut else 0.0  # v*_4 = 14
    # G_2 = r_3 + .5 r_4 + .25 v_4, G_3 = r_4 + .5 v_4, G_4 = v_4 (the cut shortens N to the steps left), G_5 = 0
    np.testing.assert_allclose(t.values, [1 + 1 + 0.25 * v4, 2 + 0.5 * v4, v4, 0.0])
    priority_fn = ma.make_priority_fn(ma.Args(history_length=2, unroll_steps=3, td_steps=3, gamma=0.5))
    priority = float(priority_fn({k: w[k][None] for k in ma.PRIORITY_FIELDS})[0])
    assert priority == pytest.approx(abs(12 - (2 + 0.25 * v4)))


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
    args = small_args(resolution=96, channels=16)
    net = ma.make_network(args, 5)
    planes = jax.ShapeDtypeStruct((2, 96, 96, args.history_length), np.float32)
    stacked = (planes, jax.ShapeDtypeStruct((2, args.history_length), np.int32))
    # shapes only (jax.eval_shape traces without computing): the full-size network is slow to run on a CPU
    params = jax.eval_shape(partial(ma.init_params, net, args), jax.random.PRNGKey(0))
    x = jax.eval_shape(partial(net.apply, method=ma.MuZeroNet.represent), params, stacked)
    assert x.shape == (2, 6, 6, 16)  # MuZero appendix: 96 x 96 pixels -> 6 x 6


# --- runs: actor threads, devices, processes ------------------------------------------------------------
RUN = [
    *SMALL,
    *"--total-timesteps 768 --learning-starts 128 --batch-size 16 --buffer-size 1024 --eval-episodes 2".split(),
    *"--eval-interval 384 --seed 3 --save-model --num-envs 2".split(),
]
MODEL = "muzero_atari_multigpu.muzero_model"
THREADS = "--num-actor-threads 2 --actor-device-ids 0 1 --learner-device-ids 0 1".split()


@pytest.fixture(scope="module")
def threaded_run(tmp_path_factory):
    """One run with 2 actor threads of 2 games each (2 x 2 x 16 = 64 steps an iteration) and the learner pmapped
    over 2 devices."""
    d = tmp_path_factory.mktemp("threads")
    run_together(
        [
            (
                [*RUN, *THREADS],
                d,
                ma.__file__,
                ENV2,
            )
        ]
    )
    (run_dir,) = glob.glob(str(d / "runs" / "*"))
    return run_dir


def test_a_threaded_run_logs_both_threads_and_saves_a_model_that_plays(threaded_run):
    logged = scalars(threaded_run, ("losses/", "charts/", "stats/actor_time"))
    # 768 / 64 = 12 iterations; updates start at the 3rd, once 128 positions (with their K + N steps after) are stored
    assert len(logged["losses/total_loss"]) == 10 and [s for s, _ in logged["charts/eval_episodic_return"]] == [384, 768]
    assert len(logged["stats/actor_time"]) == len(logged["stats/actor_time_thread1"]) == 12
    assert all(np.isfinite(v) for _, v in logged["losses/total_loss"])
    _, args, net, params = tools.load_model(os.path.join(threaded_run, MODEL))
    init = jax.tree.leaves(ma.init_params(net, args, jax.random.split(jax.random.PRNGKey(args.seed), 2 + 2)[1]))
    assert max(float(np.abs(x - y).max()) for x, y in zip(jax.tree.leaves(params), init)) > 1e-3  # it trained
    returns = tools.evaluate(os.path.join(threaded_run, MODEL), eval_episodes=2)  # whole games
    assert returns.shape == (2,) and (returns >= 0).all()


def test_a_run_logs_its_evaluations_standard_error_and_collect_keeps_the_last(threaded_run, tmp_path):
    errors = scalars(threaded_run, ("charts/eval_standard_error",))["charts/eval_standard_error"]
    assert [step for step, _ in errors] == [384, 768] and all(error >= 0 for _, error in errors)
    tools.run_collect(tools.Collect(threaded_run, wall_time=60, out=str(tmp_path)))
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert runs.final_eval_standard_error.tolist() == [pytest.approx(errors[-1][1])]
    # and what the results' "why" columns read: the search entropy over the first and last fifth, the rewarding share
    logged = scalars(threaded_run, ("charts/policy_entropy", "losses/rewarding_share"))
    entropy = [value for _, value in logged["charts/policy_entropy"]]  # in the order logged, as collect reads them
    fifth = len(entropy) // 5
    assert fifth >= 2 and np.mean(entropy[:fifth]) != np.mean(entropy[-fifth:])
    assert runs.policy_entropy_first_fifth.tolist() == [pytest.approx(np.mean(entropy[:fifth]))]
    assert runs.policy_entropy_last_fifth.tolist() == [pytest.approx(np.mean(entropy[-fifth:]))]
    assert runs.rewarding_share.tolist() == [pytest.approx(np.mean([v for _, v in logged["losses/rewarding_share"]]))]


def test_the_evaluations_standard_error_is_the_returns_deviation_over_the_root_of_the_episodes(monkeypatch):
    returns = np.array([1.0, 2.0, 3.0, 6.0])  # mean 3, deviation sqrt(3.5) (ddof 0): standard error sqrt(3.5) / 2
    monkeypatch.setattr(ma, "evaluate_policy", lambda *_: (returns, np.full(4, 10), None))
    logged = {}
    writer = type("Writer", (), {"add_scalar": lambda self, tag, value, step: logged.update({tag: (value, step)})})()
    run = muzero_run.Run("muzero_atari_multigpu", ma.Args(eval_episodes=4), "runs/x", writer)
    assert ma.log_evaluation(run, None, {}, iteration=3, global_step=512) == "eval_return=3.00"
    assert logged["charts/eval_standard_error"] == (pytest.approx(np.sqrt(3.5) / 2), 512)
    assert logged["charts/eval_episodic_return"] == (3.0, 512)


def test_resume_after_kill_replays_the_games_and_ends_as_the_uninterrupted_run(threaded_run, tmp_path):
    """envpool cannot save an emulator: a resumed actor thread rebuilds its games from their seeds and the actions
    played since, so the run ends exactly as the uninterrupted one (every logged value, the parameters bit for bit)."""
    flags = [*RUN, *THREADS, "--checkpoint-interval", "64"]  # a checkpoint after every iteration of 64 steps
    run_dir, stopped_at = stop(tmp_path, signal.SIGKILL, flags, 4, ma, ENV2, steps=64)
    resume_to_the_end(tmp_path, run_dir, flags, stopped_at, ma, ENV2, steps=64)
    tags = ("losses/", "charts/episodic", "charts/eval_episodic", "charts/root_value", "charts/policy_entropy")
    assert scalars(run_dir, tags) == scalars(threaded_run, tags)
    params = tools.load_model(os.path.join(run_dir, MODEL))[3]
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(tools.load_model(os.path.join(threaded_run, MODEL))[3])):
        np.testing.assert_array_equal(a, b)


def test_golden_run_muzero_atari_multigpu(threaded_run, golden):
    golden(
        "muzero_atari_multigpu",
        [
            "XLA_FLAGS=--xla_force_host_platform_device_count=2",
            "python",
            "muzero_atari_multigpu.py",
            *RUN,
            *THREADS,
        ],
        scalars(
            threaded_run,
            (
                "losses/",
                "charts/episodic",
                "charts/eval_episodic",
                "charts/num_updates",
                "charts/root_value",
                "charts/policy_entropy",
                "stats/replay_size",
            ),
        ),
    )


def test_the_gpu_check_runs_end_to_end_within_its_budget_and_writes_its_row(threaded_run, tmp_path):
    """benchmark/muzero_atari_gpu.sh with tiny sizes on the CPU, for 60 s: the run is stopped by Ctrl-C (exit 130, its
    model saved) and gpu_check.csv holds what it reached. Its extra flags give it the threaded run's sizes, threads and
    devices (all but the length), so it loads the functions that run compiled from the persistent compilation cache
    (conftest.py) instead of compiling them again: up to 2 minutes on a 2-core machine busy with another test."""
    import pandas as pd

    length = RUN.index("--total-timesteps")
    same_functions = [*RUN[:length], *RUN[length + 2 :], *THREADS]
    env = {**ENV2, "BUDGET": "60", "TINY": "1", "OUT": str(tmp_path / "check")}
    start = time.time()
    command = ["bash", "benchmark/muzero_atari_gpu.sh", *same_functions]
    out = subprocess.run(command, cwd=tools.REPO, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert time.time() - start < 60 + 120  # the budget, the save after Ctrl-C, reading the events
    (row,) = pd.read_csv(tmp_path / "check" / "gpu_check.csv").to_dict("records")
    assert list(row) == [
        "agent_steps", "updates", "evaluations", "agent_steps_per_s", "updates_per_s", "samples_per_s",
        "device_memory_gib", "host_memory_gib", "last_eval_return", "exit_status", "budget_s", "machine", "jax", "command",
    ]  # fmt: skip
    assert row["exit_status"] == 130 and row["budget_s"] == 60  # stopped by Ctrl-C at the budget
    assert row["agent_steps"] > 0 and row["agent_steps"] % 64 == 0  # whole iterations of 2 threads x 2 games x 16 steps
    assert row["updates"] > 0 and row["evaluations"] >= 1 and np.isfinite(row["last_eval_return"]), out.stdout[-2000:]
    assert row["agent_steps_per_s"] > 0 and row["samples_per_s"] == pytest.approx(16 * row["updates_per_s"], rel=1e-2)
    assert row["device_memory_gib"] == 0 and row["host_memory_gib"] > 0.1  # no nvidia-smi on a CPU machine
    assert row["machine"].startswith(f"{os.cpu_count()} cores, ") and row["machine"].endswith(", CPU cpu")
    assert row["jax"] == jax.__version__
    assert row["command"].startswith("python muzero_atari_multigpu.py --num-simulations 2 ")
