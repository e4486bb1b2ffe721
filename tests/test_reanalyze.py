"""Reanalyze (muzero_minatar_reanalyze.py, thesis 4.3.10): what a refreshed segment holds, and the value half of
MuZero Reanalyze (--value-bootstrap target_network)."""

import copy
import dataclasses
import queue

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import muzero_minatar_reanalyze as r
from test_components import TINY, window


@pytest.fixture(scope="module")
def played():
    """One actor iteration of Breakout (2 environments, 16 steps) played with random network weights and
    no root noise, in a replay; the reanalyze planner set to the training one."""
    args = r.Args(
        **TINY,
        num_envs=2,
        num_steps=16,
        dirichlet_fraction=0.0,
        reanalyze_pb_c_init=2.25,
        num_simulations=8,
        reanalyze_num_simulations=8,
    )
    env = r.MinAtarVecEnv("Breakout", 1, seed=0, sticky_action_prob=0.0)
    net = r.make_network(args, env.num_actions)
    params = r.init_params(net, args, jax.random.PRNGKey(0))
    leaves, tree = jax.tree.flatten(params)  # random heads: predictions differ between states, no ties
    keys = jax.random.split(jax.random.PRNGKey(1), len(leaves))
    params = jax.tree.unflatten(tree, [x + 0.3 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys)])
    train, _, reanalyze = r.planner_configs(args)
    rollouts = queue.Queue()
    r.actor_loop(
        args,
        0,
        r.make_act_fn(net, train, args.gamma),
        [params],
        r.ActorQueues(params=queue.Queue(), rollouts=rollouts),
        lambda: True,
        range(1, 2),
        jax.random.PRNGKey(2),
        None,
    )
    rollout = rollouts.get_nowait()
    assert not isinstance(rollout, BaseException), rollout
    replay = r.Replay(dataclasses.replace(args, sampling="uniform"), 2, env.obs_shape, env.num_actions, seed=0)
    r.add_with_priorities(replay, rollout.segments, r.make_priority_fn(args))
    return args, env, net, params, replay, r.make_reanalyze_fn(net, reanalyze, args)


def reanalyse_both(played, params):
    """Both stored segments reanalysed with `params`, in storage order, and the stored ones."""
    args, env, _, _, replay, reanalyze_fn = played
    stored = {k: v.copy() for k, v in replay.storage.items()}
    _, segments, positions, stats = r.reanalyze_segments(
        replay, reanalyze_fn, params, 2, env.legal_actions, jax.random.PRNGKey(3), version=7
    )
    order = [next(j for j in range(2) if np.array_equal(stored["obs"][j], segments["obs"][i])) for i in range(2)]
    segments = {k: v[np.argsort(order)] for k, v in segments.items()}
    return stored, segments, positions, stats


def test_reanalysing_with_the_playing_parameters_reproduces_the_stored_targets(played):
    args, _, _, params, _, _ = played
    stored, new, positions, stats = reanalyse_both(played, params)
    valid = stored["valid"]
    assert positions == valid.sum() == 2 * args.num_steps  # every played step has its history in the segment
    np.testing.assert_allclose(new["value"][valid], stored["value"][valid], atol=1e-4)
    np.testing.assert_allclose(new["policy"][valid], stored["policy"][valid], atol=1e-6)
    assert np.abs(stored["value"][valid]).max() > 0.1  # random weights: values that could have differed
    for k in ("obs", "action", "reward", "is_first", "is_last", "valid"):  # the played trajectory stays
        np.testing.assert_array_equal(new[k], stored[k])
    assert stats["reanalyze/value_change"] < 1e-4 and abs(stats["reanalyze/policy_kl"]) < 1e-4
    assert (new["made_at"] == 7).all() and stats["reanalyze/targets_age_updates"] == 7


def test_refreshed_values_move_to_the_model_values(played):
    """A hand-written model: value 3 everywhere, reward 0. The search then values every root between 3 (the
    root's own value) and 3 x 0.997^8 (a leaf 8 simulations deep), whatever the stored searches said."""
    args, _, _, params, _, _ = played
    z = 2 * args.support_size + 1
    logits = jnp.log(r.scalar_to_categorical(jnp.float32(3.0), args.support_size) + 1e-12)
    hand = jax.tree.map(lambda x: x, params)
    inner = hand["params"]
    inner["value_head"] = {**inner["value_head"], "Dense_1": {"kernel": jnp.zeros((args.head_hidden, z)), "bias": logits}}
    inner["reward_head"] = {
        **inner["reward_head"],
        "Dense_1": {"kernel": jnp.zeros((args.head_hidden, z)), "bias": jnp.zeros(z)},
    }
    stored, new, _, stats = reanalyse_both(played, hand)
    valid = stored["valid"]
    assert np.abs(stored["value"][valid] - 3.0).mean() > 0.5
    assert np.all(
        (new["value"][valid] >= 3 * args.gamma**args.reanalyze_num_simulations - 1e-4) & (new["value"][valid] <= 3 + 1e-4)
    )
    assert stats["reanalyze/value_change"] > 0.5


def test_a_refresh_replaces_targets_and_priorities_in_place_and_keeps_every_played_step(played):
    """--reanalyze-mode refresh: one stored segment searched again with other parameters replaces its p*, v* and
    priorities where it lies; the replay's size, order and played steps stay, and the other segment is untouched."""
    args, env, _, params, replay, reanalyze_fn = played
    replay = copy.deepcopy(replay)  # the fixture's replay stays as played
    before = copy.deepcopy(replay.storage), replay.priorities.copy(), replay.size, replay.next
    other = jax.tree.map(lambda x: x * 1.5, params)
    seg, segments, _, _ = r.reanalyze_segments(replay, reanalyze_fn, other, 1, env.legal_actions, jax.random.PRNGKey(4), 9)
    r.add_with_priorities(replay, segments, r.make_priority_fn(args), refreshed=seg)
    (i,), j = seg, 1 - seg[0]
    assert (replay.size, replay.next) == before[2:]
    for k in ("obs", "action", "reward", "is_first", "is_last", "valid"):
        np.testing.assert_array_equal(replay.storage[k], before[0][k])
    for k in ("policy", "value", "made_at"):  # the refreshed segment holds the new search's targets
        np.testing.assert_array_equal(replay.storage[k][i], segments[k][0])
        np.testing.assert_array_equal(replay.storage[k][j], before[0][k][j])
    valid = before[0]["valid"][i]
    assert np.abs(replay.storage["value"][i][valid] - before[0]["value"][i][valid]).mean() > 0.01
    # its priorities are those the copy would get as a new segment (push), the other segment's stay
    pushed = r.Replay(args, 1, env.obs_shape, env.num_actions, seed=0)
    r.add_with_priorities(pushed, segments, r.make_priority_fn(args))
    np.testing.assert_array_equal(replay.priorities[i], pushed.priorities[0])
    np.testing.assert_array_equal(replay.priorities[j], before[1][j])
    assert not np.array_equal(replay.priorities[i], before[1][i])
    # the targets a batch is trained on now come from the new search
    t = r.batched_targets(args)(r.gather_windows(replay.storage, np.array([i]), np.array([0]), replay.window))
    np.testing.assert_allclose(t.policies[0, 0], segments["policy"][0, args.history_length])


def test_targets_bootstrap_from_given_values():
    # --value-bootstrap target_network: the network's values of the histories at c+N .. c+K+N replace v*
    w = window([1, 0, 0, 0, 0, 0, 0, 0], [0] * 8, [2, 3, 1, 2, 3, 1, 2, 3], [0, 7, 0, 1, 2, 5, 6, 4])
    histories = r.bootstrap_histories(w, r.Args(history_length=2, unroll_steps=2, td_steps=3))  # c + N = 5, 6, 7
    for i, j in enumerate((5, 6, 7)):
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a[i], b), histories, r.history_at(w, j, 2))
    t = r.compute_targets(
        w, history_length=2, unroll_steps=2, td_steps=3, gamma=0.5, bootstrap_values=jnp.array([-8.0, 16.0, 40.0])
    )
    # as test_targets_bootstrap_inside_one_episode with v*_{j+3} = 15, 16, 17 replaced by -8, 16, 40
    np.testing.assert_allclose(t.values, [1 + 1 + 1.25 - 1.0, 2 + 2.5 + 1.5 + 2.0, 5 + 3 + 1 + 5.0])
    # values given for steps after the episode's end are not bootstrapped from (the window of the next test)
    w = window([1, 0, 1, 0, 1, 0, 0, 0], [0, 1, 0, 1, 0, 0, 0, 0], [2, 0, 1, 0, 2, 1, 3, 1], [0, 7, 0, 1, 0, 5, 6, 4])
    t = r.compute_targets(
        w, history_length=2, unroll_steps=2, td_steps=3, gamma=0.5, bootstrap_values=jnp.array([-8.0, 16.0, 40.0])
    )
    np.testing.assert_allclose(t.values, [1.0, 0.0, 0.0])
