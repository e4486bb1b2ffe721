"""Reanalyze (muzero_minatar_reanalyze.py, thesis 4.3.10): what a reanalysed segment holds (push), and reanalysis when
a batch is drawn (sample, MuZero Reanalyze): target-network values, horizons shortened by age, new policies, priorities."""

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
        reanalyze_mode="push",
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
        r.make_act_fn(net, train, args.gamma),
        thread=0,
        queues=r.ActorQueues(params=queue.Queue(), rollouts=rollouts),
        pending_params=[params],
        learner_alive=lambda: True,
        iterations=range(1, 2),
        key=jax.random.PRNGKey(2),
        snapshot=None,
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
    segments, positions, stats = r.reanalyze_segments(
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


def test_reanalysed_values_move_to_the_model_values(played):
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


# --- --reanalyze-mode sample: targets made when a batch is drawn (MuZero Reanalyze, EfficientZero) ----------------
def test_the_horizon_shortens_with_age_and_the_returns_follow_it():
    args = r.Args(td_steps=5, td_age_updates=30)  # one step shorter per 30 updates of age, never below 1
    horizon = r.td_horizon(jnp.array([100, 70, 40, 0, -1000]), 100, args)
    np.testing.assert_array_equal(horizon, [5, 4, 3, 2, 1])
    # the window of test_targets_bootstrap_inside_one_episode (c = 2, N = 3, gamma 0.5, v*_j = 10 + j): with n = 2,
    # G_j = r_{j+1} + .5 r_{j+2} + .25 v*_{j+2}; with n = 1, G_j = r_{j+1} + .5 v*_{j+1}; n = N is the base's
    w = window([1, 0, 0, 0, 0, 0, 0, 0], [0] * 8, [2, 3, 1, 2, 3, 1, 2, 3], [0, 7, 0, 1, 2, 5, 6, 4])
    kw = dict(history_length=2, unroll_steps=2, td_steps=3, gamma=0.5)
    np.testing.assert_allclose(r.compute_targets(w, **kw, horizon=jnp.int32(2)).values, [5.5, 8.25, 12.0])
    np.testing.assert_allclose(r.compute_targets(w, **kw, horizon=jnp.int32(1)).values, [7.5, 9.0, 12.5])
    np.testing.assert_allclose(r.compute_targets(w, **kw, horizon=jnp.int32(3)).values, r.compute_targets(w, **kw).values)
    # the target network's values, given for the steps c+n .. c+K+n, replace v*_{j+2}
    given = jnp.array([-8.0, 16.0, 40.0])
    np.testing.assert_allclose(r.compute_targets(w, **kw, horizon=jnp.int32(2), bootstrap_values=given).values, [0, 8.5, 18])
    # and they are the values of the histories at c+n .. c+K+n = 4, 5, 6
    histories = r.bootstrap_histories(w, r.Args(history_length=2, unroll_steps=2, td_steps=3), horizon=jnp.int32(2))
    for i, j in enumerate((4, 5, 6)):
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a[i], b), histories, r.history_at(w, j, 2))


def sample_args(**kw):
    """Sample mode at tiny sizes with nothing reanalysed, no horizon rule and v* bootstraps unless `kw` says otherwise."""
    kw = {"reanalyze_ratio": 0.0, "td_age_updates": 0, "value_bootstrap": "search", **kw}
    return r.Args(**TINY, num_steps=8, unroll_steps=3, td_steps=3, batch_size=16, reanalyze_mode="sample", **kw)


def synthetic_batch(args, seed=0):
    """A replay (uniform sampling) of random Breakout-shaped steps, its p* and v* made at updates 0 .. 40, and a batch."""
    L, S = args.history_length, args.num_steps
    rng = np.random.default_rng(seed)
    segs = r.empty_segments(4, L + S + args.unroll_steps + args.td_steps, (10, 10, 4), 4)
    shape = segs["reward"].shape
    segs["obs"] = rng.integers(0, 2, segs["obs"].shape).astype(np.uint8)
    segs["reward"] = rng.integers(0, 3, shape).astype(np.float32)
    segs["is_first"] = rng.random(shape) < 0.1
    segs["is_last"] = np.roll(segs["is_first"], -1, axis=1)
    segs["action"] = np.where(segs["is_last"], 0, rng.integers(1, 4, shape)).astype(np.int32)
    segs["value"] = rng.normal(3, 2, shape).astype(np.float32)
    segs["policy"] = rng.dirichlet(np.ones(4) * 0.3, shape).astype(np.float32)
    segs["valid"][:] = True
    segs["made_at"][:] = rng.integers(0, 40, (4, 1))
    replay = r.Replay(dataclasses.replace(args, sampling="uniform"), 4, (10, 10, 4), 4, seed=seed)
    replay.add(segs, np.ones((4, S), np.float32))
    batch, weights = r.sample_batch([replay], args.batch_size)
    return replay, batch, weights


def first_update(module, args, batch, weights, params):
    net = module.make_network(args, 4)
    opt = module.make_optimizer(args)
    state = module.replicate(module.TrainState(params, params, opt.init(params), jnp.full((), 40, jnp.int32)), args)
    return module.make_update_fn(net, args, opt)(state, batch, weights)


def test_sample_mode_with_nothing_reanalysed_trains_as_the_base():
    """--reanalyze-mode sample at --reanalyze-ratio 0, no horizon rule, v* bootstraps: the base's update, value for value."""
    import muzero_minatar as base

    args = sample_args()
    _, batch, weights = synthetic_batch(args)
    params = r.init_params(r.make_network(args, 4), args, jax.random.PRNGKey(0))
    state, metrics, _ = first_update(r, args, batch, weights, params)
    base_args = base.Args(**{k: getattr(args, k) for k in base.Args.__dataclass_fields__})
    base_batch = {k: v for k, v in batch.items() if k != "made_at"}
    for a, b in zip(r.batched_targets(args)(batch), base.batched_targets(base_args)(base_batch)):
        jax.tree.map(np.testing.assert_array_equal, a, b)  # the targets, bit for bit
    base_state, base_metrics = first_update(base, base_args, base_batch, weights, params)
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(base_state)):  # the update, to rounding (XLA's fusions)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    assert max(float(np.abs(a - b).max()) for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(params))) > 1e-3
    for k, v in base_metrics.items():
        np.testing.assert_allclose(metrics[k], v, rtol=1e-5)


def test_sample_mode_priorities_are_the_update_s_value_errors():
    """After an update, the batch's positions have priority |value prediction - target| of that update, the target
    with the horizon shortened by age; the other positions keep theirs (and all do with --no-learner-priorities)."""
    args = sample_args(reanalyze_ratio=0.5, td_age_updates=10)
    replay, batch, weights = synthetic_batch(args)
    net = r.make_network(args, 4)
    params = r.init_params(net, args, jax.random.PRNGKey(0))
    _, _, value_errors = first_update(r, args, batch, weights, params)
    before = replay.priorities.copy()
    r.update_priorities([replay], value_errors, dataclasses.replace(args, learner_priorities=False))
    np.testing.assert_array_equal(replay.priorities, before)  # --no-learner-priorities: insertion's priorities stay
    r.update_priorities([replay], value_errors, args)
    horizon = r.td_horizon(batch["made_at"][:, args.history_length], 40, args)  # the update's count: 40
    np.testing.assert_array_less(horizon, args.td_steps + 1)
    assert len(set(np.asarray(horizon).tolist())) > 1  # ages that differ: horizons that differ
    t = r.batched_targets(args)(batch, horizon=horizon)
    _, value_logits = net.apply(params, net.apply(params, t.stacked, method=r.MuZeroNet.represent), method=r.MuZeroNet.predict)
    prediction = r.categorical_to_scalar(jax.nn.softmax(value_logits), args.support_size)
    expected = np.abs(prediction - t.values[:, 0])
    np.testing.assert_allclose(replay.priorities.flat[replay.sampled], expected, rtol=1e-5, atol=1e-6)
    untouched = np.ones(before.size, bool)
    untouched[replay.sampled] = False
    np.testing.assert_array_equal(replay.priorities.ravel()[untouched], before.ravel()[untouched])
    assert untouched.sum() > 0 and np.abs(expected - 1).max() > 0.01  # the priorities were 1 before


def test_new_data_enters_at_the_largest_priority():
    """--new-data-max-priority (EfficientZero's --use_max_priority): a new segment's positions take the largest priority
    in replay, 1 in an empty one, whatever their |v* - G^N|; without it they take the priorities given."""
    args = sample_args(new_data_max_priority=True)
    L, S = args.history_length, args.num_steps
    segment = r.empty_segments(1, L + S + args.unroll_steps + args.td_steps, (10, 10, 4), 4)
    given = np.full((1, S), 0.3, np.float32)
    replay = r.Replay(args, 3, (10, 10, 4), 4, seed=0)
    replay.add(segment, given)
    np.testing.assert_array_equal(replay.priorities[0], np.ones(S))  # an empty replay: 1
    replay.priorities[0, 5] = 4.5  # a learner's error
    replay.add(segment, given)
    np.testing.assert_array_equal(replay.priorities[1], np.full(S, 4.5))
    np.testing.assert_array_equal(replay.priorities[2], np.zeros(S))  # not yet filled
    insertion = r.Replay(dataclasses.replace(args, new_data_max_priority=False), 3, (10, 10, 4), 4, seed=0)
    insertion.add(segment, given)
    insertion.add(segment, given)
    np.testing.assert_array_equal(insertion.priorities[:2], np.full((2, S), 0.3, np.float32))


def test_fresh_policies_search_the_first_samples_again_in_one_batch(played):
    """With the parameters that played and no root noise, the new search gives back the stored p* at the positions
    c .. c+K of the first round(ratio x B) samples; with other parameters it differs there, and only there."""
    args, _, _, params, replay, reanalyze_fn = played
    args = dataclasses.replace(args, reanalyze_mode="sample", reanalyze_ratio=0.5)
    batch = jax.tree.map(jnp.asarray, replay.sample(8)[0])  # as the update receives it
    c, K = args.history_length, args.unroll_steps
    same, _ = r.fresh_policies(reanalyze_fn, params, batch, jax.random.PRNGKey(5), args)
    played_steps = batch["valid"][:4, c : c + K + 1]
    assert played_steps.sum() > 10
    np.testing.assert_allclose(
        same["policy"][:4, c : c + K + 1][played_steps], batch["policy"][:4, c : c + K + 1][played_steps], atol=1e-6
    )
    other, change = r.fresh_policies(reanalyze_fn, jax.tree.map(lambda x: x * 1.5, params), batch, jax.random.PRNGKey(5), args)
    distance = np.abs(np.asarray(other["policy"]) - batch["policy"]).sum(-1)
    changed = distance > 1e-3
    np.testing.assert_allclose(change, 0.5 * distance[:4, c : c + K + 1].mean(), rtol=1e-5)  # the update's logged change
    assert changed[:4, c : c + K + 1][played_steps].mean() > 0.5
    assert not changed[4:].any() and not changed[:, :c].any() and not changed[:, c + K + 1 :].any()
