"""Tools that look inside trained agents of the muzero_*.py scripts (issue 14; MooZi thesis 4.5, 5.4, 5.7-5.9).
They are not the agent: each script stays self-contained, and these import its functions. One subcommand per
tool, each with --help:

    python muzero_tools.py ladder --run-dir runs/breakthrough__muzero_breakthrough__1__1795427132

ladder: a round-robin tournament among a Breakthrough run's checkpoint models (`models/step_*.muzero_model`)
    and two anchors (a uniformly random player and OpenSpiel's MCTSBot), rated by a Bradley-Terry maximum-
    likelihood fit with confidence intervals (the Minigo paper's evaluation; thesis Fig. 5.8 plots Elo against
    training step). Writes `{out}/games.csv` (every pair's wins), `{out}/ratings.csv` and `{out}/ladder.png`.
"""
import glob
import os
import re
from dataclasses import dataclass

import numpy as np
import tyro

ELO_PER_LOGIT = 400 / np.log(10)  # Elo's scale: a 400-point gap is 10:1 odds


# ---------------------------------------------------------------------------------------------
# Bradley-Terry ratings
# ---------------------------------------------------------------------------------------------
def bradley_terry(wins: np.ndarray, anchor: int = 0, prior_games: float = 0.0, confidence: float = 0.95):
    """Ratings from a matrix of results, wins[i, j] = games player i won against player j.

    The Bradley-Terry model says P(i beats j) = 1 / (1 + exp(-(s_i - s_j))); its maximum-likelihood fit is a
    logistic regression of each pair's results on the difference of the two players' indicator columns
    (statsmodels' binomial GLM, whose standard errors give the intervals). The anchor's strength is 0 (the
    model fixes only differences). `prior_games` adds that many virtual games, half won and half lost, between
    every other player and the anchor: a player that won or lost every game then still has a finite rating
    (as BayesElo's virtual draws); 0 is the plain maximum-likelihood fit.

    Returns (elo, low, high): each player's rating in Elo (anchor at 0) and the ends of its `confidence`
    interval (the anchor's are 0: the ratings are relative to it)."""
    import statsmodels.api as sm

    wins = np.asarray(wins, dtype=np.float64)
    n = len(wins)
    rows, won, lost = [], [], []
    for i in range(n):
        for j in range(i + 1, n):
            if wins[i, j] + wins[j, i] > 0:
                rows.append(np.eye(n)[i] - np.eye(n)[j])
                won.append(wins[i, j])
                lost.append(wins[j, i])
    if prior_games > 0:
        for i in set(range(n)) - {anchor}:
            rows.append(np.eye(n)[i] - np.eye(n)[anchor])
            won.append(prior_games / 2)
            lost.append(prior_games / 2)
    design = np.delete(np.array(rows), anchor, axis=1)  # the anchor's strength is fixed at 0
    fit = sm.GLM(np.column_stack([won, lost]), design, family=sm.families.Binomial()).fit()
    strength = np.insert(fit.params, anchor, 0.0)
    interval = np.insert(fit.conf_int(alpha=1 - confidence), anchor, 0.0, axis=0)
    return ELO_PER_LOGIT * strength, ELO_PER_LOGIT * interval[:, 0], ELO_PER_LOGIT * interval[:, 1]


# ---------------------------------------------------------------------------------------------
# ladder: a round robin of a Breakthrough run's checkpoints
# ---------------------------------------------------------------------------------------------
def checkpoint_models(run_dir: str) -> list[tuple[int, str]]:
    """(training step, path) of every checkpoint model a muzero_breakthrough.py run saved, by step."""
    found = []
    for path in glob.glob(os.path.join(run_dir, "models", "step_*.muzero_model")):
        found.append((int(re.search(r"step_(\d+)\.muzero_model$", path).group(1)), path))
    return sorted(found)


class OpeningMoves:
    """Wraps a player: the first `plies` plies of every game are uniformly random legal moves, the same in the
    two games of a colour pair (games 2k and 2k+1 of play_games). Evaluation players do not explore, so without
    it every game of a pair of checkpoints with the same colours would be the same game."""

    def __init__(self, inner, plies: int, seed: tuple):
        self.inner, self.plies, self.seed, self.ply = inner, plies, seed, 0

    def __call__(self, envs, step, legal, mine):
        actions = np.array(self.inner(envs, step, legal, mine))  # the inner player still sees every ply
        if self.ply < self.plies:
            for g in np.flatnonzero(mine):
                rng = np.random.default_rng([*self.seed, g // 2, self.ply])
                actions[g] = rng.choice(np.flatnonzero(legal[g]))
        return actions

    def played(self, actions):
        self.inner.played(actions)
        self.ply += 1


@dataclass
class Ladder:
    """Round-robin tournament among a Breakthrough run's checkpoints and two anchors, rated by Bradley-Terry."""
    run_dir: str
    """a muzero_breakthrough.py run directory (runs/{run_name}) whose models/ holds checkpoint models"""
    games_per_pair: int = 20
    """games each pair plays, half with each colour (even)"""
    mcts_simulations: int = 100
    """simulations of the MCTSBot anchor (random rollouts, as the script's evaluation)"""
    opening_plies: int = 2
    """plies at the start of every game played at random (the same for both colours of a pair of games): the
    games of a match differ although neither player explores (thesis 5.7 does not say how its games varied)"""
    every: int = 1
    """use every n-th checkpoint (the tournament grows with the square of the players)"""
    prior_games: float = 1.0
    """virtual games, half won and half lost, of each player against the random anchor (keeps a player that
    won or lost everything at a finite rating; 0: the plain maximum-likelihood fit)"""
    seed: int = 0
    """fixes the search noise and the anchors' moves"""
    out: str = ""
    """where games.csv, ratings.csv and ladder.png go (default: {run_dir}/ladder)"""


def run_ladder(cfg: Ladder):
    import pandas as pd
    import muzero_breakthrough as bt

    for name in ["games_per_pair", "mcts_simulations", "every"]:
        if getattr(cfg, name) <= 0:
            bt.fail(f"--{name.replace('_', '-')} must be positive (got {getattr(cfg, name)})")
    if cfg.games_per_pair % 2:
        bt.fail(f"--games-per-pair must be even (got {cfg.games_per_pair}): half the games with each colour")
    if cfg.opening_plies < 0:
        bt.fail(f"--opening-plies must be non-negative (got {cfg.opening_plies})")
    models = checkpoint_models(cfg.run_dir)[:: cfg.every]
    if not models:
        bt.fail(f"--run-dir {cfg.run_dir}: no models/step_*.muzero_model (run muzero_breakthrough.py with "
                "--checkpoint-interval; every checkpoint saves one)")
    out = cfg.out or os.path.join(cfg.run_dir, "ladder")
    os.makedirs(out, exist_ok=True)
    loaded = [bt.load_model(path) for _, path in models]
    args, net, _ = loaded[0]  # the checkpoints of one run share their flags and network
    act_fn = bt.make_act_fn(net, bt.planner_configs(args)[1], args.gamma)  # one compiled search for all
    game = bt.BreakthroughVecEnv(args.board_size, 1)
    names = ["random", f"mcts{cfg.mcts_simulations}"] + [f"step_{step}" for step, _ in models]
    steps = [np.nan, np.nan] + [step for step, _ in models]
    params = [None, None] + [p for _, _, p in loaded]

    def player(i, pair_seed):
        if i < 2:
            return bt.BotPlayer(game.game, (0, cfg.mcts_simulations)[i], pair_seed)
        return bt.SearchPlayer(act_fn, params[i], cfg.games_per_pair, args.history_length, game.obs_shape, pair_seed)

    n = len(names)
    wins = np.zeros((n, n))
    rows = []
    for i in range(n):
        for j in range(i + 1, n):
            pair = [OpeningMoves(player(k, (cfg.seed, i, j, side)), cfg.opening_plies, (cfg.seed, i, j))
                    for side, k in enumerate((i, j))]
            scores, _, _ = bt.play_games(tuple(pair), args.board_size, cfg.games_per_pair)
            wins[i, j], wins[j, i] = scores.sum(), cfg.games_per_pair - scores.sum()
            rows.append({"player": names[i], "opponent": names[j], "wins": wins[i, j], "losses": wins[j, i]})
            print(f"{names[i]} - {names[j]}: {wins[i, j]:g} - {wins[j, i]:g}", flush=True)
    pd.DataFrame(rows).to_csv(os.path.join(out, "games.csv"), index=False)
    elo, low, high = bradley_terry(wins, anchor=0, prior_games=cfg.prior_games)
    ratings = pd.DataFrame({"player": names, "step": steps, "elo": elo, "low": low, "high": high,
                            "games": wins.sum(1) + wins.sum(0)})
    ratings.to_csv(os.path.join(out, "ratings.csv"), index=False)
    plot_ladder(ratings, os.path.join(out, "ladder.png"), title=os.path.basename(os.path.normpath(cfg.run_dir)))
    print(ratings.to_string(index=False))
    return ratings


def plot_ladder(ratings, path: str, title: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ckpt = ratings[ratings.step.notna()]
    fig, ax = plt.subplots(figsize=(6, 3.8))
    ax.errorbar(ckpt.step, ckpt.elo, yerr=[ckpt.elo - ckpt.low, ckpt.high - ckpt.elo], fmt="o-", capsize=3,
                label="checkpoints (95% interval)")
    for (_, anchor), style in zip(ratings[ratings.step.isna()].iterrows(), (":", "--")):
        ax.axhline(anchor.elo, color="grey", linestyle=style, label=anchor.player)
    ax.set(xlabel="training step (plies)", ylabel="Elo (random = 0)")
    ax.set_title(f"Elo ladder of {title}", fontsize="small")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v / 1000:g}k"))
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


TOOLS = {"ladder": (Ladder, run_ladder)}


if __name__ == "__main__":
    cfg = tyro.extras.subcommand_cli_from_dict({name: cls for name, (cls, _) in TOOLS.items()})
    next(run for cls, run in TOOLS.values() if isinstance(cfg, cls))(cfg)
