"""Tests of muzero_breakthrough.py: what two players change, against hand computations and OpenSpiel."""

import glob
import os
import signal
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pyspiel
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import muzero_breakthrough as bt
import muzero_tools as tools
from test_runs import resume_to_the_end, scalars, stop

ENV = {**os.environ, "WANDB_MODE": "disabled", "COLUMNS": "500"}


# --- environment bridge (4.3.1) --------------------------------------------------------------------
@pytest.mark.parametrize("board_size", [5, 8])
def test_white_moves_are_black_moves_upside_down_in_openspiel_names(board_size):
    table = bt.BreakthroughVecEnv(board_size, 1).openspiel_action
    state = pyspiel.load_game(f"breakthrough(rows={board_size},columns={board_size})").new_initial_state()
    # OpenSpiel names row r (from black's side) n - r, off the board too: upside down, name d is n + 1 - d
    upside_down = str.maketrans("".join(map(str, range(board_size + 2))), "".join(map(str, range(board_size + 1, -1, -1))))
    for action in range(table.shape[1]):
        assert table[0, action] == action
        assert state.action_to_string(1, int(table[1, action])) == state.action_to_string(0, action).translate(upside_down)
    np.testing.assert_array_equal(table[1, table[1]], np.arange(table.shape[1]))  # the mirror is its own inverse


def test_each_player_sees_the_board_from_its_own_side_with_its_pieces_first():
    envs = bt.BreakthroughVecEnv(5, 1)
    step = envs.step(np.zeros(1, np.int32))
    black = step.obs[0]
    assert black.shape == (5, 5, 4)
    np.testing.assert_array_equal(black[..., :3], envs.observe(0, as_mover=False)[..., :3])  # black: OpenSpiel's planes
    np.testing.assert_array_equal(black[0, :, 0], 1)  # its row at the top, as OpenSpiel prints it
    np.testing.assert_array_equal(black[4, :, 1], 1)
    np.testing.assert_array_equal(black[..., 3], 0)
    envs.to_play[0] = 1  # the first position is symmetric: white would see it as black does
    np.testing.assert_array_equal(envs.observe(0)[..., :3], black[..., :3])
    np.testing.assert_array_equal(envs.observe(0)[..., 3], 1)
    envs.to_play[0] = 0
    move = int(np.flatnonzero(envs.legal_actions(np.array([False]))[0])[0])
    assert envs.states[0].action_to_string(0, move - 1) == "a5a4"
    step = envs.step(np.array([move]))
    white, board = step.obs[0], envs.observe(0, as_mover=False)[..., :3]
    np.testing.assert_array_equal(white[..., 0], board[::-1, :, 1])  # its own pieces first
    np.testing.assert_array_equal(white[..., 1], board[::-1, :, 0])
    np.testing.assert_array_equal(white[..., 2], board[::-1, :, 2])
    np.testing.assert_array_equal(white[..., 3], 1)
    assert white[3, 0, 1] == 1 and white[4, 0, 1] == 0  # black's moved piece, one row up from its side at the bottom


def test_legal_masks_come_from_openspiel_and_the_terminal_reward_goes_to_the_mover():
    envs = bt.BreakthroughVecEnv(5, 3)
    game = pyspiel.load_game("breakthrough(rows=5,columns=5)")
    reference = [game.new_initial_state() for _ in range(3)]
    rng = np.random.default_rng(0)
    step = envs.step(np.zeros(3, np.int32))
    assert step.is_first.all() and not step.is_last.any()
    np.testing.assert_array_equal(step.to_play, 0)
    ended = np.zeros(3, bool)
    while not ended.all():
        legal = envs.legal_actions(step.is_last)
        for i, state in enumerate(reference):
            if step.is_last[i]:
                np.testing.assert_array_equal(legal[i], np.eye(envs.num_actions)[0])  # only the dummy
            elif not ended[i]:
                assert legal[i, 0] == 0
                moves = envs.openspiel_action[state.current_player(), np.flatnonzero(legal[i]) - 1]
                np.testing.assert_array_equal(np.sort(moves), state.legal_actions())
                assert step.to_play[i] == state.current_player()
        actions = np.array([rng.choice(np.flatnonzero(row)) for row in legal])
        movers = step.to_play.copy()
        for i, state in enumerate(reference):
            if not ended[i]:
                state.apply_action(int(envs.openspiel_action[movers[i], actions[i] - 1]))
        step = envs.step(actions)
        for i, state in enumerate(reference):
            if not ended[i] and state.is_terminal():
                assert step.is_last[i] and step.to_play[i] == 1 - movers[i]
                assert step.reward[i] == state.returns()[movers[i]] == 1.0  # the mover won
                ended[i] = True
            elif not ended[i]:
                assert step.reward[i] == 0.0 and not step.is_last[i]


# --- planner (4.3.6): negamax --------------------------------------------------------------------
class TwoPlayerModel:
    """A hand-written model in place of the network, for the script's own recurrent function. The
    embedding is (depth, first move). Values and priors are flat; the only reward is +1 to the player
    who plays move 3 at the root, or who answers the root's move 1 with move 3: 3 wins at once, 1 is a
    blunder that hands the opponent a winning reply, 2 is quiet."""

    support_size = 10
    num_actions = 4

    def apply(self, params, x, action=None, method=None):
        depth, first = x[:, 0], x[:, 1]
        if method is bt.MuZeroNet.dynamics:
            wins = (action == 3) & ((depth == 0) | ((depth == 1) & (first == 1)))
            reward = jnp.log(bt.scalar_to_categorical(wins.astype(jnp.float32), self.support_size) + 1e-12)
            return jnp.stack([depth + 1, jnp.where(depth == 0, action, first)], 1), reward
        value = jnp.log(bt.scalar_to_categorical(jnp.zeros(len(x)), self.support_size) + 1e-12)
        return jnp.zeros((len(x), self.num_actions)), value


def search(embedding, legal_moves, planner, gamma=1.0, batch=4):
    # the root prior leans to the blunder, so the search must look past it to turn it down
    root = bt.mctx.RootFnOutput(
        prior_logits=jnp.tile(jnp.array([0.0, 1.0, 0.0, 0.0]), (batch, 1)),
        value=jnp.zeros(batch),
        embedding=jnp.tile(jnp.asarray(embedding, jnp.int32), (batch, 1)),
    )
    legal = jnp.zeros((batch, 4), bool).at[:, legal_moves].set(True)
    cfg = bt.planner_configs(bt.Args(planner=planner, eval_num_simulations=64))[1]
    recurrent_fn = bt.make_recurrent_fn(TwoPlayerModel(), gamma)
    out = jax.jit(lambda root, legal: cfg(None, jax.random.PRNGKey(0), root, recurrent_fn, invalid_actions=~legal))(
        root, legal
    )
    return np.asarray(out.action), np.asarray(out.search_tree.qvalues(jnp.zeros(batch, jnp.int32)))


@pytest.mark.parametrize("planner", ["gumbel", "muzero"])
def test_negamax_search_wins_for_the_player_to_move_and_avoids_the_blunder(planner):
    action, q = search([0, 0], [1, 2, 3], planner)  # the root player: move 3 wins at once
    np.testing.assert_array_equal(action, 3)
    np.testing.assert_allclose(q[:, 3], 1.0, atol=1e-3)
    action, q = search([1, 1], [1, 2, 3], planner)  # the opponent, after the blunder: its move 3 wins
    np.testing.assert_array_equal(action, 3)
    np.testing.assert_allclose(q[:, 3], 1.0, atol=1e-3)
    action, q = search([0, 0], [1, 2], planner)  # without the win: the quiet move, not the blunder the prior likes
    np.testing.assert_array_equal(action, 2)
    # MCTS backs up means: one refutation found among the blunder's visits already makes its Q negative
    assert np.all(q[:, 1] < -0.05) and np.all(np.abs(q[:, 2]) < 1e-3)
    # searched as one player (discount +1), the same model takes the opponent's win for its own
    action, q = search([0, 0], [1, 2], planner, gamma=-1.0)
    np.testing.assert_array_equal(action, 1)
    assert np.all(q[:, 1] > 0.1)


def test_the_dynamics_function_sees_the_move_at_initialisation():
    """g's next state moves with the move about as much as with the hidden state (0.85; one-hot / 301: 0.003)."""
    args = bt.Args()
    net = bt.make_network(args, 301)
    params = bt.init_params(net, args, jax.random.PRNGKey(0))
    keys = jax.random.split(jax.random.PRNGKey(1), 4)
    x1, x2 = (bt.scale_hidden(jax.random.uniform(k, (64, 5, 5, args.channels))) for k in keys[:2])
    a1, a2 = (jax.random.randint(k, (64,), 1, 301) for k in keys[2:])

    def g(x, a):
        return net.apply(params, x, a, method=bt.MuZeroNet.dynamics)[0]

    by_move, by_state = np.abs(g(x1, a1) - g(x1, a2)).mean(), np.abs(g(x1, a1) - g(x2, a1)).mean()
    assert 0.3 < by_move / by_state < 3


# --- targets (4.3.7): each step seen by its own player -------------------------------------------
def window(is_first, is_last, rewards, num_actions=4, explored=None):
    n = len(is_first)
    return {
        "obs": jnp.zeros((n, 2, 2, 1), jnp.uint8),
        "reward": jnp.asarray(rewards, jnp.float32),
        "is_first": jnp.asarray(is_first, bool),
        "is_last": jnp.asarray(is_last, bool),
        "action": jnp.ones(n, jnp.int32),
        "explored": jnp.zeros(n, bool) if explored is None else jnp.asarray(explored, bool),
        "value": 10.0 + jnp.arange(n, dtype=jnp.float32),  # v*_j = 10 + j, each for its own player to move
        "policy": jnp.full((n, num_actions), 1 / num_actions),
        "valid": jnp.ones(n, bool),
    }


def test_target_signs_alternate_with_the_player_and_the_terminal_reward_is_the_winners():
    g = 0.5
    # one game: steps 0-5, the move at step 4 wins (reward +1 arrives with step 5, the last)
    w = window(
        [1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]
    )
    t = bt.compute_targets(w, history_length=2, unroll_steps=2, td_steps=3, gamma=g)  # c = 2
    # G_2: the player at step 2 also moves at step 4 and wins: +g^2. G_3: its opponent loses: -g.
    # G_4: the winning move itself: +1. No bootstrap past the end.
    np.testing.assert_allclose(t.values, [g**2, -g, 1.0])
    np.testing.assert_array_equal(t.rewards, [0.0, 0.0])
    # inside a game, the bootstrap value of step j+N belongs to the player N plies later: sign (-1)^N
    w = window([1] + [0] * 11, [0] * 12, [0] * 12)
    t = bt.compute_targets(w, history_length=2, unroll_steps=2, td_steps=3, gamma=g)
    np.testing.assert_allclose(t.values, [-(g**3) * 15, -(g**3) * 16, -(g**3) * 17])
    t = bt.compute_targets(w, history_length=2, unroll_steps=2, td_steps=2, gamma=g)
    np.testing.assert_allclose(t.values, [g**2 * 14, g**2 * 15, g**2 * 16])


def test_a_random_move_cuts_the_returns_that_reach_it_and_they_bootstrap_from_the_value_before_it():
    g = 0.5
    # one game, steps 0-11; the move made at step 5 is a random one; a reward of 1 arrives with step 4 (made at 3) and
    # 3 with step 6 (after the random move). c = 2, K = 2, N = 4
    rewards = [0, 0, 0, 0, 1, 0, 3, 0, 0, 0, 0, 0]
    explored = [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]
    w = window([1] + [0] * 11, [0] * 12, rewards, explored=explored)
    t = bt.compute_targets(w, history_length=2, unroll_steps=2, td_steps=4, gamma=g)
    # G_2 = r_3 - g r_4 + g^2 r_5 - g^3 v_5 (cut after 3 plies: v*_5 = 15, the searched value before the random move)
    # G_3 = r_4 - g r_5 + g^2 v_5; G_4 = r_5 - g v_5; without the cut G_3 would also count r_6 = 3 and v_7
    np.testing.assert_allclose(t.values, [-g * 1 - g**3 * 15, 1 + g**2 * 15, -g * 15])
    priority_fn = bt.make_priority_fn(bt.Args(history_length=2, unroll_steps=2, td_steps=4, gamma=g))
    priority = float(priority_fn({k: w[k][None] for k in bt.PRIORITY_FIELDS})[0])
    assert priority == pytest.approx(abs(12 - (-g - g**3 * 15)))
    # a random move at the window's first trained position: its own return is its search value
    t = bt.compute_targets(window([1] + [0] * 11, [0] * 12, rewards, explored=[0, 0, 1] + [0] * 9), 2, 2, 4, g)
    assert float(t.values[0]) == 12.0
    # the same game without random moves: G_3 = r_4 - g r_5 + g^2 r_6 - g^3 r_7 + g^4 v_7
    t = bt.compute_targets(window([1] + [0] * 11, [0] * 12, rewards), 2, 2, 4, g)
    np.testing.assert_allclose(t.values[1], 1 + g**2 * 3 + g**4 * 17)


def test_a_random_moves_position_is_stored_with_priority_zero():
    args = bt.Args(history_length=2, unroll_steps=1, td_steps=2, num_steps=4)
    replay = bt.Replay(args, 2, (2, 2, 1), 4, 0)
    span = replay.window_length - 1 + args.num_steps  # L + S + K + N steps, trainable positions c = L .. L+S-1
    w = window([1] + [0] * (span - 1), [0] * span, [0] * span, explored=[0, 0, 0, 1, 0, 0, 0, 0, 0])
    segments = {k: np.asarray(v)[None] for k, v in w.items()}  # one segment
    bt.add_with_priorities(replay, segments, bt.make_priority_fn(args))
    priorities = replay.priorities[0]
    # c = 2 and 3 bootstrap before the random move of step 3: |v*_2 - g v*_3| and 0; c = 4, 5: |v*_c - g^2 v*_{c+2}|
    g = args.gamma
    expected = [abs(12 + g * 13), 0.0, abs(14 - g**2 * 16), abs(15 - g**2 * 17)]
    np.testing.assert_allclose(priorities, expected, rtol=1e-5)


# --- evaluation ---------------------------------------------------------------------------------------
def test_evaluator_scores_a_strong_player_near_one_and_its_mirror_near_zero():
    game = pyspiel.load_game("breakthrough(rows=5,columns=5)")
    strong, weak = bt.BotPlayer(game, 100, (1,)), bt.BotPlayer(game, 0, (2,))
    scores, colour, _ = bt.play_games((strong, weak), 5, 20)
    assert np.sum(colour == 0) == np.sum(colour == 1) == 10  # both colours equally
    assert set(np.unique(scores)) <= {0.0, 1.0} and np.mean(scores) >= 0.85
    assert np.mean(scores[colour == 0]) >= 0.8 and np.mean(scores[colour == 1]) >= 0.8
    scores, colour, _ = bt.play_games((bt.BotPlayer(game, 0, (2,)), bt.BotPlayer(game, 100, (1,))), 5, 20)
    assert np.mean(scores) <= 0.15


def test_untrained_agent_plays_only_legal_moves_and_its_recording_replays_in_openspiel():
    args = bt.Args(channels=8, repr_blocks=1, pred_blocks=0, head_hidden=16, eval_num_simulations=4)
    net = bt.make_network(args, bt.BreakthroughVecEnv(5, 1).num_actions)
    params = bt.init_params(net, args, jax.random.PRNGKey(0))
    act_fn = bt.make_act_fn(net, bt.planner_configs(args)[1], args.gamma, keep_tree=True)
    scores, colour, recording = bt.evaluate_policy(act_fn, params, args, "random", 40, (0,), record=True)
    # an illegal move would have raised in OpenSpiel's apply_action
    assert scores.shape == (40,) and set(np.unique(scores)) <= {0.0, 1.0} and np.sum(colour == 1) == 20
    # the recording of game 0 replays in OpenSpiel to its end, with a search of 4 simulations at every ply
    assert len(recording.frames) == len(recording.trees) == len(recording.actions) > 5
    assert recording.frames[0].shape == (5, 5, 2)  # the planes of black's and white's pieces
    envs = bt.BreakthroughVecEnv(5, 1)
    state = envs.game.new_initial_state()
    for step, (action, tree) in enumerate(zip(recording.actions[:-1], recording.trees)):
        assert tree.node_visits.shape == (1, 5) and tree.node_visits[0, 0] == 5
        board = np.asarray(state.observation_tensor(0)).reshape(3, 5, 5).transpose(1, 2, 0)
        np.testing.assert_array_equal(recording.frames[step], board[..., :2])  # the real board, for both players
        move = int(envs.openspiel_action[state.current_player(), action - 1])
        assert tools.action_names_at(recording, step)[action] == state.action_to_string(state.current_player(), move)
        state.apply_action(move)
    assert state.is_terminal() and recording.actions[-1] == 0  # the dummy action after the last move


def test_random_moves_are_uniform_over_legal_ones_and_keep_the_search_policy_target():
    args = bt.Args(channels=8, repr_blocks=1, pred_blocks=0, head_hidden=16, num_simulations=4)
    envs = bt.BreakthroughVecEnv(5, 512)
    net = bt.make_network(args, envs.num_actions)
    params = bt.init_params(net, args, jax.random.PRNGKey(0))
    step = envs.step(np.zeros(512, np.int32))
    legal = envs.legal_actions(step.is_last)
    state = bt.initial_actor_state(512, args.history_length, envs.obs_shape)
    outputs = {}
    for prob in (0.0, 0.5, 1.0):
        act_fn = bt.make_act_fn(net, bt.planner_configs(args)[0], args.gamma, random_move_prob=prob)
        new_state, action, value, policy, _ = act_fn(params, state, step.obs, step.is_first, legal, jax.random.PRNGKey(3))
        outputs[prob] = np.asarray(action), np.asarray(policy), np.asarray(new_state.actions[:, -1])
    searched, policy, _ = outputs[0.0]
    for prob, (action, policy_p, history) in outputs.items():
        assert legal[np.arange(512), action].all() and (history == action).all()  # the history holds the move made
        np.testing.assert_allclose(policy_p, policy, atol=1e-6)  # the target stays the search's
    counts = np.bincount(outputs[1.0][0], minlength=envs.num_actions)[legal[0]]
    assert len(counts) == 13 and counts.min() > 15 and counts.max() < 65  # 512 / 13 = 39 each
    # about half the moves (less the random ones that match) differ at 0.5; were the search's key changed by the
    # flag, an untrained net's Gumbel choice would differ at ~12 of 13 moves
    assert 0.3 < np.mean(outputs[0.5][0] != searched) < 0.6


# --- the script as a user runs it -----------------------------------------------------------------------
SMALL_RUN = (
    "--total-timesteps 1024 --num-envs 8 --num-steps 32 --learning-starts 256 --batch-size 32 --buffer-size 4096 "
    "--channels 8 --repr-blocks 1 --pred-blocks 0 --head-hidden 16 --num-simulations 4 --eval-num-simulations 4 "
    "--eval-episodes 4 --eval-mcts-simulations 10 --eval-interval 512 --checkpoint-interval 512 --seed 2 --save-model"
).split()


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("breakthrough")
    out = subprocess.run(
        [sys.executable, bt.__file__, *SMALL_RUN], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    (run_dir,) = glob.glob(str(cwd / "runs" / "breakthrough__muzero_breakthrough__2__*"))
    return run_dir


def test_golden_run_muzero_breakthrough(smoke_run, golden):
    golden(
        "muzero_breakthrough",
        ["python", "muzero_breakthrough.py", *SMALL_RUN],
        scalars(
            smoke_run,
            (
                "losses/",
                "charts/episodic_return",
                "charts/episodic_length",
                "charts/eval_win_rate",
                "charts/num_updates",
                "charts/root_value",
                "charts/policy_entropy",
                "stats/replay_size",
            ),
        ),
    )


def test_self_play_smoke_run_writes_events_checkpoint_models_and_a_playable_model(smoke_run, tmp_path):
    run_dir = smoke_run
    acc = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    for opponent in ("random", "mcts"):
        rates = [e.value for e in acc.Scalars(f"charts/eval_win_rate_{opponent}")]
        assert [e.step for e in acc.Scalars(f"charts/eval_win_rate_{opponent}")] == [512, 1024]
        assert all(r in (0.0, 0.25, 0.5, 0.75, 1.0) for r in rates)
    lengths = [e.value for e in acc.Scalars("charts/episodic_length")]
    assert lengths and all(3 <= x <= 71 for x in lengths)  # plies of finished self-play games
    assert all(abs(e.value) == 1.0 for e in acc.Scalars("charts/episodic_return"))  # the first player won or lost
    assert "losses/value_loss" in tags and acc.Scalars("charts/num_updates")[-1].value > 0
    # a model at every checkpoint and at the end (the run's final parameters, as --save-model's), for a tournament
    assert sorted(glob.glob("step_*.muzero_model", root_dir=os.path.join(run_dir, "models"))) == [
        "step_1024.muzero_model",
        "step_512.muzero_model",
    ]
    with (
        open(os.path.join(run_dir, "models", "step_1024.muzero_model"), "rb") as a,
        open(os.path.join(run_dir, "muzero_breakthrough.muzero_model"), "rb") as b,
    ):
        assert a.read() == b.read()
    models = ("models/step_512.muzero_model", "models/step_1024.muzero_model", "muzero_breakthrough.muzero_model")
    assert [tools.model_step(os.path.join(run_dir, path)) for path in models] == [512, 1024, 1024]  # saved in its JSON
    scores = tools.evaluate(os.path.join(run_dir, "muzero_breakthrough.muzero_model"), eval_episodes=4)
    assert scores.shape == (4,) and set(np.unique(scores)) <= {0.0, 1.0}
    # the benchmark's results step files the run's win rates (muzero_tools.py collect and report)
    out = tmp_path / "results"
    tools.run_collect(tools.Collect(run_dir, wall_time=150, out=str(out), commit="abc1234", cpu_steal=0.1))
    tools.run_report(tools.Report(str(out)))
    curve = pd.read_csv(out / "win_rates.csv")
    assert pd.read_csv(out / "runs.csv").board_size.tolist() == [5]
    win_rates = {o: [e.value for e in acc.Scalars(f"charts/eval_win_rate_{o}")] for o in ("random", "mcts")}
    assert curve.step.tolist() == [512, 1024] and curve.seed.tolist() == [2, 2]
    assert curve.random.tolist() == pytest.approx(win_rates["random"]) and curve.mcts.tolist() == pytest.approx(
        win_rates["mcts"]
    )
    updates = int(acc.Scalars("charts/num_updates")[-1].value)
    assert (
        f"| 2 | 1,024 | {updates:,} | {win_rates['random'][-1]:.2f} | {win_rates['mcts'][-1]:.2f} | "
        in open(out / "results.md").read()
    )
    with open(out / "win_rates.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_a_run_killed_after_a_checkpoint_and_resumed_ends_as_the_uninterrupted_run(smoke_run, tmp_path):
    """kill -9 once the checkpoint at step 512 is written, then --resume: every logged value, the final parameters and
    the checkpoint models are those of the uninterrupted run, bit for bit."""
    run_dir, stopped_at = stop(tmp_path, signal.SIGKILL, SMALL_RUN, 2, bt)
    resume_to_the_end(tmp_path, run_dir, SMALL_RUN, stopped_at, bt)
    tags = ("losses/", "charts/", "stats/replay_size")
    assert scalars(run_dir, tags).keys() == scalars(smoke_run, tags).keys()
    for tag, values in scalars(smoke_run, tags).items():
        if tag != "charts/SPS":  # (a rate of the wall clock)
            assert scalars(run_dir, tags)[tag] == values, tag
    models = sorted(glob.glob("*.muzero_model", root_dir=smoke_run) + glob.glob("models/*.muzero_model", root_dir=smoke_run))
    assert models == ["models/step_1024.muzero_model", "models/step_512.muzero_model", "muzero_breakthrough.muzero_model"]
    for model in models:
        with open(os.path.join(run_dir, model), "rb") as resumed, open(os.path.join(smoke_run, model), "rb") as whole:
            assert resumed.read() == whole.read(), model
