"""Tests of muzero_tools.py: the analysis tools (issue 14)."""
import numpy as np
import pytest
from statsmodels.tools.sm_exceptions import PerfectSeparationWarning

import muzero_tools as tools

TRUE_ELO = np.array([0.0, 150.0, 300.0, -200.0, 600.0])  # player 0 is the anchor


def p_win(elo_i, elo_j):
    return 1 / (1 + 10 ** (-(elo_i - elo_j) / 400))


def test_bradley_terry_fit_is_exact_on_expected_results_and_recovers_ratings_from_simulated_games():
    n, games = len(TRUE_ELO), 400
    expected = np.array([[games * p_win(TRUE_ELO[i], TRUE_ELO[j]) if i != j else 0 for j in range(n)]
                         for i in range(n)])
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


def test_ladder_plays_every_pair_both_colours_and_rates_the_mcts_anchor_above_random(tmp_path):
    import jax
    import pandas as pd

    import muzero_breakthrough as bt

    args = bt.Args(channels=8, repr_blocks=1, pred_blocks=0, head_hidden=16, eval_num_simulations=4)
    net = bt.make_network(args, bt.BreakthroughVecEnv(args.board_size, 1).num_actions)
    (tmp_path / "run" / "models").mkdir(parents=True)
    for step in (100, 200):  # two untrained "checkpoints" of a run
        params = bt.init_params(net, args, jax.random.PRNGKey(step))
        bt.save_model(str(tmp_path / "run" / "models" / f"step_{step}.muzero_model"), args, params)
    cfg = tools.Ladder(run_dir=str(tmp_path / "run"), games_per_pair=10, mcts_simulations=50)
    ratings = tools.run_ladder(cfg)
    games = pd.read_csv(tmp_path / "run" / "ladder" / "games.csv")
    assert len(games) == 6 and ((games.wins + games.losses) == 10).all()  # 4 players: every pair once
    assert ratings.player.tolist() == ["random", "mcts50", "step_100", "step_200"]
    assert ratings.step.tolist()[2:] == [100, 200] and (ratings.games == 30).all()
    elo = dict(zip(ratings.player, ratings.elo))
    assert elo["random"] == 0 and elo["mcts50"] > 200 and ratings.low[1] > 0  # MCTS-50 beats random players
    mcts = games[games.player == "mcts50"]
    assert (mcts.wins > 5).all(), mcts  # it beats the untrained searchers too (7-8 of 10 with random openings)
    assert (tmp_path / "run" / "ladder" / "ladder.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # fixed by the seed
    again = tools.run_ladder(tools.Ladder(**{**vars(cfg), "out": str(tmp_path / "again")}))
    pd.testing.assert_frame_equal(again, ratings)


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


@pytest.mark.parametrize("flags, named", [
    (dict(games_per_pair=3), "--games-per-pair"),
    (dict(every=0), "--every"),
    (dict(opening_plies=-1), "--opening-plies"),
    (dict(), "--run-dir"),  # a directory without checkpoint models
])
def test_bad_ladder_flags_exit_with_a_message_and_write_nothing(tmp_path, capsys, flags, named):
    with pytest.raises(SystemExit) as exit_:
        tools.run_ladder(tools.Ladder(run_dir=str(tmp_path), **flags))
    assert exit_.value.code == 2 and named in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
