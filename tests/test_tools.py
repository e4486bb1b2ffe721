"""Tests of muzero_tools.py: the analysis tools (issue 14) and the benchmarks' results step."""

import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
import time

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from statsmodels.tools.sm_exceptions import PerfectSeparationWarning

import muzero_run
import muzero_tools as tools


def load_benchmark(name: str):
    """A script of benchmark/ as a module."""
    spec = importlib.util.spec_from_file_location(name, f"{tools.REPO}/benchmark/{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TRUE_ELO = np.array([0.0, 150.0, 300.0, -200.0, 600.0])  # player 0 is the anchor


def p_win(elo_i, elo_j):
    return 1 / (1 + 10 ** (-(elo_i - elo_j) / 400))


def test_bradley_terry_fit_is_exact_on_expected_results_and_recovers_ratings_from_simulated_games():
    n, games = len(TRUE_ELO), 400
    expected = np.array([[games * p_win(TRUE_ELO[i], TRUE_ELO[j]) if i != j else 0 for j in range(n)] for i in range(n)])
    elo, low, high = tools.bradley_terry(expected)
    np.testing.assert_allclose(elo, TRUE_ELO, atol=1e-4)  # the likelihood's maximum is at the true ratings
    assert low[0] == high[0] == 0 and (low[1:] < elo[1:]).all() and (elo[1:] < high[1:]).all()

    rng = np.random.default_rng(0)
    wins = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            wins[i, j] = rng.binomial(games, p_win(TRUE_ELO[i], TRUE_ELO[j]))
            wins[j, i] = games - wins[i, j]
    elo, low, high = tools.bradley_terry(wins, confidence=0.99)
    assert ((low <= TRUE_ELO) & (TRUE_ELO <= high)).all(), (elo, low, high)
    assert (high - low)[1:].max() < 120  # the intervals say something: 1,600 games per player
    assert np.argsort(elo).tolist() == np.argsort(TRUE_ELO).tolist()
    # the intervals narrow as 1 / sqrt(games)
    _, low4, high4 = tools.bradley_terry(4 * wins, confidence=0.99)
    np.testing.assert_allclose((high4 - low4)[1:], (high - low)[1:] / 2, rtol=1e-6)


def test_virtual_games_keep_an_unbeaten_player_finite_and_first():
    wins = np.array([[0, 3, 0], [7, 0, 0], [10, 10, 0]], float)  # player 2 won all its 20 games
    elo, _, _ = tools.bradley_terry(wins, prior_games=1.0)
    assert np.isfinite(elo).all() and elo[2] > elo[1] > elo[0] == 0
    assert elo[2] < 1500  # finite and not absurd: one virtual game against the anchor
    with pytest.warns(PerfectSeparationWarning):  # without them the maximum likelihood runs off towards infinity
        plain, _, _ = tools.bradley_terry(wins)
    assert plain[2] > elo[2] + 300


def test_protocol_says_how_each_script_evaluates_from_its_flags():
    import muzero_atari_multigpu as ma
    import muzero_breakthrough as bt
    import muzero_minatar as m

    def logged(args):  # the flags as a run's hyperparameters table has them
        return {k: str(v) for k, v in vars(args).items()}

    assert tools.protocol(logged(m.Args())) == (
        "sticky actions 0.0; evaluation every 100,000 frames and at the end: 32 episodes cut at gymnax's step limits "
        "(Freeway 2,500, the others 1,000); PUCT with 16 simulations, the action drawn from the visit counts at "
        "temperature 0.25, Dirichlet(0.1) noise on 0.25 of the root prior"
    )
    other = tools.protocol(logged(m.Args(planner="gumbel", max_episode_steps=500, sticky_action_prob=0.1)))
    assert other.startswith("sticky actions 0.1;") and "cut at 500 steps; Gumbel MuZero with 16 simulations" in other
    assert tools.protocol(logged(ma.Args())).startswith(
        "sticky actions 0.0, 4 frames an agent step, up to 30 no-ops at the start, a lost life ends a training episode; "
        "evaluation every 100,000 agent steps and at the end: 32 whole games cut at 27,000 agent steps; PUCT"
    )
    assert tools.protocol(logged(bt.Args(board_size=8))) == (
        "Breakthrough 8x8; evaluation every 100,000 plies and at the end: 50 games against each of a uniformly random "
        "player and MCTSBot-100, half with each colour; Gumbel MuZero with 64 simulations, its action without Gumbel noise"
    )
    sampled = tools.protocol(logged(ma.Args(planner="gumbel", eval_gumbel_scale=1.0)))
    assert sampled.endswith("; Gumbel MuZero with 16 simulations, its action with Gumbel noise of scale 1")
    before = logged(bt.Args(board_size=8))  # a run from before --eval-gumbel-scale: its evaluation was greedy
    del before["eval_gumbel_scale"]
    assert tools.protocol(before) == tools.protocol(logged(bt.Args(board_size=8)))
    older = logged(bt.Args())  # a run from before --eval-games took the base's name --eval-episodes
    older["eval_games"] = older.pop("eval_episodes")
    assert tools.protocol(tools.current_flag_names(older)) == tools.protocol(logged(bt.Args()))  # as run_flags reads it


def test_protocol_line_states_the_shared_words_once_and_names_the_runs_of_each_variant():
    runs = pd.DataFrame(
        {
            "env_id": ["Asterix", "Asterix", "Breakout", "Breakout", "Seaquest"],
            "seed": [1, 2, 1, 2, 1],
            "protocol": ["every 100k", "every 100k", "every 100k", "every 100k", "every 50k"],
        }
    )
    assert tools.protocol_line(runs) == "Protocol: every 100k (Asterix, Breakout seeds 1, 2) or 50k (Seaquest seed 1)."
    assert tools.protocol_line(runs.iloc[:2]) == "Protocol: every 100k."  # one protocol: no runs named
    runs.loc[4, "protocol"] = "other"  # nothing shared: each whole
    assert tools.protocol_line(runs) == "Protocol: every 100k (Asterix, Breakout seeds 1, 2) or other (Seaquest seed 1)."
    runs.loc[4, "protocol"] = "every 100k frames"  # one protocol the other's start: each keeps a word of its own
    assert tools.protocol_line(runs) == "Protocol: every 100k (Asterix, Breakout seeds 1, 2) or 100k frames (Seaquest seed 1)."
    seaquest = pd.DataFrame({"env_id": "Seaquest", "seed": [5, 1, 2, 3, 4, 9], "protocol": "every 50k"})
    assert tools.protocol_line(pd.concat([runs.iloc[:4], seaquest])) == (
        "Protocol: every 100k (Asterix, Breakout seeds 1, 2) or 50k (Seaquest seeds 1-5, 9)."  # consecutive seeds as a range
    )
    assert tools.protocol_line(pd.concat([runs.iloc[:4], seaquest.iloc[-1:]])).endswith("or 50k (Seaquest seed 9).")


def test_ladder_plays_every_pair_both_colours_rates_the_mcts_anchor_above_random_and_continues_where_it_stopped(
    tmp_path, monkeypatch
):
    import jax

    import muzero_breakthrough as bt

    args = bt.Args(channels=8, repr_blocks=1, pred_blocks=0, head_hidden=16, eval_num_simulations=4)
    net = bt.make_network(args, bt.BreakthroughVecEnv(args.board_size, 1).num_actions)
    (tmp_path / "run" / "models").mkdir(parents=True)
    for step in (100, 200):  # two untrained "checkpoints" of a run
        params = bt.init_params(net, args, jax.random.PRNGKey(step))
        muzero_run.save_model(str(tmp_path / "run" / "models" / f"step_{step}.muzero_model"), bt.SCRIPT, args, params, step)
    cfg = tools.Ladder(run_dirs=(str(tmp_path / "run"),), games_per_pair=10, mcts_simulations=(50, 10))
    ratings = tools.run_ladder(cfg)
    out = tmp_path / "run" / "ladder"
    games = pd.read_csv(out / "games.csv")
    assert len(games) == 10 and ((games.wins + games.losses) == 10).all()  # 5 players: every pair once
    assert ratings.player.tolist() == ["random", "mcts50", "mcts10", "step_100", "step_200"]
    assert ratings.step.tolist()[3:] == [100, 200] and (ratings.games == 40).all()
    elo = dict(zip(ratings.player, ratings.elo))
    assert elo["random"] == 0 and elo["mcts50"] > 200 and ratings.low[1] > 0  # MCTS-50 beats random players
    mcts = games[(games.player == "mcts50") & games.opponent.str.startswith("step_")]
    assert (mcts.wins > 5).all(), mcts  # it beats the untrained searchers too (7-8 of 10 with random openings)
    assert (out / "ladder.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # fixed by the seed
    again = tools.run_ladder(tools.Ladder(**{**vars(cfg), "out": str(tmp_path / "again")}))
    pd.testing.assert_frame_equal(again, ratings)
    # stopped after its first 7 pairs, run again: the last 3 pairs are played, and the ratings are the same
    games.head(7).to_csv(out / "games.csv", index=False)
    played = []
    real_play_games = bt.play_games
    monkeypatch.setattr(bt, "play_games", lambda *a: played.append(a) or real_play_games(*a))
    pd.testing.assert_frame_equal(tools.run_ladder(cfg), ratings)
    assert len(played) == 3
    # a ladder of other flags in that folder is refused, and nothing there changes
    before = {f: (out / f).read_bytes() for f in ("games.csv", "ratings.csv", "ladder.json")}
    with pytest.raises(tools.BadInput, match="--games-per-pair 10"):
        tools.run_ladder(tools.Ladder(**{**vars(cfg), "games_per_pair": 20}))
    assert before == {f: (out / f).read_bytes() for f in before}
    assert tools.read_played_pairs(str(out), tools.Ladder(**{**vars(cfg), "run_dirs": ("runs/another",)})) == {}  # replaced
    # the checkpoints of several runs in one tournament: each player named by its run, each run searching with its flags
    other = tmp_path / "breakthrough__gamma_1__2__1796000000"
    (other / "models").mkdir(parents=True)
    other_args = dataclasses.replace(args, gamma=1.0)
    other_params = bt.init_params(net, other_args, jax.random.PRNGKey(3))
    muzero_run.save_model(str(other / "models" / "step_300.muzero_model"), bt.SCRIPT, other_args, other_params, 300)
    both = tools.Ladder(run_dirs=(str(tmp_path / "run"), str(other)), games_per_pair=2, mcts_simulations=(10,))
    gammas = []
    real_make_act_fn = bt.make_act_fn
    monkeypatch.setattr(
        bt, "make_act_fn", lambda net, config, gamma: gammas.append(gamma) or real_make_act_fn(net, config, gamma)
    )
    ratings = tools.run_ladder(both)
    assert ratings.player.tolist() == ["random", "mcts10", "run/step_100", "run/step_200", "gamma_1__2/step_300"]
    assert ratings.run.tolist()[2:] == ["run", "run", "gamma_1__2"] and ratings.run[:2].isna().all()
    assert gammas == [args.gamma, 1.0] and (ratings.games == 8).all()  # one compiled search per run; 4 pairs of 2 games
    # runs on different boards cannot play each other: refused before anything is written
    board_4 = dataclasses.replace(args, board_size=4)
    net_4 = bt.make_network(board_4, bt.BreakthroughVecEnv(4, 1).num_actions)
    small = tmp_path / "breakthrough__board_4__1__1796000000"
    (small / "models").mkdir(parents=True)
    params_4 = bt.init_params(net_4, board_4, jax.random.PRNGKey(4))
    muzero_run.save_model(str(small / "models" / "step_100.muzero_model"), bt.SCRIPT, board_4, params_4, 100)
    with pytest.raises(tools.BadInput, match=r"different boards \(4, 5\)"):
        tools.run_ladder(tools.Ladder(run_dirs=(str(tmp_path / "run"), str(small)), out=str(tmp_path / "mixed")))
    assert not (tmp_path / "mixed").exists()


def test_match_plays_the_scripts_evaluation_and_keeps_one_row_per_model_and_opponent(tmp_path, capsys):
    import jax

    import muzero_breakthrough as bt

    args = bt.Args(channels=8, repr_blocks=1, pred_blocks=0, head_hidden=16, eval_num_simulations=4)
    net = bt.make_network(args, bt.BreakthroughVecEnv(args.board_size, 1).num_actions)
    params = bt.init_params(net, args, jax.random.PRNGKey(0))
    model = str(tmp_path / "stopped.muzero_model")  # a run's final model: its plies are the step saved with it
    muzero_run.save_model(model, bt.SCRIPT, args, params, 300)
    cfg = tools.Match(model=model, opponent="mcts", games=10, mcts_simulations=50, seed=3, commit="abc1234", out=str(tmp_path))
    row = tools.run_match(cfg)
    # the script's own evaluation of those games, MCTSBot at 50 simulations
    evaluation = dataclasses.replace(args, eval_mcts_simulations=50)
    act_fn = bt.make_act_fn(net, bt.planner_configs(evaluation)[1], args.gamma)
    scores, colour, _ = bt.evaluate_policy(act_fn, params, evaluation, "mcts", 10, (3,))
    assert row["win_rate"] == scores.mean() < 0.5  # MCTS-50 beats an untrained searcher
    assert (row["as_black"], row["as_white"]) == (scores[colour == 0].mean(), scores[colour == 1].mean())
    assert (row["opponent"], row["games"], row["plies"], row["seed"], row["board_size"]) == ("mcts-50", 10, 300, args.seed, 5)
    tools.run_match(cfg)  # again: the row is replaced, and fixed by the seed
    tools.run_match(dataclasses.replace(cfg, opponent="random"))
    matches = pd.read_csv(tmp_path / "matches.csv")
    assert matches.opponent.tolist() == ["mcts-50", "random"] and matches.win_rate[0] == row["win_rate"]
    assert (matches.commit == "abc1234").all()
    for bad, named in ((dict(games=7), "--games"), (dict(mcts_simulations=0), "--mcts-simulations")):
        with pytest.raises(tools.BadInput, match=named):
            tools.run_match(dataclasses.replace(cfg, **bad, out=str(tmp_path / "bad")))
    assert not (tmp_path / "bad").exists()


def test_opening_moves_are_random_legal_and_shared_by_the_two_colours_of_a_pair():
    import muzero_breakthrough as bt

    class FirstLegal:  # a deterministic player: every game it plays alone would be the same
        def __init__(self):
            self.moves = []

        def __call__(self, envs, step, legal, mine):
            return legal.argmax(1)

        def played(self, actions):
            self.moves.append(np.array(actions))

    players = [tools.OpeningMoves(FirstLegal(), 2, (0, 1)) for _ in range(2)]
    bt.play_games(tuple(players), 5, 16)
    moves = np.array(players[0].inner.moves)  # (plies, games): the moves made
    opening = moves[:2]
    np.testing.assert_array_equal(opening[:, 0::2], opening[:, 1::2])  # both colours of a pair: one opening
    assert len({tuple(o) for o in opening[:, 0::2].T}) >= 6  # 8 pairs, 13 x ~13 openings: they differ
    assert len({tuple(g) for g in moves[:6].T}) >= 6  # and so do the games after them


@pytest.mark.parametrize(
    "flags, named",
    [
        (dict(games_per_pair=3), "--games-per-pair"),
        (dict(every=0), "--every"),
        (dict(opening_plies=-1), "--opening-plies"),
        (dict(mcts_simulations=(100, 100)), "--mcts-simulations"),
        (dict(mcts_simulations=()), "--mcts-simulations"),
        (dict(), "--run-dirs"),  # a directory without checkpoint models
        (dict(run_dirs=()), "--run-dirs"),
    ],
)
def test_bad_ladder_flags_exit_with_a_message_and_write_nothing(tmp_path, capsys, flags, named):
    with pytest.raises(tools.BadInput, match=named):
        tools.run_ladder(tools.Ladder(**{"run_dirs": (str(tmp_path),), **flags}))
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# Annotated episodes, search trees and delusions
# ---------------------------------------------------------------------------------------------
SMALL = dict(channels=8, repr_blocks=1, pred_blocks=0, head_hidden=16)


def small_agent(script, seed: int = 0, **flags):
    import jax

    args = script.Args(**SMALL, **flags)
    num_actions = (
        script.BreakthroughVecEnv(5, 1)
        if script.__name__ == "muzero_breakthrough"
        else script.MinAtarVecEnv(args.env_id, 1, 0, 0.0)
    ).num_actions
    net = script.make_network(args, num_actions)
    return args, net, script.init_params(net, args, jax.random.PRNGKey(seed))


def test_annotated_frames_hold_the_search_of_their_own_step(tmp_path):
    import jax
    import jax.numpy as jnp
    from PIL import Image

    import muzero_minatar as m

    args, net, params = small_agent(m, eval_num_simulations=6)
    act_fn = m.make_act_fn(net, m.planner_configs(args)[1], args.gamma, keep_tree=True)
    _, lengths, rec = m.evaluate_policy(act_fn, params, args, 1, 7, record=True)
    assert len(rec.frames) == len(rec.trees) == len(rec.actions) == lengths[0] + 1 > 5
    assert rec.action_names == ["(end)", "noop", "left", "right"]  # Breakout's minimal action set
    # step k's planner input by hand: the observations and actions before it (zeros before the episode) and
    # evaluate_policy's k-th key (one batch of 1 episode: its key stream is env_seeds(seed, 2)[-1])
    L, key, keys = args.history_length, jax.random.PRNGKey(m.env_seeds(7, 2)[-1]), []
    for _ in range(5):
        key, sub = jax.random.split(key)
        keys.append(sub)
    zeros = np.zeros_like(rec.frames[0], np.float32)
    for k in (0, 4):
        past = ([zeros] * L + rec.frames[:k])[-L:]
        state = m.ActorState(jnp.asarray(np.stack(past)[None], jnp.float32), jnp.asarray([([0] * L + rec.actions[:k])[-L:]]))
        legal = np.array([[False, True, True, True]])
        _, action, value, weights, _ = act_fn(params, state, rec.frames[k][None], np.array([k == 0]), legal, keys[k])
        numbers = tools.search_numbers(rec.trees[k], rec.actions[k])
        assert numbers["action"] == int(action[0])
        np.testing.assert_allclose(numbers["value"], float(value[0]), rtol=1e-6)
        assert numbers["visits"].sum() == 6 and numbers["visits"][0] == 0 and numbers["prior"][0] == 0  # dummy masked
        np.testing.assert_allclose(numbers["visits"] / 6, np.asarray(weights[0]), atol=1e-6)  # PUCT: visit shares
        lines = tools.annotation_lines(numbers, k, rec.action_names)
        assert lines[0] == f"step {k}  action {rec.action_names[int(action[0])]}"
        assert lines[1].startswith(f"v* {float(value[0]):+.3f}")
        assert len(lines) == 3 + 3  # the header, then the 3 legal actions, most visited first
        visits = [int(line.split()[2]) for line in lines[3:]]
        assert visits == sorted(visits, reverse=True) and sum(visits) == 6
    tools.save_annotated_gif(rec, str(tmp_path / "episode.gif"))
    with Image.open(tmp_path / "episode.gif") as gif:
        assert gif.n_frames == len(rec.frames) and gif.size == (
            muzero_run.FRAME_SIZE + tools.PANEL_WIDTH,
            muzero_run.FRAME_SIZE,
        )
    tools.save_annotated_gif(tools.first_steps(rec, 2), str(tmp_path / "first_two.gif"))  # `episode --steps 2`
    with Image.open(tmp_path / "first_two.gif") as gif:
        assert len(rec.frames) > 2 and gif.n_frames == 2
    table = tools.episode_table(tools.first_steps(rec, 2))  # the numbers of those frames, as `episode` writes them
    assert table.step.tolist() == [0, 0, 0, 1, 1, 1] and table.played.sum() == 2
    for k in (0, 1):
        numbers = tools.search_numbers(rec.trees[k], rec.actions[k])
        assert table[table.step == k].visits.tolist() == [v for v, p in zip(numbers["visits"], numbers["prior"]) if p > 0]


def test_tree_extractor_equals_the_mctx_summary_at_the_root():
    import jax

    import muzero_minatar as m

    args, net, params = small_agent(m, planner="gumbel", eval_num_simulations=12)
    act_fn = m.make_act_fn(net, m.planner_configs(args)[1], args.gamma, keep_tree=True)
    obs = np.random.default_rng(0).integers(0, 2, (2, 10, 10, 4)).astype(np.uint8)
    legal = np.ones((2, 4), bool)
    legal[:, 0] = False
    _, _, _, _, tree = act_fn(
        params,
        m.initial_actor_state(2, args.history_length, obs.shape[1:]),
        obs,
        np.array([True, True]),
        legal,
        jax.random.PRNGKey(1),
    )
    summary = tree.summary()
    for g in range(2):
        nodes = tools.tree_nodes(jax.tree.map(lambda x: x[g : g + 1], tree))
        assert len(nodes) == 13 and nodes[0]["N"] == 13 and nodes[0]["depth"] == 0  # a node per simulation
        assert nodes[0]["V"] == pytest.approx(float(summary.value[g]), abs=1e-6)
        children = {n["action"]: n for n in nodes if n["depth"] == 1}
        for a in range(4):
            visits = int(summary.visit_counts[g, a])
            assert children[a]["N"] == visits if visits else a not in children
            if visits:
                assert children[a]["Q"] == pytest.approx(float(summary.qvalues[g, a]), abs=1e-5)
        for n in nodes:  # a node's visits: its own expansion and every simulation through its children
            assert n["N"] == 1 + sum(c["N"] for c in nodes if c["parent"] == n["index"])


def chain_search():
    """A search by mctx with a hand-written model on Breakthrough's first position: its prior puts nearly all
    mass on black's first legal move at even depths and on white's first legal reply at odd depths, so 3
    simulations go down one line: black's move (legal), white's reply (legal), and black's first move again,
    from a square it has left (illegal: a delusion)."""
    import jax
    import jax.numpy as jnp
    import mctx

    import muzero_breakthrough as bt

    env = bt.BreakthroughVecEnv(5, 1)
    root = env.game.new_initial_state()
    black = root.legal_actions()[0] + 1  # black's agent actions are OpenSpiel's + 1
    white = env.openspiel_action[1, root.child(black - 1).legal_actions()[0]] + 1  # white's are mirrored
    favour = jnp.full((2, env.num_actions), -20.0).at[0, black].set(20.0).at[1, white].set(20.0)

    def recurrent_fn(params, rng, action, depth):
        depth = depth + 1
        return mctx.RecurrentFnOutput(
            reward=jnp.zeros(1), discount=-jnp.ones(1), prior_logits=favour[depth % 2], value=jnp.zeros(1)
        ), depth

    out = mctx.muzero_policy(
        None,
        jax.random.PRNGKey(0),
        mctx.RootFnOutput(prior_logits=favour[:1], value=jnp.zeros(1), embedding=jnp.zeros(1, int)),
        recurrent_fn,
        3,
        invalid_actions=~env.legal_actions(np.array([False])),
        dirichlet_fraction=0.0,
    )
    return out.search_tree, root, black, white, env.openspiel_action


def test_a_search_through_an_illegal_move_is_marked_as_a_delusion_and_a_legal_one_is_not():
    tree, root, black, white, openspiel_action = chain_search()
    nodes = tools.mark_delusions(tools.tree_nodes(tree), root, openspiel_action)
    assert [(n["depth"], n.get("action"), n["N"], n["delusion"]) for n in nodes] == [
        (0, None, 4, False),
        (1, black, 3, False),
        (2, white, 2, False),
        (3, black, 1, True),
    ]
    # the audit's shares by hand: 1 of 3 simulations ended in a delusion, which holds 1 of the 6 visits below the root
    assert tools.delusion_shares(tree, root, openspiel_action) == pytest.approx((1 / 3, 1 / 6))
    # the dummy action is a delusion before the end; after it, it is the only legal action (the absorbing
    # state the model learns), and any move is a delusion
    hand = [
        {"index": 0, "parent": -1},
        {"index": 1, "parent": 0, "action": 0},
        {"index": 2, "parent": 0, "action": black},
        {"index": 3, "parent": 1, "action": 0},
    ]
    assert [n["delusion"] for n in tools.mark_delusions(hand, root, openspiel_action)] == [False, True, False, True]
    ended = root.clone()
    while not ended.is_terminal():
        ended.apply_action(ended.legal_actions()[0])
    assert [n["delusion"] for n in tools.mark_delusions(hand, ended, openspiel_action)] == [False, False, True, False]


def test_tree_tool_draws_every_node_with_its_numbers_and_delusions_in_red(tmp_path, monkeypatch):
    import muzero_breakthrough as bt

    args, net, params = small_agent(bt, eval_num_simulations=24, planner="muzero")
    muzero_run.save_model(str(tmp_path / "m.muzero_model"), bt.SCRIPT, args, params, 0)
    nodes = tools.run_tree(
        tools.Tree(model=str(tmp_path / "m.muzero_model"), step=3, opponent="random", out=str(tmp_path / "tree"))
    )
    assert len(nodes) == 25 and nodes[0]["N"] == 25
    dot = (tmp_path / "tree.dot").read_text()
    assert dot.count("->") == 24 and dot.count("#f4a0a0") == sum(n["delusion"] for n in nodes)
    deluded = [n for n in nodes if n["delusion"]]
    assert deluded and all(n["depth"] >= 2 for n in deluded)  # the root's moves are OpenSpiel's legal ones
    first = next(n for n in nodes if n["depth"] == 1)
    assert f"#{first['index']}\\nR {first['R']:+.2f}\\nV {first['V']:+.2f}\\nN {first['N']}" in dot
    # step 3 is white's move: the root's moves are named as white plays them on the real board, the replies as black's
    second = next(n for n in nodes if n["depth"] == 2)
    envs = bt.BreakthroughVecEnv(5, 1)
    for node, mover in ((first, 1), (second, 0)):
        move = int(envs.openspiel_action[mover, node["action"] - 1])
        name = envs.states[0].action_to_string(mover, move) if node["action"] else "(end)"
        assert f'label="{name}\\np {node["p"]:.2f}' in dot
    table = pd.read_csv(tmp_path / "tree.csv")  # the drawing's numbers, node by node
    assert table["index"].tolist() == [n["index"] for n in nodes] and table.N.tolist() == [n["N"] for n in nodes]
    monkeypatch.setenv("PATH", str(tmp_path))  # without graphviz's `dot`: the .dot file and no (empty) PNG
    tools.run_tree(tools.Tree(model=str(tmp_path / "m.muzero_model"), step=3, opponent="random", out=str(tmp_path / "t")))
    assert (tmp_path / "t.dot").read_text() == dot and not (tmp_path / "t.png").exists()


def test_audit_and_tsne_measure_self_play_positions_of_both_players(tmp_path):

    import muzero_breakthrough as bt

    args, net, params = small_agent(bt, eval_num_simulations=16, planner="muzero")
    for step in (10, 20):
        muzero_run.save_model(str(tmp_path / f"step_{step}.muzero_model"), bt.SCRIPT, args, params, step)
    table = tools.run_audit(
        tools.Audit(
            models=(str(tmp_path / "step_20.muzero_model"), str(tmp_path / "step_10.muzero_model")),
            positions=24,
            games=4,
            out=str(tmp_path / "audit"),
        )
    )
    assert table.step.tolist() == [10, 20] and (table.positions == 24).all()
    # an untrained model's prior is near uniform over 300 moves, ~10 of them legal: below the root it plans
    # mostly through moves the game does not allow; the two copies of one model measure the same
    assert (0.2 < table.simulation_share).all() and (table.simulation_share <= 1).all()
    assert table.simulation_share.iloc[0] == table.simulation_share.iloc[1]
    assert pd.read_csv(tmp_path / "audit" / "audit.csv").shape == (2, 6)
    tsne = tools.run_tsne(
        tools.Tsne(
            model=str(tmp_path / "step_10.muzero_model"), positions=40, games=4, perplexity=5, out=str(tmp_path / "tsne")
        )
    )
    assert len(tsne) == 40 and set(tsne.player) == {0, 1} and tsne.move.min() == 0 and tsne.move.max() >= 9
    assert np.isfinite(tsne[["x", "y", "value"]].to_numpy()).all()


def test_budget_searches_with_each_budget_and_reports_that_evaluation(tmp_path):
    """budget: at n simulations every search of the evaluation has n simulations (the root is visited n + 1
    times: once when it is expanded) and the table holds that evaluation's mean return and standard error."""
    import muzero_minatar as m

    args, net, params = small_agent(m, env_id="Breakout", eval_num_simulations=16)
    muzero_run.save_model(str(tmp_path / "step_7.muzero_model"), m.SCRIPT, args, params, 7)
    table = tools.run_budget(
        tools.Budget(
            models=(str(tmp_path / "step_7.muzero_model"),),
            simulations=(1, 3),
            episodes=3,
            seed=2,
            out=str(tmp_path / "budget"),
        )
    )
    assert table.simulations.tolist() == [1, 3] and (table.step == 7).all() and (table.episodes == 3).all()
    for n, row in zip((1, 3), table.itertuples()):
        returns, _, recording = tools.play(m, args, net, params, 3, 2, "mcts", n, record=True)
        assert row.mean == pytest.approx(returns.mean()) and row.stderr == pytest.approx(returns.std(ddof=1) / np.sqrt(3))
        assert all(int(tree.node_visits[0, 0]) == n + 1 for tree in recording.trees)
    assert pd.read_csv(tmp_path / "budget" / "budget.csv").shape == (2, 6)


def test_budget_plays_breakthrough_against_the_mcts_bot_of_its_flag(tmp_path, monkeypatch):
    """budget on a Breakthrough model: each budget's win rate is the script's own evaluation against MCTSBot at
    --mcts-simulations (not the model's --eval-mcts-simulations), with the agent at that budget; budget.csv is
    written after each point, so a budget stopped part way keeps the points before it."""
    import muzero_breakthrough as bt

    args, net, params = small_agent(bt, eval_num_simulations=4, eval_mcts_simulations=100)
    muzero_run.save_model(str(tmp_path / "step_9.muzero_model"), bt.SCRIPT, args, params, 9)
    cfg = tools.Budget(
        models=(str(tmp_path / "step_9.muzero_model"),),
        simulations=(2,),
        episodes=4,
        mcts_simulations=3,
        seed=5,
        out=str(tmp_path / "budget"),
    )
    table = tools.run_budget(cfg)
    evaluation = dataclasses.replace(args, eval_mcts_simulations=3)
    scores = tools.play(bt, evaluation, net, params, 4, 5, "mcts", 2)[0]
    assert table["mean"].tolist() == [scores.mean()] and table.episodes.tolist() == [4]
    # a budget stopped part way keeps the points before it in budget.csv
    play = tools.play

    def stopped_after_two_simulations(*play_args):  # (the budget is play's last argument)
        if play_args[-1] != 2:
            raise KeyboardInterrupt
        return play(*play_args)

    monkeypatch.setattr(tools, "play", stopped_after_two_simulations)
    with pytest.raises(KeyboardInterrupt):
        tools.run_budget(dataclasses.replace(cfg, simulations=(2, 5), out=str(tmp_path / "stopped")))
    assert pd.read_csv(tmp_path / "stopped" / "budget.csv")["mean"].tolist() == [scores.mean()]
    with pytest.raises(tools.BadInput, match="--mcts-simulations and every --simulations must be positive"):
        tools.run_budget(tools.Budget(models=(str(tmp_path / "step_9.muzero_model"),), mcts_simulations=0))


def test_eval_planner_benchmark_compares_the_thesis_planner_with_a_greedy_one_and_the_training_one(tmp_path, capsys):
    """benchmark/muzero_minatar_eval_planner.py: each model's returns with its own evaluation planner and with the
    greedy one (temperature 0, no root noise), whose every action is a most visited root action, and with the training
    planner (its temperature, noise, c1 and simulations)."""
    import muzero_minatar as m

    bench = load_benchmark("muzero_minatar_eval_planner")
    args, net, params = small_agent(m, env_id="Breakout", eval_num_simulations=6, max_episode_steps=40)
    muzero_run.save_model(str(tmp_path / "model.muzero_model"), m.SCRIPT, args, params, 0)
    table = bench.evaluate_planners([str(tmp_path / "model.muzero_model")], episodes=3, seed=5)
    assert table.planner.tolist() == ["thesis", "greedy", "training"] and (table.episodes == 3).all()
    greedy_args = dataclasses.replace(args, eval_temperature=0.0, dirichlet_fraction=0.0)
    training_args = dataclasses.replace(
        args,
        eval_temperature=args.temperature,
        eval_dirichlet_alpha=args.dirichlet_alpha,
        eval_pb_c_init=args.pb_c_init,
        eval_num_simulations=args.num_simulations,
    )
    assert dataclasses.replace(args, **bench.PLANNERS["training"](args)) == training_args != args  # the tool's flags
    recordings = []
    for row, flags in zip(table.itertuples(), (args, greedy_args, training_args)):
        returns, _, recording = tools.play(m, flags, net, params, 3, 5, "random", record=True)
        assert row.mean == pytest.approx(returns.mean()) and row.stderr == pytest.approx(returns.std(ddof=1) / np.sqrt(3))
        recordings.append(recording)
    visits = [np.asarray(tree.children_visits[0, 0]) for tree in recordings[1].trees]  # the greedy run's episode 0
    assert all(v[action] == v.max() for v, action in zip(visits, recordings[1].actions))
    root_visits = [{int(tree.node_visits[0, 0]) for tree in r.trees} for r in recordings]  # simulations + 1
    assert root_visits == [{7}, {7}, {args.num_simulations + 1}] and args.num_simulations != 6
    gumbel = dataclasses.replace(args, planner="gumbel")
    muzero_run.save_model(str(tmp_path / "gumbel.muzero_model"), m.SCRIPT, gumbel, params, 0)
    with pytest.raises(tools.BadInput, match="no noise"):
        bench.evaluate_planners([str(tmp_path / "gumbel.muzero_model")], episodes=3, seed=5)


def test_model_step_is_the_step_saved_with_the_model_else_a_checkpoints_name(tmp_path):
    """model_step: the environment steps in the model's JSON, whatever its name; a model saved before the step was
    recorded: a checkpoint's `step_{step}` name, NaN for any other name."""
    import muzero_minatar as m

    args, _, params = small_agent(m)
    for name, step in (("step_7.muzero_model", 96), ("final.muzero_model", 1536)):
        muzero_run.save_model(str(tmp_path / name), m.SCRIPT, args, params, step)
        assert tools.model_step(str(tmp_path / name)) == step
        with open(tmp_path / f"{name}.json") as f:
            saved = json.load(f)
        del saved["step"]  # as a model saved before the step was recorded
        with open(tmp_path / f"{name}.json", "w") as f:
            json.dump(saved, f)
    assert tools.model_step(str(tmp_path / "step_7.muzero_model")) == 7
    assert np.isnan(tools.model_step(str(tmp_path / "final.muzero_model")))


def test_a_model_saved_with_a_removed_training_flag_loads_with_its_parameters(tmp_path):
    """load_model: --anneal-lr, --weight-decay, Breakthrough's --explored-priority, reanalysis' --importance-exponent-final
    and Atari's --rewarding-share left the scripts; a model saved with them (before the flags' checksum) still loads."""
    import muzero_minatar as m

    args, _, params = small_agent(m)
    path = str(tmp_path / "old.muzero_model")
    muzero_run.save_model(path, m.SCRIPT, args, params, 0)
    with open(path + ".json") as f:
        saved = json.load(f)
    del saved["flags_sha256"]  # such models were saved before the flags had a checksum
    removed = dict(
        anneal_lr=True, weight_decay=0.1, explored_priority="mean", importance_exponent_final=1.0, rewarding_share=0.25
    )
    with open(path + ".json", "w") as f:
        json.dump({**saved, **removed}, f)
    script, loaded_args, _, loaded = tools.load_model(path)
    assert script is m and loaded_args == args
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(loaded)):
        np.testing.assert_array_equal(a, b)


def test_budget_checks_every_model_before_the_first_evaluation(tmp_path, monkeypatch):
    """A missing model anywhere in --models stops budget before any evaluation (a 200-game match was once
    thrown away by a second model without its .json), with exit code 2 and nothing written."""
    import muzero_minatar as m

    args, net, params = small_agent(m, env_id="Breakout")
    muzero_run.save_model(str(tmp_path / "step_7.muzero_model"), m.SCRIPT, args, params, 7)
    evaluations = []
    monkeypatch.setattr(tools, "evaluate", lambda *a, **k: evaluations.append(a))
    with pytest.raises(tools.MissingFile, match="--models .*gone.muzero_model: no .*json beside it"):
        tools.run_budget(
            tools.Budget(
                models=(str(tmp_path / "step_7.muzero_model"), str(tmp_path / "gone.muzero_model")),
                simulations=(1,),
                episodes=2,
                out=str(tmp_path / "budget"),
            )
        )
    assert evaluations == [] and not (tmp_path / "budget").exists()


def test_weights_gives_each_parameter_arrays_mean_absolute_value_per_model(tmp_path):
    """weights: at initialisation every LayerNorm scale is 1 and the heads' last layers 0; a model whose
    parameters are all halved gives half of every entry, in its own column."""
    import jax

    import muzero_minatar as m

    args, _, params = small_agent(m, env_id="Breakout")
    muzero_run.save_model(str(tmp_path / "init.muzero_model"), m.SCRIPT, args, params, 0)
    muzero_run.save_model(str(tmp_path / "half.muzero_model"), m.SCRIPT, args, jax.tree.map(lambda x: x / 2, params), 0)
    table = tools.run_weights(
        tools.Weights(
            models=(str(tmp_path / "init.muzero_model"), str(tmp_path / "half.muzero_model")),
            labels=("init", "half"),
            out=str(tmp_path),
        )
    )
    scales = table[table.index.str.endswith("LayerNorm_0/scale")]
    assert len(scales) >= 3 and (scales.init == 1.0).all() and (scales.half == 0.5).all()
    assert table.loc["value_head/Dense_1/kernel", "init"] == 0.0
    kernel = np.abs(np.asarray(params["params"]["repr_stem"]["kernel"])).mean()
    assert table.loc["repr_stem/kernel"].tolist() == pytest.approx([kernel, kernel / 2])
    assert len(table) == len(jax.tree.leaves(params))
    assert pd.read_csv(tmp_path / "weights.csv", index_col="parameter").shape == table.shape


def test_random_policy_returns_are_seeded_and_at_the_floor(tmp_path):
    """The random policy's MinAtar returns (the benchmark tables' floor): one row per game, the same twice."""
    tables = []
    for name in ("a", "b"):
        tools.run_random_returns(tools.RandomReturns(out=str(tmp_path / name), episodes=8, seed=3))
        tables.append(pd.read_csv(tmp_path / name / "random.csv"))
    pd.testing.assert_frame_equal(tables[0], tables[1])
    table = tables[0].set_index("env_id")
    assert list(table.index) == ["Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders"] and (table.episodes == 8).all()
    # a uniformly random player scores little (200 episodes in docs/benchmark/muzero_minatar/random.csv: 0.57,
    # 0.50, 0.40, 0.10 and, the most, SpaceInvaders 4.01)
    assert (table.random_return.drop("SpaceInvaders") < 2).all() and table.random_return.SpaceInvaders < 10
    assert (table.random_return >= 0).all() and (table.standard_error >= 0).all()
    import muzero_minatar as m

    assert (table.sticky_action_prob == m.Args().sticky_action_prob).all()  # the script's, unless given
    tools.run_random_returns(tools.RandomReturns(str(tmp_path / "c"), ("Breakout",), 8, 3, sticky_action_prob=0.0))
    assert pd.read_csv(tmp_path / "c" / "random.csv").sticky_action_prob.tolist() == [0.0]


def test_training_curves_average_seeds_bin_by_bin():
    """A bin's frame is the mean frame of its episodes, so two seeds' bins sit at different frames: the curve
    matches them by bin (one point per bin, the mean over seeds), and frames-to-reach reads that mean."""
    train = pd.DataFrame(
        {
            "seed": [1, 1, 1, 2, 2, 2],
            "step": [10_400, 30_100, 50_900, 10_050, 29_800, 50_200],
            "train_return": [1.0, 2.0, 6.0, 3.0, 6.0, 8.0],
            "minutes": [1, 2, 3, 2, 4, 6],
        }
    )
    curve = tools.seed_curve(train)
    assert curve.index.tolist() == [10_225, 29_950, 50_550]
    assert curve["mean"].tolist() == [2.0, 4.0, 7.0] and curve["min"].tolist() == [1.0, 2.0, 6.0]
    assert curve["max"].tolist() == [3.0, 6.0, 8.0] and curve.minutes.tolist() == [1.5, 3.0, 4.5]
    # seed 2 alone passes 5 in its second bin; the mean over seeds only in the third
    assert tools.frames_to_reach(train, 5.0) == 50_550 and np.isnan(tools.frames_to_reach(train, 7.5))


def test_machine_line_names_the_cpu_generation_and_the_library_versions():
    import importlib.metadata
    import os

    import jax

    with open("/proc/cpuinfo") as f:
        first_cpu = f.read().split("\n\n")[0]
    info = {k.strip(): v.strip() for k, _, v in (row.partition(":") for row in first_cpu.splitlines())}
    line = tools.machine_line()
    assert line.startswith(f"{os.cpu_count()} cores, {info['model name']} (family {info['cpu family']} model {info['model']}")
    assert ("avx512" in line) == ("avx512f" in info["flags"].split())
    assert f"JAX {jax.__version__} (" in line
    for name in ("flax", "optax", "mctx"):
        assert f"{name} {importlib.metadata.version(name)}" in line


def test_ablation_report_pairs_a_lever_only_with_reference_runs_of_its_machine_line(tmp_path):
    """A seed fixes a run on one machine line, not across lines: the report must not set a lever's runs against
    reference runs of another CPU."""
    ablation = load_benchmark("muzero_minatar_ablation")
    old, new = (
        "2 cores, AMD EPYC, JAX 0.10.2, CPU",
        "2 cores, AMD EPYC (family 25 model 17, avx512), JAX 0.10.2 (flax 0.12.8), CPU",
    )
    rows = [
        ("batch_64_strong_reward_focus", 1, 16.0, old),
        ("batch_64_strong_reward_focus", 2, 18.0, old),
        ("replay_ratio_3", 1, 4.0, old),
        ("replay_ratio_3", 1, 3.0, new),
        ("replay_ratio_3", 2, 1.0, new),
        ("replay_ratio_3", 3, 2.0, new),
    ]
    pd.DataFrame(
        [
            {
                "lever": lever,
                "env_id": "Asterix",
                "seed": seed,
                "frames": 299_008,
                "eval_return": ret,
                "eval_episodes": 32,
                "train_return_last_30pct": ret / 2,
                "wall_time_min": 30.0,
                "parallel_jobs": 2,
                "flags": "--replay-ratio 3",
                "commit": "abc1234",
                "machine": machine,
            }
            for lever, seed, ret, machine in rows
        ]
    ).to_csv(tmp_path / "ablation.csv", index=False)
    ablation.report(str(tmp_path))
    lines = [line for line in (tmp_path / "ablation.md").read_text().splitlines() if line.startswith("| replay_ratio_3")]
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in lines]
    assert [(c[4], c[5], c[7], c[8]) for c in cells] == [
        ("family 25 model 17, avx512", "1, 2, 3", "– → 2.00", "– → 1.00"),  # no reference on this line
        ("not recorded", "1", "16.00 → 4.00", "8.00 → 2.00"),
    ]  # the reference's seed 1 only


def test_ablation_undivided_move_runs_the_script_with_the_move_undivided(tmp_path):
    """The lever's copy of muzero_minatar.py differs in one line, ActionStem's, where the move's part of the output
    becomes |A^a| times the script's (the thesis divides the one-hot by |A^a|, MuZero does not)."""
    import difflib

    import muzero_minatar

    ablation = load_benchmark("muzero_minatar_ablation")
    path = ablation.lever_script("undivided_move", str(tmp_path))
    with open(muzero_minatar.__file__) as original, open(path) as copy:
        diff = difflib.unified_diff(original.readlines(), copy.readlines(), n=0)
        changed = [line for line in diff if line[:1] in "+-"]
    assert len(changed) == 4  # the two file headers, one line out, one in
    spec = importlib.util.spec_from_file_location("muzero_minatar_undivided", path)
    undivided = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(undivided)
    planes = jnp.zeros((2, 3, 3, 4))  # no board input: the output is the move's part (the bias starts at 0)
    actions = jnp.array([[1, 5], [3, 0]])  # (B, L) of |A^a| = 6
    params = muzero_minatar.ActionStem(8, 6).init(jax.random.PRNGKey(0), planes, actions)
    divided = muzero_minatar.ActionStem(8, 6).apply(params, planes, actions)
    np.testing.assert_allclose(undivided.ActionStem(8, 6).apply(params, planes, actions), 6 * divided, rtol=1e-5)
    assert float(jnp.abs(divided).min()) > 0


def test_cpu_lines_appends_one_row_per_script_and_draws_every_row(tmp_path):
    import pandas as pd

    tools.run_cpu_lines(
        tools.CpuLines(scripts=("muzero_minatar", "muzero_breakthrough"), out=str(tmp_path), note="golden tests")
    )
    tools.run_cpu_lines(
        tools.CpuLines(
            scripts=("muzero_minatar",),
            identical="no",
            machine="emulated line",
            out=str(tmp_path),
            note="losses/total_loss differs",
        )
    )
    table = pd.read_csv(tmp_path / "cpu_lines.csv")
    assert table.script.tolist() == ["muzero_minatar", "muzero_breakthrough", "muzero_minatar"]
    assert table.machine.tolist() == [tools.machine_line()] * 2 + ["emulated line"]
    assert table.identical.tolist() == ["yes", "yes", "no"]
    lines = open(tmp_path / "cpu_lines.md").read().splitlines()
    assert len(lines) == 2 + 3
    assert lines[-1].startswith("| `muzero_minatar` | emulated line | no | ") and lines[-1].endswith(
        " | losses/total_loss differs |"
    )


def test_ppo_baseline_advantages_stop_at_episode_ends():
    """GAE of the PPO baseline on a hand-worked rollout: the episode that ends at step 1 takes no value or advantage
    from step 2, the last step bootstraps from the value after the rollout."""
    ppo = load_benchmark("ppo_minatar_gymnax")
    rewards, values, dones = (jnp.array(x)[:, None] for x in ([1.0, 0.0, 2.0], [0.5, 0.2, 0.1], [0.0, 1.0, 0.0]))
    advantages, returns = ppo.gae(rewards, values, dones, jnp.array([0.3]), gamma=0.9, gae_lambda=0.8)
    # step 2: 2 + 0.9 * 0.3 - 0.1; step 1 (ends): 0 - 0.2; step 0: 1 + 0.9 * 0.2 - 0.5 + 0.9 * 0.8 * (-0.2)
    np.testing.assert_allclose(advantages[:, 0], [0.536, -0.2, 2.17], rtol=1e-6)
    np.testing.assert_allclose(returns[:, 0], [1.036, 0.0, 2.27], rtol=1e-6)


def test_ppo_comparison_takes_each_seeds_last_evaluation_by_our_frames_and_minutes(tmp_path):
    common = {"env_id": "Breakout", "commit": "abc", "machine": "m"}
    runs = pd.DataFrame([{**common, "seed": s, "frames": 300_000, "wall_time_min": m, "final_eval_return": r}
                         for s, m, r in ((1, 20.0, 40.0), (2, 22.0, 50.0))])  # fmt: skip
    runs.to_csv(tmp_path / "runs.csv", index=False)
    pd.DataFrame([{**common, "seed": s, "step": 300_000, "eval_return": 1.0, "minutes": 21.0} for s in (1, 2)]).to_csv(
        tmp_path / "Breakout.csv", index=False
    )
    (tmp_path / "ppo").mkdir()
    ppo = [  # seed, frames, minutes, return
        (1, 200_000, 0.1, 2.0), (1, 400_000, 0.2, 6.0), (1, 5_000_000, 20.5, 30.0), (1, 10_000_000, 41.0, 35.0),
        (2, 200_000, 0.1, 4.0), (2, 400_000, 0.2, 8.0), (2, 5_000_000, 21.0, 20.0), (2, 10_000_000, 42.0, 45.0),
    ]  # fmt: skip
    pd.DataFrame([{**common, "seed": s, "frames": f, "minutes": m, "eval_return": r, "eval_episodes": 32}
                  for s, f, m, r in ppo]).to_csv(tmp_path / "ppo" / "ppo.csv", index=False)  # fmt: skip
    timed = tmp_path / "ppo" / "muzero"  # our minutes: a run on PPO's machine (the runs above: their returns)
    timed.mkdir()
    runs[runs.seed == 1].assign(wall_time_min=21.0).to_csv(timed / "runs.csv", index=False)
    shutil.copy(tmp_path / "Breakout.csv", timed / "Breakout.csv")
    rows = tools.ppo_comparison(str(tmp_path))
    cells = [c.strip() for c in rows[2].split("|")[1:-1]]
    # ours 45 ± 5 in 21 minutes; PPO by 300k frames: 2 and 4; by 21 minutes: 30 and 20; at the end: 35 and 45
    assert cells == ["Breakout", "300,000, 21.0", "45.0 ± 5.0", "3.0 ± 1.0", "25.0 ± 5.0", "10,000,000, 41.5", "40.0 ± 5.0"]
    assert (tmp_path / "ppo.png").stat().st_size > 10_000
    # one PPO seed: its values, no spread
    one = pd.read_csv(tmp_path / "ppo" / "ppo.csv")
    one[one.seed == 1].to_csv(tmp_path / "ppo" / "ppo.csv", index=False)
    cells = [c.strip() for c in tools.ppo_comparison(str(tmp_path))[2].split("|")[1:-1]]
    assert cells[2:] == ["45.0 ± 5.0", "2.0", "30.0", "10,000,000, 41.0", "35.0"]
    # a game not timed on PPO's machine: no minutes; timed on another machine: refused
    tools.read_table(timed / "runs.csv").assign(env_id="Asterix").to_csv(timed / "runs.csv", index=False)
    cells = [c.strip() for c in tools.ppo_comparison(str(tmp_path))[2].split("|")[1:-1]]
    assert cells[1] == "300,000, –" and cells[4] == "–"
    tools.read_table(timed / "runs.csv").assign(machine="another").to_csv(timed / "runs.csv", index=False)
    with pytest.raises(tools.BadInput, match="PPO on"):
        tools.ppo_comparison(str(tmp_path))


def test_compare_lists_every_seed_and_the_frames_each_setting_needs(tmp_path):
    """Two settings of one game: experiment.csv holds every run with its setting; compare.md gives each setting's
    final evaluations seed by seed and the frames its mean training return needed to reach the levels, over the
    seeds both settings have (ratio_0's seed 3, which push_0.4 lacks, is left out of the table and its footer)."""
    folders = []
    for setting, returns in (  # per seed 1, 2, ...: ratio_0's seed 3, with high returns, would move every cell
        ("ratio_0", [[1.0, 2.0, 4.0], [1.0, 3.0, 4.0], [50.0, 50.0, 50.0]]),
        ("push_0.4", [[2.0, 4.0, 8.0], [2.0, 4.0, 8.0]]),
    ):
        folder = tmp_path / setting
        folder.mkdir()
        seeds = range(len(returns), 0, -1)  # runs.csv rows out of seed order
        runs = pd.DataFrame(
            [
                {
                    "env_id": "Asterix",
                    "seed": s,
                    "final_eval_return": 10.0 * s + len(setting),
                    "final_train_return_last_50k": 1.0,
                }
                | {"wall_time_min": 20.0, "machine": f"m{s}", "commit": f"c{s}", "frames": 60_000}
                for s in seeds
            ]
        )
        runs.to_csv(folder / "runs.csv", index=False)
        train = [
            (s, 20_000 * b + 10_000, r, b + 1.0)
            for s, seed_returns in enumerate(returns, start=1)
            for b, r in enumerate(seed_returns)
        ]
        pd.DataFrame(train, columns=["seed", "step", "train_return", "minutes"]).to_csv(
            folder / "Asterix_train.csv", index=False
        )
        folders.append(str(folder))
    tools.run_compare(tools.Compare(runs=tuple(folders), out=str(tmp_path / "out")))
    experiment = pd.read_csv(tmp_path / "out" / "experiment.csv")
    assert sorted(zip(experiment.setting, experiment.seed)) == [
        ("push_0.4", 1),
        ("push_0.4", 2),
        ("ratio_0", 1),
        ("ratio_0", 2),
        ("ratio_0", 3),
    ]
    rows = (tmp_path / "out" / "compare.md").read_text().splitlines()
    cells = {row.split("|")[2].strip(): [c.strip() for c in row.split("|")[1:-1]] for row in rows[2:4]}
    # seeds in order; best last mean 8, levels 2 / 4 / 6: ratio_0's mean curve 1, 2.5, 4; push_0.4's 2, 4, 8
    assert cells["ratio_0"][2] == cells["push_0.4"][2] == "1, 2"
    assert cells["ratio_0"][3] == "22.00 (17.00 / 27.00)" and cells["push_0.4"][3] == "23.00 (18.00 / 28.00)"
    assert cells["ratio_0"][6].startswith("30k / 50k / never") and cells["push_0.4"][6].startswith("10k / 30k / 50k")
    assert cells["ratio_0"][5] == "20.0 (2 lines)"  # minutes a run, its seeds on two machines (m1, m2)
    # the footer names the tabled runs' machines and commits, not those of ratio_0's untabled seed 3
    assert rows[-1].endswith("Machine: m1; m2. Commits: c1, c2.")


def test_diagnostics_gives_each_runs_series_mean_per_bin_and_replaces_a_run_read_again(tmp_path):
    from tensorboardX import SummaryWriter

    def write(folder, name, values):
        run = tmp_path / folder / name
        with SummaryWriter(str(run)) as writer:
            for step, value in values:
                writer.add_scalar("losses/value_loss", value, step)
                writer.add_scalar("charts/episodic_return", 100.0, step)  # per episode: binned by collect instead
        return str(run)

    push = write("runs", "Asterix__reanalyze_push_0.4__1__100", [(10, 1.0), (20, 3.0), (30, 8.0)])
    base = write("runs", "Asterix__muzero_minatar__1__200", [(15, 2.0)])
    tools.run_diagnostics(tools.Diagnostics(run_dirs=(push, base), out=str(tmp_path / "out"), bin_frames=20))
    table = pd.read_csv(tmp_path / "out" / "diagnostics.csv")
    assert set(table.metric) == {"losses/value_loss"}
    rows = {e: t[["seed", "frames_from", "frames_to", "mean"]].values.tolist() for e, t in table.groupby("exp_name")}
    assert rows == {"reanalyze_push_0.4": [[1, 0, 20, 2.0], [1, 20, 40, 8.0]], "muzero_minatar": [[1, 0, 20, 2.0]]}
    again = write("again", "Asterix__reanalyze_push_0.4__1__100", [(5, 4.0)])  # the same run, read again
    tools.run_diagnostics(tools.Diagnostics(run_dirs=(again,), out=str(tmp_path / "out"), bin_frames=20))
    table = pd.read_csv(tmp_path / "out" / "diagnostics.csv")
    assert sorted(zip(table.exp_name, table.frames_from, table["mean"])) == [
        ("muzero_minatar", 0, 2.0),
        ("reanalyze_push_0.4", 0, 4.0),
    ]


def test_report_lists_each_seeds_final_evaluation_in_the_order_of_its_seeds(tmp_path):
    runs = pd.DataFrame([{"env_id": "Breakout", "seed": s, "run_name": "r", "exp_name": "muzero_minatar", "frames": 1536,
                          "final_eval_return": r, "wall_time_min": 1.0, "cpu_steal": 0.0, "commit": "c", "machine": "m"}
                         for s, r in ((3, 1.5), (4, 2.5))])  # fmt: skip
    runs.to_csv(tmp_path / "runs.csv", index=False)
    curve = pd.DataFrame([{"env_id": "Breakout", "seed": s, "step": t, "eval_return": 1.0, "train_return": 1.0,
                           "minutes": t / 1000} for s in (3, 4) for t in (768, 1536)])  # fmt: skip
    curve.to_csv(tmp_path / "Breakout.csv", index=False)
    curve.to_csv(tmp_path / "Breakout_train.csv", index=False)
    tools.run_report(tools.Report(str(tmp_path)))
    assert "| Breakout | 3, 4 | 2.00 ± 0.50 | 1.50 / 2.50 |" in open(tmp_path / "results.md").read()


def test_a_figure_names_the_script_or_each_exp_name_with_its_seeds():
    def runs(*pairs):
        return pd.DataFrame([{"seed": seed, "exp_name": name} for name, seed in pairs])

    assert tools.runs_label(runs(("muzero_atari_multigpu", 2), ("muzero_atari_multigpu", 1))) == "muzero_atari_multigpu.py"
    assert tools.runs_label(runs(("muzero_atari_multigpu", 2), ("share25", 1))) == (
        "--exp-name share25 (seed 1), muzero_atari_multigpu (seed 2)"
    )
    assert tools.runs_label(runs(("cons0", 2), ("cons0", 1))) == "--exp-name cons0"


def test_read_table_keeps_a_numeric_looking_commit_as_text(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text("env_id,commit\nBreakout,97e0696\nAsterix,2908cbe\n")
    assert list(tools.read_table(str(path)).commit) == ["97e0696", "2908cbe"]


class Events:
    """What running_minutes reads of an EventAccumulator: events at the given wall times (two tags)."""

    def __init__(self, times):
        self.times = times

    def FirstEventTimestamp(self):
        return self.times[0] - 5.0  # the run's first event (its flags) comes before its first scalar

    def Tags(self):
        return {"scalars": ["charts/a", "charts/b"]}

    def Scalars(self, tag):
        return [dataclasses.make_dataclass("Event", ["wall_time"])(t) for t in self.times[tag == "charts/b" :: 2]]


def test_a_resumed_run_counts_its_time_running_not_its_pauses():
    # a piece of 10 minutes with one 25-minute gap (a long evaluation: running), stopped; resumed 10 minutes later
    # (its file opened 30 s before its first scalar) for 5 minutes
    first = [1000.0 + 60 * k for k in range(6)] + [1300.0 + 1500 + 60 * k for k in range(6)]
    second = [first[-1] + 600 + 60 * k for k in range(6)]
    starts = [first[0] - 5.0, second[0] - 30.0]
    minutes, pauses = tools.running_minutes(Events(first + second), starts)
    assert pauses == 1
    assert minutes(first[0]) == pytest.approx(5 / 60) and minutes(first[-1]) == pytest.approx((5 + 600 + 1500) / 60)
    assert minutes(second[0]) == pytest.approx(minutes(first[-1]) + 0.5)  # the pause left out, the piece's start kept
    assert minutes(second[-1]) == pytest.approx(minutes(first[-1]) + 5.5)
    one_piece, pauses = tools.running_minutes(Events(first), starts[:1])
    assert pauses == 0 and one_piece(first[-1]) == pytest.approx(minutes(first[-1]))


def test_the_pieces_of_a_run_are_its_start_and_each_resume_not_the_files_opened_at_checkpoints(tmp_path):
    from tensorboardX import SummaryWriter

    def piece(**kwargs):  # a writer as the scripts open them, one scalar, closed; the wall time before it
        opened = time.time()
        writer = SummaryWriter(str(tmp_path), **kwargs)
        writer.add_scalar("charts/SPS", 1.0, kwargs.get("purge_step", 1))
        writer.close()
        time.sleep(0.05)  # each file its own wall time
        return opened

    opened = [piece(), piece(filename_suffix=".000000049")]  # the run's start, a checkpoint's new file
    time.sleep(1.0)  # a file's name holds the second it was opened: the resume's must differ from the start's
    opened += [piece(purge_step=1025), piece(filename_suffix=".000000098"), time.time()]  # a --resume, a checkpoint
    (tmp_path / "events.out.tfevents.1796642879.vm").touch()  # a --resume stopped while compiling: an empty file
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 5
    starts = tools.piece_starts(str(tmp_path))
    assert len(starts) == 2
    assert opened[0] <= starts[0] < opened[1] and opened[2] <= starts[1] < opened[3]


def test_atari_scores_are_human_normalised_by_the_standard_table_and_aggregated_with_rliable():

    # by hand: (score - random) / (human - random), Breakout 1.7 / 30.5, Pong -20.7 / 14.6, Boxing 0.1 / 12.1
    assert tools.human_normalised("Breakout-v5", 16.1) == pytest.approx((16.1 - 1.7) / (30.5 - 1.7)) == pytest.approx(0.5)
    assert tools.human_normalised("Pong-v5", -20.7) == 0 and tools.human_normalised("Pong-v5", 14.6) == pytest.approx(1)
    assert len(tools.ATARI_100K) == 26
    runs = pd.DataFrame(
        {
            "env_id": ["Breakout-v5", "Breakout-v5", "Pong-v5", "Pong-v5", "Boxing-v5", "Boxing-v5"],
            "seed": [1, 2, 1, 2, 1, 2],
            "final_eval_return": [1.7, 30.5, -20.7, -20.7, 12.1, 36.1],  # normalised: 0, 1; 0, 0; 1, 3
        }
    )
    aggregates = tools.atari_aggregates(runs, reps=2000)
    assert aggregates["median"][0] == pytest.approx(0.5)  # of the games' means 0.5, 0, 2
    assert aggregates["mean"][0] == pytest.approx(2.5 / 3)
    assert aggregates["IQM"][0] == pytest.approx(0.5)  # the middle half of the six runs' 0, 0, 0, 1, 1, 3
    for point, low, high in aggregates.values():
        assert low <= point <= high and low < high  # two runs a game that differ: an interval, not a point
    with pytest.raises(tools.BadInput, match="every game at the same seeds"):
        tools.atari_aggregates(runs.iloc[:5])


def test_the_published_agents_per_game_scores_give_their_papers_aggregates():
    """references.csv, normalised over the 26 games, gives the mean and median each paper states (DER: SPR's table;
    the others: EfficientZero's Table 1, which gives SPR's mean as 0.704)."""
    references = tools.read_table(tools.ATARI_REFERENCES).set_index("game")
    assert sorted(references.index) == sorted(tools.ATARI_100K)
    published = {  # mean, median
        "DER": (0.285, 0.161), "CURL": (0.381, 0.175), "DrQ": (0.357, 0.268), "SPR": (0.704, 0.415),
        "MuZero": (0.562, 0.227), "EfficientZero": (1.943, 1.090),
    }  # fmt: skip
    for agent, (mean, median) in published.items():
        normalised = [tools.human_normalised(f"{game}-v5", score) for game, score in references[agent].items()]
        assert np.mean(normalised) == pytest.approx(mean, abs=0.0011), agent
        assert np.median(normalised) == pytest.approx(median, abs=0.0006), agent


def test_the_atari_suite_runs_the_26_games_of_the_standard_table():
    listed = subprocess.run(
        ["bash", "benchmark/muzero_atari_multigpu.sh"],
        env={**os.environ, "ALL_GAMES": "1"},
        cwd=tools.REPO,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert sorted(listed) == sorted(f"{game}-v5" for game in tools.ATARI_100K)


def test_an_atari_folders_results_are_a_game_a_row_without_the_per_run_table(tmp_path):
    """report on a folder of Atari 100k games writes the per-game table (no per-run table) and the aggregates, each
    each followed by the protocol (which states the evaluation's games), and the machine once; figures.md names each
    game's picture."""
    runs = pd.DataFrame(
        {
            "env_id": ["Pong-v5", "Boxing-v5"],
            "seed": [1, 1],
            "final_eval_return": [-18.0, 3.0],
            "final_eval_standard_error": [0.3, 1.0],
            "eval_episodes": [32, 32],
            "frames": [99_840, 99_840],
            "wall_time_min": [20.5, 21.5],
            "cpu_steal": [0.0, 0.01],
            "protocol": ["sticky actions 0.0", "sticky actions 0.0"],
            "machine": ["m", "m"],
            "commit": ["abc1234", "abc1234"],
        }
    )
    runs.to_csv(tmp_path / "runs.csv", index=False)
    tools.run_report(tools.Report(str(tmp_path), figures=False))
    lines = (tmp_path / "results.md").read_text().splitlines()
    assert lines[0].startswith("| game | ours | normalised |") and not any("| seeds |" in line for line in lines)
    assert [line[:5] for line in lines[2:4]] == ["| Box", "| Pon"]
    assert sum(line.startswith("Protocol:") for line in lines) == 2 and lines[-1] == "Protocol: sticky actions 0.0."
    assert "Machine: m. Commits: abc1234." in lines and not any(line.startswith("The final evaluation") for line in lines)
    assert any(line.startswith("| MuZero (ours) | 2 | 1 |") for line in lines)
    figures = (tmp_path / "figures.md").read_text()
    assert figures.count("![") == 2 and "![Pong-v5](" in figures


def test_a_game_is_above_the_random_player_by_twice_the_standard_error_of_the_difference():
    runs = pd.DataFrame(
        {
            "env_id": ["Pong-v5", "Pong-v5", "Boxing-v5", "Breakout-v5"],
            "seed": [1, 2, 1, 1],
            "final_eval_return": [-18.0, -20.0, 3.0, 5.0],
            "final_eval_standard_error": [0.3, 0.4, 1.0, np.nan],
            "policy_entropy_first_fifth": [0.5, 0.7, 1.2, np.nan],
            "policy_entropy_last_fifth": [0.01, 0.03, 0.9, np.nan],  # Breakout: collected before these columns
            "rewarding_share": [0.02, 0.04, 0.125, np.nan],
            "wall_time_min": [20.0, 22.0, 25.0, np.nan],
        }
    )
    random = pd.DataFrame(
        {
            "env_id": ["Pong-v5", "Boxing-v5", "Breakout-v5"],
            "random_return": [-20.5, 0.4, 1.4],
            "standard_error": [0.1, 0.9, 0.1],
        }
    )
    # Pong: 1.5 above, ours sqrt(0.3^2 + 0.4^2) / 2 = 0.25, margin 2 sqrt(0.25^2 + 0.1^2) = 0.539; Boxing: 2.6 above,
    # margin 2 sqrt(1 + 0.81) = 2.691; Breakout: no error, not decided
    above = tools.above_random(runs, random)
    assert above["Pong-v5"] == 1 and above["Boxing-v5"] == 0 and np.isnan(above["Breakout-v5"])
    lines = tools.atari_summary(runs, random)
    assert any("1 of 2 games" in line for line in lines)
    boxing = "| Boxing | 3.0 | 0.242 | 0.4 | no | 1.20 → 0.90 | 12.5% | 25.0 | 0.1 | 12.1 | 0.2 | 1.2 | 6 | 35.8 | 15.1 |"
    pong = "| Pong | -19.0 | 0.048 | -20.5 | yes | 0.60 → 0.02 | 3.0% | 21.0 | -20.7 | 14.6 | -19.3 | -16.5 | -8.5 | -5.9 |"
    assert f"{boxing} 52.7 |" in lines and f"{pong} -6.7 | 20.1 |" in lines  # Pong: the seeds' means
    assert any(line.startswith("| Breakout | 5.0 | 0.115 | 1.4 | – | – | – | – | 1.7 |") for line in lines)
    # the aggregates take the seeds every game has (seed 1): normalised Pong 0.076, Boxing 0.242, Breakout 0.115
    assert any(line.startswith("| MuZero (ours) | 3 | 1 | 0.115 | 0.144 |") for line in lines)
