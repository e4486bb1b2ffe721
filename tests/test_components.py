"""Unit tests of muzero_minatar.py against hand computations and the thesis' formulas."""

import dataclasses
from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest

import muzero_minatar as m

TINY = dict(channels=8, repr_blocks=1, dyn_blocks=1, pred_blocks=0, head_hidden=16, support_size=10)


def tiny_args(**kw):
    return m.Args(**{**TINY, **kw})


# --- scalar <-> categorical (2.8.6) ---------------------------------------------------------
def round_trip(x):
    probs = m.scalar_to_categorical(x, 30)
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-6)
    assert int((probs > 0).sum(-1).max()) <= 2  # weight on the two nearest integers only
    return m.categorical_to_scalar(probs, 30)


def test_transform_round_trip():
    with jax.enable_x64(True):  # the transform itself: exact to 1e-4 over [-300, 300]
        x = jnp.linspace(-300.0, 300.0, 60_001, dtype=jnp.float64)
        assert float(jnp.max(jnp.abs(round_trip(x) - x))) < 1e-4
    # in float32, as the agent runs it, the error is a few float32 ulps of x (~1.5e-4 at |x| = 300)
    x = jnp.linspace(-300.0, 300.0, 60_001)
    assert float(jnp.max(jnp.abs(round_trip(x) - x) / jnp.maximum(1.0, jnp.abs(x)))) < 2e-6


def test_transform_example_from_thesis():
    # phi(x) = 1.3 is 0.7 on the integer 1 and 0.3 on the integer 2
    x = m.phi_inverse(jnp.float32(1.3))
    probs = np.asarray(m.scalar_to_categorical(x, 2))
    np.testing.assert_allclose(probs, [0, 0, 0, 0.7, 0.3], atol=1e-5)


# --- history stacking (4.3.4) -----------------------------------------------------------------
def test_stack_history_layout():
    frames = jnp.arange(2 * 3 * 2 * 2 * 1, dtype=jnp.float32).reshape(2, 3, 2, 2, 1)  # B=2, L=3, C=1
    actions = jnp.array([[0, 1, 2], [2, 2, 0]])
    planes, acts = m.stack_history(frames, actions)
    assert planes.shape == (2, 2, 2, 3)
    np.testing.assert_array_equal(planes[0, 1, 0], frames[0, :, 1, 0, 0])  # oldest frame first
    np.testing.assert_array_equal(acts, actions)


def test_action_stem_is_a_1x1_convolution_over_one_hot_action_planes():
    # the stem of h and g: nn.Conv over [planes, one-hot(a_1) / |A|, ..., one-hot(a_L) / |A|] tiled over the
    # board, with the same parameters, initial values, outputs and gradients
    planes = jax.random.uniform(jax.random.PRNGKey(1), (2, 3, 3, 5))
    actions = jnp.array([[0, 2], [1, 1]])  # B=2, L=2, |A|=3
    one_hot = jnp.broadcast_to((jax.nn.one_hot(actions, 3) / 3).reshape(2, 1, 1, 6), (2, 3, 3, 6))
    full = jnp.concatenate([planes, one_hot], -1)
    stem, conv = m.ActionStem(4, num_actions=3), nn.Conv(4, (1, 1))
    params = stem.init(jax.random.PRNGKey(0), planes, actions)
    jax.tree.map(np.testing.assert_array_equal, params, conv.init(jax.random.PRNGKey(0), full))
    params = jax.tree.map(lambda p: p + 0.1, params)  # a nonzero bias too
    np.testing.assert_allclose(stem.apply(params, planes, actions), conv.apply(params, full), atol=1e-6)
    grads = [
        jax.grad(lambda p: jnp.sum(jnp.sin(f(p))))(params)
        for f in (lambda p: stem.apply(p, planes, actions), lambda p: conv.apply(p, full))
    ]
    jax.tree.map(partial(np.testing.assert_allclose, atol=1e-6), *grads)
    assert float(jnp.abs(grads[0]["params"]["kernel"][0, 0, 5 + 2]).max()) == 0.0  # no history starts with action 2


def make_tiny_actor(planner="gumbel", env_id="Breakout"):
    args = tiny_args(planner=planner, env_id=env_id)
    env = m.MinAtarVecEnv(env_id, 2, seed=0, sticky_action_prob=0.0)
    net = m.make_network(args, env.num_actions)
    params = m.init_params(net, args, jax.random.PRNGKey(0))
    act = m.make_act_fn(net, m.planner_configs(args)[0], args.gamma)
    return args, env, params, act


def test_actor_history_at_first_steps():
    args, env, params, act = make_tiny_actor()
    L = args.history_length
    state = m.initial_actor_state(2, L, env.obs_shape)
    state = state._replace(frames=state.frames + 5.0, actions=state.actions + 1)  # stale data to be cleared
    obs0 = np.random.default_rng(0).integers(0, 2, (2, *env.obs_shape)).astype(np.uint8)
    key = jax.random.PRNGKey(1)
    legal = env.legal_actions(np.zeros(2, bool))
    state, a0, _, _, _ = act(params, state, obs0, np.array([True, True]), legal, key)
    np.testing.assert_array_equal(state.frames[:, : L - 1], 0.0)
    np.testing.assert_array_equal(state.frames[:, -1], obs0)
    np.testing.assert_array_equal(state.actions[:, : L - 1], 0)
    np.testing.assert_array_equal(state.actions[:, -1], a0)
    assert np.all(np.asarray(a0) >= 1)  # the dummy action is illegal before the end
    obs1 = 1 - obs0
    state, a1, _, _, _ = act(params, state, obs1, np.array([False, True]), legal, key)
    np.testing.assert_array_equal(state.frames[0, -2:], np.stack([obs0[0], obs1[0]]))
    np.testing.assert_array_equal(state.frames[0, : L - 2], 0.0)
    np.testing.assert_array_equal(state.actions[0, -2:], [a0[0], a1[0]])
    np.testing.assert_array_equal(state.frames[1, : L - 1], 0.0)  # env 1 started a new episode
    np.testing.assert_array_equal(state.actions[1], [0] * (L - 1) + [int(a1[1])])


def test_env_bridge_dummy_action_and_reset():
    env = m.MinAtarVecEnv("Breakout", 1, seed=0, sticky_action_prob=0.0, max_episode_steps=3)
    step = env.step(np.zeros(1, np.int32))
    assert step.is_first[0] and not step.is_last[0] and step.reward[0] == 0
    np.testing.assert_array_equal(env.legal_actions(step.is_last)[0], [False, True, True, True])
    for _ in range(3):
        step = env.step(np.ones(1, np.int32))
        assert not step.is_first[0]
    assert step.is_last[0]  # the step cap ends the episode
    np.testing.assert_array_equal(env.legal_actions(step.is_last)[0], [True, False, False, False])
    step = env.step(np.zeros(1, np.int32))
    assert step.is_first[0] and not step.is_last[0]


# --- targets (4.3.7) ---------------------------------------------------------------------------
def window(is_first, is_last, actions, rewards, num_actions=4):
    n = len(is_first)
    obs = np.broadcast_to((np.arange(n) + 1)[:, None, None, None], (n, 2, 2, 1)).astype(np.uint8)  # o_j = j + 1
    rng = np.random.default_rng(0)
    return {
        "obs": jnp.asarray(obs),
        "reward": jnp.asarray(rewards, jnp.float32),
        "is_first": jnp.asarray(is_first, bool),
        "is_last": jnp.asarray(is_last, bool),
        "action": jnp.asarray(actions, jnp.int32),
        "value": 10.0 + jnp.arange(n, dtype=jnp.float32),  # v*_j = 10 + j
        "policy": jnp.asarray(rng.dirichlet(np.ones(num_actions), n), jnp.float32),
        "valid": jnp.ones(n, bool),
    }


def targets(w):
    return m.compute_targets(w, history_length=2, unroll_steps=2, td_steps=3, gamma=0.5)


def priority(w):
    """|v*_c - G^N_c| of make_priority_fn, given the window's PRIORITY_FIELDS only (no frames, actions or policies)."""
    priority_fn = m.make_priority_fn(m.Args(history_length=2, unroll_steps=2, td_steps=3, gamma=0.5))
    return float(priority_fn({k: w[k][None] for k in m.PRIORITY_FIELDS})[0])


def test_targets_bootstrap_inside_one_episode():
    w = window([1, 0, 0, 0, 0, 0, 0, 0], [0] * 8, [2, 3, 1, 2, 3, 1, 2, 3], [0, 7, 0, 1, 2, 5, 6, 4])
    t = targets(w)  # c = 2
    # G_j = r_{j+1} + .5 r_{j+2} + .25 r_{j+3} + .125 v*_{j+3}
    np.testing.assert_allclose(t.values, [1 + 1 + 1.25 + 1.875, 2 + 2.5 + 1.5 + 2.0, 5 + 3 + 1 + 2.125])
    np.testing.assert_array_equal(t.actions, [1, 2])
    np.testing.assert_array_equal(t.rewards, [1, 2])
    np.testing.assert_allclose(t.policies, w["policy"][2:5])
    assert priority(w) == pytest.approx(abs(12 - 5.125))
    assert float(t.consistency_mask) == 1.0
    planes, actions = t.stacked  # frames c-1, c; actions a_{c-2}, a_{c-1}
    np.testing.assert_allclose(planes, jnp.moveaxis(w["obs"][1:3, ..., 0], 0, -1))
    np.testing.assert_array_equal(actions, w["action"][0:2])


def test_targets_across_an_episode_boundary():
    # steps 0-1: an earlier episode; 2-3: the episode of c = 2 (last step 3); 4-7: the next episode
    w = window([1, 0, 1, 0, 1, 0, 0, 0], [0, 1, 0, 1, 0, 0, 0, 0], [2, 0, 1, 0, 2, 1, 3, 1], [0, 7, 0, 1, 0, 5, 6, 4])
    t = targets(w)
    np.testing.assert_allclose(t.values, [1.0, 0.0, 0.0])  # no bootstrap past the end, zero after it
    np.testing.assert_array_equal(t.actions, [1, 0])  # the dummy action at the last step
    np.testing.assert_array_equal(t.rewards, [1, 0])  # nothing from the next episode
    np.testing.assert_allclose(t.policies[:2], w["policy"][2:4])
    np.testing.assert_allclose(t.policies[2], [1, 0, 0, 0])  # dummy policy beyond the end
    assert priority(w) == pytest.approx(11.0)
    # history at c: zero frame and dummy actions before the episode's first step
    planes, actions = t.stacked
    np.testing.assert_allclose(planes, jnp.stack([jnp.zeros((2, 2)), w["obs"][2, ..., 0]], -1))
    np.testing.assert_array_equal(actions, [0, 0])
    planes, actions = t.next_stacked
    np.testing.assert_allclose(planes, jnp.moveaxis(w["obs"][2:4, ..., 0], 0, -1))
    np.testing.assert_array_equal(actions, [0, 1])
    assert float(t.consistency_mask) == 1.0
    assert float(targets({**w, "is_last": w["is_last"].at[2].set(True)}).consistency_mask) == 0.0


# --- planner (4.3.6) ------------------------------------------------------------------------------
def rewarding_model(num_actions=4, good=2, batch=8):
    """A hand-written model: the embedding counts the depth; only `good` taken at the root pays 1."""
    root = mctx.RootFnOutput(prior_logits=jnp.zeros((batch, num_actions)), value=jnp.zeros(batch), embedding=jnp.zeros(batch))

    def recurrent_fn(params, rng, action, depth):
        reward = ((action == good) & (depth == 0)).astype(jnp.float32)
        out = mctx.RecurrentFnOutput(
            reward=reward, discount=jnp.full(batch, 0.9), prior_logits=jnp.zeros((batch, num_actions)), value=jnp.zeros(batch)
        )
        return out, depth + 1

    return root, recurrent_fn


@pytest.mark.parametrize("planner", ["gumbel", "muzero"])
def test_planner_chooses_the_rewarding_action(planner):
    train_cfg, test_cfg = m.planner_configs(m.Args(planner=planner))
    root, recurrent_fn = rewarding_model()
    legal = jnp.ones((8, 4), bool).at[:, 0].set(False)
    out = test_cfg(None, jax.random.PRNGKey(0), root, recurrent_fn, invalid_actions=~legal)
    np.testing.assert_array_equal(out.action, 2)
    np.testing.assert_array_equal(jnp.argmax(out.action_weights, -1), 2)
    out = train_cfg(None, jax.random.PRNGKey(0), root, recurrent_fn, invalid_actions=~legal)
    assert float(jnp.mean(out.action_weights[:, 2])) > 0.5
    # the root mask wins over the reward: an illegal action is never chosen nor targeted
    out = test_cfg(None, jax.random.PRNGKey(0), root, recurrent_fn, invalid_actions=~legal.at[:, 2].set(False))
    assert not np.any(np.asarray(out.action) == 2)
    np.testing.assert_array_equal(out.action_weights[:, 2], 0.0)


def test_gumbel_evaluation_is_greedy_unless_given_gumbel_noise():
    root, recurrent_fn = rewarding_model()
    legal = jnp.ones((8, 4), bool).at[:, 0].set(False)
    actions = {}
    for scale in (0.0, 100.0):  # noise far larger than the logits and Q: the choice is close to uniform
        test_cfg = m.planner_configs(m.Args(planner="gumbel", eval_gumbel_scale=scale))[1]
        out = test_cfg(None, jax.random.PRNGKey(0), root, recurrent_fn, invalid_actions=~legal)
        actions[scale] = set(np.asarray(out.action).tolist())
    assert actions[0.0] == {2}  # the 8 copies of the same root all take the rewarding action
    assert len(actions[100.0]) > 1 and 0 not in actions[100.0]  # sampled, never the masked action


def test_untrained_network_predicts_zero_value_and_reward_and_a_uniform_prior():
    args = tiny_args()
    net = m.make_network(args, num_actions=4)
    params = m.init_params(net, args, jax.random.PRNGKey(0))
    stacked = (
        jax.random.uniform(jax.random.PRNGKey(1), (5, 10, 10, args.history_length * 4)),  # Breakout: 4 channels
        jax.random.randint(jax.random.PRNGKey(2), (5, args.history_length), 0, 4),
    )  # 3 actions + dummy
    x = net.apply(params, stacked, method=m.MuZeroNet.represent)
    policy_logits, value_logits = net.apply(params, x, method=m.MuZeroNet.predict)
    _, reward_logits = net.apply(params, x, jnp.arange(5) % 4, method=m.MuZeroNet.dynamics)
    np.testing.assert_allclose(jax.nn.softmax(policy_logits), 0.25)
    for logits in (value_logits, reward_logits):
        np.testing.assert_allclose(m.categorical_to_scalar(jax.nn.softmax(logits), args.support_size), 0.0, atol=1e-5)
    assert float(jnp.std(x)) > 0.1  # the hidden state itself is not constant


def test_residual_blocks_keep_the_parameter_names_saved_models_have():
    args = tiny_args()
    params = m.init_params(m.make_network(args, 4), args, jax.random.PRNGKey(0))["params"]
    assert sorted(params["projection"]) == ["Conv_0", "Conv_1", "LayerNorm_0", "LayerNorm_1"]
    assert sorted(params["repr_tower_0"]) == ["Conv_0", "Conv_1", "LayerNorm_0", "LayerNorm_1"]


# --- replay (4.3.14) ------------------------------------------------------------------------------
def test_sampling_probabilities_and_importance_weights():
    pr = np.array([0.5, 2.0, 0.0, 1.0, 3.0])
    valid = np.array([True, True, True, True, False])
    p = m.sampling_probabilities(pr, valid, "uniform", 1.0, 0.0)
    np.testing.assert_allclose(p, [0.25, 0.25, 0.25, 0.25, 0.0])
    p = m.sampling_probabilities(pr, valid, "proportional", 0.5, 0.1)
    raw = np.array([0.6, 2.1, 0.1, 1.1]) ** 0.5
    np.testing.assert_allclose(p[:4], raw / raw.sum())
    assert p[4] == 0
    p = m.sampling_probabilities(pr, valid, "rank", 1.0, 0.0)
    raw = 1 / np.array([3.0, 1.0, 4.0, 2.0])  # ranks by priority: 2.0 -> 1, 1.0 -> 2, 0.5 -> 3, 0.0 -> 4
    np.testing.assert_allclose(p[:4], raw / raw.sum())
    # the weights over their largest, as prioritized replay (and MuZero) use them: the rarest sample weighs 1
    np.testing.assert_allclose(m.importance_weights(p[:4], 4), (1 / p[:4]) / (1 / p[:4]).max())
    np.testing.assert_allclose(m.importance_weights(p[:4], 4), [3 / 4, 1 / 4, 1.0, 2 / 4])  # 1/P: 3, 1, 4, 2
    np.testing.assert_allclose(m.importance_weights(p[:4], 4, 0.5), np.sqrt([3 / 4, 1 / 4, 1.0, 2 / 4]))
    np.testing.assert_allclose(m.importance_weights(p[:4], 4, 0.0), 1.0)


def test_replay_samples_by_priority_and_evicts_oldest():
    L, S, look = 2, 4, 3
    args = tiny_args(
        history_length=L,
        num_steps=S,
        unroll_steps=1,
        td_steps=2,
        sampling="proportional",
        priority_epsilon=0.0,
        importance_exponent=1.0,
    )
    replay = m.Replay(args, 3, (2, 2, 1), 4, seed=0)
    segs = m.empty_segments(4, L + S + look, (2, 2, 1), 4)
    segs["valid"][:] = True
    segs["reward"][:] = np.arange(4)[:, None]  # marks the segment
    segs["action"][:] = np.arange(L + S + look)[None]  # marks the step: a window's first action is its position
    pr = np.ones((4, S), np.float32)
    pr[3, 1] = 9.0
    replay.add(segs, pr)  # 4 segments into capacity 3: segment 0 is evicted
    assert replay.num_trainable == 3 * S
    batch, w = replay.sample(20_000)
    seg_id, pos = batch["reward"][:, 0], batch["action"][:, 0]
    assert set(np.unique(seg_id)) == {1.0, 2.0, 3.0}
    np.testing.assert_array_equal(batch["reward"][:, -1], seg_id)  # a window stays inside its segment
    hot = (seg_id == 3) & (pos == 1)  # priority 9 of a total 11 * 1 + 9 = 20
    assert np.mean(hot) == pytest.approx(9 / 20, abs=0.02)
    # 1 / (N P(i)) over the largest, that of a priority-1 position: 1 for them, 1/9 for the hot one
    np.testing.assert_allclose(w[hot], (1 / (12 * 9 / 20)) / (1 / (12 * 1 / 20)), rtol=1e-5)
    np.testing.assert_allclose(w[~hot], 1.0, rtol=1e-5)


# --- loss and update (4.3.8) ------------------------------------------------------------------------
def synthetic_replay(args, num_segments=8):
    """Replay (uniform sampling) filled with random Breakout-shaped steps (about one episode start in 20)."""
    args = dataclasses.replace(args, sampling="uniform")
    L, S, look = args.history_length, args.num_steps, args.unroll_steps + args.td_steps
    rng = np.random.default_rng(0)
    segs = m.empty_segments(num_segments, L + S + look, (10, 10, 4), 4)
    n = segs["reward"].shape
    segs["obs"] = rng.integers(0, 2, segs["obs"].shape).astype(np.uint8)
    segs["reward"] = rng.integers(0, 3, n).astype(np.float32)
    segs["is_first"] = rng.random(n) < 0.05
    segs["is_last"] = np.roll(segs["is_first"], -1, axis=1)
    segs["action"] = rng.integers(1, 4, n).astype(np.int32)
    segs["value"] = rng.normal(3, 2, n).astype(np.float32)
    segs["policy"] = rng.dirichlet(np.ones(4) * 0.3, n).astype(np.float32)
    segs["valid"][:] = True
    replay = m.Replay(args, num_segments, (10, 10, 4), 4, seed=0)
    replay.add(segs, np.ones((num_segments, S), np.float32))
    return replay


def test_loss_halves_on_a_fixed_batch():
    args = tiny_args(batch_size=32, unroll_steps=3, td_steps=3, learning_rate=3e-3, num_steps=8)
    batch, weights = synthetic_replay(args).sample(args.batch_size)
    net = m.make_network(args, 4)
    params = m.init_params(net, args, jax.random.PRNGKey(0))
    opt = m.make_optimizer(args)
    state = m.replicate(m.TrainState(params, params, opt.init(params), jnp.zeros((), jnp.int32)), args)
    update = m.make_update_fn(net, args, opt)
    losses = []
    for _ in range(200):
        state, metrics = update(state, batch, weights)
        losses.append(float(metrics["losses/total_loss"][0]))
    assert np.isfinite(losses).all()
    assert losses[-1] <= 0.5 * losses[0], (losses[0], losses[-1])


def test_each_update_steps_by_the_learning_rate():
    # a constant gradient within the clipping norm: Adam's normalised step is 1, so each update is -(step size)
    opt = m.make_optimizer(tiny_args(learning_rate=3e-3))
    params = {"w": jnp.zeros(3)}
    state, steps = opt.init(params), []
    for _ in range(12):
        updates, state = opt.update({"w": jnp.full(3, 0.1)}, state, params)
        steps.append(-float(updates["w"][0]))
    np.testing.assert_allclose(steps, [3e-3] * 12, rtol=1e-4, atol=1e-9)


def test_scale_gradient_halves():
    g = jax.grad(lambda x: m.scale_gradient(x, 0.5) * 3.0)(2.0)
    assert float(g) == pytest.approx(1.5)
    assert float(m.scale_gradient(jnp.float32(2.0), 0.5)) == 2.0
