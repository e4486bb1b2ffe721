"""The trained models committed under docs/benchmark/ (a benchmark's seed 1, final) load,
their sha256 checked, and play at their benchmark's level: README's `evaluate` snippet with the MinAtar one, `evaluate`
with the reanalysis and Atari ones, `match` with the Breakthrough ones (5x5 and 8x8)."""

import json
import os
import re

import numpy as np
import pandas as pd
import pytest

import muzero_tools as tools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BREAKTHROUGH_MODEL = "docs/benchmark/muzero_breakthrough/models/breakthrough__muzero_breakthrough__1.muzero_model"
BREAKTHROUGH_8X8_MODEL = "docs/benchmark/muzero_breakthrough/models/breakthrough__muzero_breakthrough_8x8__1.muzero_model"
REANALYZE_MODEL = "docs/benchmark/muzero_minatar_reanalyze/models/Breakout__muzero_minatar_reanalyze__1.muzero_model"
ATARI_MODEL = (
    "docs/benchmark/muzero_atari_multigpu/breakout_pong_sticky/models/Breakout-v5__muzero_atari_multigpu__1.muzero_model"
)


def random_return(benchmark: str, env_id: str) -> float:
    """A uniformly random policy's mean return on env_id, from docs/benchmark/<benchmark>/random.csv."""
    table = pd.read_csv(os.path.join(ROOT, f"docs/benchmark/{benchmark}/random.csv")).set_index("env_id")
    return table.random_return[env_id]


def test_readme_evaluate_snippet_plays_the_committed_breakout_model_far_above_a_random_policy(monkeypatch):
    with open(os.path.join(ROOT, "README.md")) as f:
        snippet = re.search(r"```python\n(from muzero_tools import evaluate\n.*?)```", f.read(), re.S).group(1)
    monkeypatch.chdir(ROOT)  # the snippet's path is the repository's
    namespace = {}
    exec(snippet, namespace)
    assert len(namespace["returns"]) == 10
    assert np.mean(namespace["returns"]) > 10 * random_return("muzero_minatar", "Breakout")
    with open(os.path.join(ROOT, "README.md")) as f:
        printed = re.search(r"It prints `mean return ([\d.]+) over 10 episodes`", f.read()).group(1)
    assert f"{np.mean(namespace['returns']):.2f}" == printed  # what README says it prints


@pytest.mark.parametrize(
    "model, runs",
    [
        (BREAKTHROUGH_MODEL, "muzero_breakthrough/runs.csv"),
        (BREAKTHROUGH_8X8_MODEL, "muzero_breakthrough/board_8/runs.csv"),
        (REANALYZE_MODEL, "muzero_minatar_reanalyze/experiment/sample_rr4/runs.csv"),
        (ATARI_MODEL, "muzero_atari_multigpu/breakout_pong_sticky/runs.csv"),
        ("docs/benchmark/muzero_minatar/models/Breakout__muzero_minatar__1.muzero_model", "muzero_minatar/runs.csv"),
    ],
)
def test_a_committed_model_names_the_steps_its_run_trained(model, runs):
    """The model's .json gives its flags and `step`, the environment steps (frames, plies) of the benchmark run it ends."""
    with open(os.path.join(ROOT, model + ".json")) as f:
        saved = json.load(f)
    table = pd.read_csv(os.path.join(ROOT, "docs", "benchmark", runs))
    row = table[(table.seed == saved["seed"]) & (table.exp_name == saved["exp_name"])]
    if "env_id" in saved:  # (Breakthrough's board is its flag board_size)
        row = row[row.env_id == saved["env_id"]]
    steps = row["plies" if "plies" in table else "frames"].item()
    assert saved["step"] == steps and saved["total_timesteps"] >= steps


def test_the_committed_reanalyze_model_plays_breakout_far_above_a_random_policy():
    """Breakout seed 1 at the reanalysis script's defaults (final evaluation 65.97): four episodes with the evaluation
    planner of muzero_minatar_reanalyze.py."""
    returns = np.asarray(tools.evaluate(os.path.join(ROOT, REANALYZE_MODEL), eval_episodes=4))
    assert returns.shape == (4,) and np.all(returns == np.round(returns))  # whole bricks
    assert np.mean(returns) > 20 * random_return("muzero_minatar", "Breakout")


@pytest.mark.parametrize("model, board_size", [(BREAKTHROUGH_MODEL, 5), (BREAKTHROUGH_8X8_MODEL, 8)])
def test_the_committed_breakthrough_models_win_a_match_against_a_random_player(tmp_path, model, board_size):
    tools.run_match(tools.Match(model=os.path.join(ROOT, model), opponent="random", games=10, commit="-", out=str(tmp_path)))
    match = pd.read_csv(tmp_path / "matches.csv")
    assert match.games.item() == 10 and match.board_size.item() == board_size
    assert match.win_rate.item() >= 0.9


def test_the_committed_atari_model_plays_whole_breakout_games_at_the_random_players_level():
    """Breakout-v5 seed 1 of the Atari 100k benchmark (final evaluation 1.06, a random player 1.40): two whole games
    (all lives) with its evaluation planner, each scoring what a near-random player scores."""
    returns = np.asarray(tools.evaluate(os.path.join(ROOT, ATARI_MODEL), eval_episodes=2))
    assert returns.shape == (2,) and np.all(returns == np.round(returns))  # whole bricks
    assert np.all(returns >= 0) and np.mean(returns) <= 10 * random_return("muzero_atari_multigpu", "Breakout-v5")
