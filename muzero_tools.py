"""Tools that look inside trained agents of the muzero_*.py scripts (MooZi thesis 4.5, 5.4, 5.7-5.9), and the
benchmarks' results step.
They are not the agent: each script stays self-contained, and these import its functions. One subcommand per
tool, each with --help:

    python muzero_tools.py ladder --run-dir runs/breakthrough__muzero_breakthrough__1__1795427132

ladder: a round-robin tournament among a Breakthrough run's checkpoint models (`models/step_*.muzero_model`)
    and anchors (a uniformly random player and OpenSpiel's MCTSBots), rated by a Bradley-Terry maximum-
    likelihood fit with confidence intervals (the Minigo paper's evaluation; thesis Fig. 5.8 plots Elo against
    training step). Writes `{out}/games.csv` (every pair's wins), `{out}/ratings.csv` and `{out}/ladder.png`.
episode: one evaluation episode (or Breakthrough game) of a saved model as a GIF, each frame annotated with the
    search at that step (thesis 4.5): the scripts' --capture-video makes the same pictures.
tree: one search of that episode drawn with graphviz (node index, R, V, N on nodes; action, p, Q on edges); for
    Breakthrough each node is replayed in the real game and nodes reached by an illegal move are delusions (5.8).
audit: the share of simulations and of visit mass spent in delusional nodes over self-play positions, for each
    of a Breakthrough run's checkpoints (a curve over training).
tsne: t-SNE of the root hidden states of self-play positions, coloured by v*, move number and player (5.9).
budget: evaluation return (MinAtar, Atari) or win rate (Breakthrough) of models against the number of
    simulations of their search (5.4).
weights: the mean absolute value of every parameter array of saved models, side by side (how far training
    and the L2 term moved each layer from its initialisation).

The results step of the benchmarks (benchmark/*.sh runs them; the docs' tables and curves come from them):

    python muzero_tools.py collect --run-dir runs/Breakout__muzero_minatar__1__... --wall-time 2590 --out DIR
    python muzero_tools.py report --out DIR

commit: the commit a run starts at. collect: one run's TensorBoard events into CSVs (evaluation curve, binned
    training returns or Breakthrough's win rates, a summary row). report: curves and tables from the CSVs.
random-returns: a uniformly random policy's MinAtar returns. select: some games and seeds copied from one
    collected folder to another. compare: collected folders (one per configuration) side by side. diagnostics:
    the means of runs' logged losses and charts per bin of frames, side by side.
cpu-lines: records the CPU lines on which the golden runs were checked (docs/reproducibility.md).

Any saved model works: a script's --save-model output or a checkpoint's models/step_*.muzero_model; which script
made it is read from the flags saved beside it.
"""

import dataclasses
import glob
import hashlib
import importlib
import importlib.metadata
import itertools
import json
import os
import platform
import re
import subprocess
import sys
import types
import typing
from dataclasses import dataclass
from functools import partial
from typing import Literal

import flax
import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pandas as pd
import scipy.special
import scipy.stats
import tyro
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import muzero_run
from muzero_run import FRAME_SIZE, save_gif

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


class BadInput(ValueError):
    """A flag or file a tool cannot use: raised to a Python caller; on the command line, its message and exit 2."""


class MissingFile(BadInput, FileNotFoundError):
    """A file a tool needs is not there."""


def fail(message: str, error: type = BadInput):
    raise error(message)


def check_folder(name: str, path: str):
    """Refuses (BadInput) a folder to write in that is a file, or that this process cannot create or write in."""
    muzero_run.check_folder(name, path, BadInput)


def check_seed(seed: int, flag: str = "--seed"):
    """The scripts' rule for a seed, with their message."""
    if not 0 <= seed < 2**32:
        fail(f"{flag} must be in [0, 2**32 - 1], as JAX's 32-bit keys (got {seed})")


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
def model_step(path: str):
    """The environment steps a saved model was trained on: the `step` its JSON records, or for a model saved before
    the step was recorded, a checkpoint's name (`step_{step}.muzero_model`), else NaN."""
    with open(path + ".json") as f:
        step = json.load(f).get("step")
    if step is not None:
        return step
    found = re.search(r"step_(\d+)\.muzero_model$", path)
    return int(found.group(1)) if found else np.nan


def run_label(run_dir: str) -> str:
    """`{exp_name}__{seed}` of a run directory runs/{env_id}__{exp_name}__{seed}__{time} (else its base name)."""
    parts = os.path.basename(os.path.normpath(run_dir)).split("__")
    return "__".join(parts[1:3]) if len(parts) == 4 else "__".join(parts)


def checkpoint_models(run_dir: str) -> list[tuple[int, str]]:
    """(training step, path) of every checkpoint model a muzero_breakthrough.py run saved, by step."""
    return sorted((model_step(path), path) for path in glob.glob(os.path.join(run_dir, "models", "step_*.muzero_model")))


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
    """Round-robin tournament among the checkpoints of one or more Breakthrough runs and fixed anchors (a uniformly
    random player and MCTSBots), rated by Bradley-Terry. Each pair's result is written to games.csv as it ends: a
    tournament stopped part way continues from there when run again with the same flags and --out."""

    run_dirs: tuple[str, ...]
    """muzero_breakthrough.py run directories (runs/{run_name}) whose models/ hold checkpoint models; the
    checkpoints of several runs (other seeds, other settings) play in one tournament"""
    games_per_pair: int = 20
    """games each pair plays, half with each colour (even)"""
    mcts_simulations: tuple[int, ...] = (100,)
    """simulations of each MCTSBot anchor (random rollouts, as the script's evaluation), e.g. 100 1000 10000"""
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
    """where games.csv, ratings.csv and ladder.png go (default: {the first run dir}/ladder)"""


def ladder_flags(cfg: Ladder) -> dict:
    """The flags that decide a ladder's games (its players are the run's checkpoints and the anchors)."""
    flags = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in ("out", "prior_games")}
    return {**flags, "run_dirs": list(cfg.run_dirs), "mcts_simulations": list(cfg.mcts_simulations)}


def read_played_pairs(out: str, cfg: Ladder) -> dict:
    """{(player, opponent): (wins, losses)} of a ladder of the same runs in `out` that was stopped part way; {} if
    there is none (a ladder of other runs there is replaced). The same runs' ladder of other flags is refused:
    its games would not be this ladder's."""
    flags_path = os.path.join(out, "ladder.json")
    if not os.path.exists(os.path.join(out, "games.csv")) or not os.path.exists(flags_path):
        return {}
    with open(flags_path) as f:
        before = json.load(f)
    if before.get("run_dirs") != list(cfg.run_dirs):
        return {}
    changed = [k for k, v in ladder_flags(cfg).items() if before.get(k) != v]
    if changed:
        flags = ", ".join(f"--{k.replace('_', '-')} {before.get(k)}" for k in changed)
        fail(f"{out} holds a ladder of this run with other flags ({flags}): give those flags to continue it, or another --out")
    games = read_table(os.path.join(out, "games.csv"))
    return {(g.player, g.opponent): (g.wins, g.losses) for g in games.itertuples()}


def run_ladder(cfg: Ladder):
    import muzero_breakthrough as bt

    require("statsmodels.api", "tools")  # the fit after the games

    for name in ["games_per_pair", "every"]:
        if getattr(cfg, name) <= 0:
            fail(f"--{name.replace('_', '-')} must be positive (got {getattr(cfg, name)})")
    simulations = cfg.mcts_simulations
    if not simulations or min(simulations) <= 0 or len(set(simulations)) < len(simulations):
        fail(f"--mcts-simulations must be distinct positive numbers (got {' '.join(map(str, simulations))})")
    if cfg.games_per_pair % 2:
        fail(f"--games-per-pair must be even (got {cfg.games_per_pair}): half the games with each colour")
    if cfg.opening_plies < 0:
        fail(f"--opening-plies must be non-negative (got {cfg.opening_plies})")
    if not cfg.run_dirs:
        fail("--run-dirs: give at least one run directory")
    labels = [run_label(run_dir) for run_dir in cfg.run_dirs]
    if len(set(labels)) < len(labels):
        fail(f"--run-dirs: two runs of one --exp-name and seed ({', '.join(labels)}): their players would share names")
    runs = []  # per run: its label and its every-th checkpoint models as (step, path)
    for run_dir, label in zip(cfg.run_dirs, labels):
        models = checkpoint_models(run_dir)[:: cfg.every]
        if not models:
            fail(
                f"--run-dirs {run_dir}: no models/step_*.muzero_model (run muzero_breakthrough.py with "
                "--checkpoint-interval; every checkpoint saves one)"
            )
        runs.append((label, models))
    out = cfg.out or os.path.join(cfg.run_dirs[0], "ladder")
    played = read_played_pairs(out, cfg)  # before anything is written: a mismatch stops the run with out untouched
    anchors = (0, *cfg.mcts_simulations)  # MCTSBot simulations; 0: the random player
    names = ["random", *(f"mcts{n}" for n in cfg.mcts_simulations)]
    run_of = [np.nan] * len(anchors)
    steps = [np.nan] * len(anchors)
    searchers = [None] * len(anchors)  # per checkpoint: (its run's compiled search, args, params)
    for label, models in runs:
        loaded = [load_model(path, "--run-dirs")[1:] for _, path in models]
        args, net, _ = loaded[0]  # the checkpoints of one run share their flags and network
        act_fn = bt.make_act_fn(net, bt.planner_configs(args)[1], args.gamma)  # one compiled search per run
        for (step, _), (_, _, params) in zip(models, loaded):
            names.append(f"step_{step}" if len(runs) == 1 else f"{label}/step_{step}")
            run_of.append(label)
            steps.append(step)
            searchers.append((act_fn, args, params))
    board_sizes = {args.board_size for _, args, _ in searchers[len(anchors) :]}
    if len(board_sizes) > 1:
        fail(f"--run-dirs: the runs play on different boards ({', '.join(map(str, sorted(board_sizes)))})")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "ladder.json"), "w") as f:
        json.dump(ladder_flags(cfg), f, indent=1)
    board_size = board_sizes.pop()
    game = bt.BreakthroughVecEnv(board_size, 1)

    def player(i, pair_seed):
        if i < len(anchors):
            return bt.BotPlayer(game.game, anchors[i], pair_seed)
        act_fn, args, params = searchers[i]
        return bt.SearchPlayer(act_fn, params, cfg.games_per_pair, args.history_length, game.obs_shape, pair_seed)

    n = len(names)
    wins = np.zeros((n, n))
    rows = []
    for i in range(n):
        for j in range(i + 1, n):
            if (names[i], names[j]) in played:
                wins[i, j], wins[j, i] = played[names[i], names[j]]
            else:
                pair = [
                    OpeningMoves(player(k, (cfg.seed, i, j, side)), cfg.opening_plies, (cfg.seed, i, j))
                    for side, k in enumerate((i, j))
                ]
                scores, _, _ = bt.play_games(tuple(pair), board_size, cfg.games_per_pair)
                wins[i, j], wins[j, i] = scores.sum(), cfg.games_per_pair - scores.sum()
            rows.append({"player": names[i], "opponent": names[j], "wins": wins[i, j], "losses": wins[j, i]})
            pd.DataFrame(rows).to_csv(os.path.join(out, "games.csv"), index=False)  # kept if a later pair is stopped
            print(f"{names[i]} - {names[j]}: {wins[i, j]:g} - {wins[j, i]:g}", flush=True)
    elo, low, high = bradley_terry(wins, anchor=0, prior_games=cfg.prior_games)
    games = wins.sum(1) + wins.sum(0)
    ratings = pd.DataFrame(
        {"player": names, "run": run_of, "step": steps, "elo": elo, "low": low, "high": high, "games": games}
    )
    ratings.to_csv(os.path.join(out, "ratings.csv"), index=False)
    title = labels[0] if len(labels) == 1 else f"{len(labels)} runs"  # (several: each named in the legend)
    plot_ladder(ratings, os.path.join(out, "ladder.png"), title=title)
    print(ratings.to_string(index=False))
    return ratings


@dataclass
class Match:
    """A match of a saved Breakthrough model (its evaluation planner) against a uniformly random player or
    OpenSpiel's MCTSBot, half the games with each colour: one row of `{out}/matches.csv` (the benchmark's
    final strength, with more games than the run's own evaluations)."""

    model: str
    """a muzero_breakthrough.py model (--save-model's `{exp_name}.muzero_model` or a checkpoint's)"""
    opponent: Literal["random", "mcts"] = "mcts"
    """a uniformly random player, or MCTSBot (UCT c 2, one random rollout per leaf, solver on)"""
    games: int = 200
    """games of the match, half with each colour (even)"""
    mcts_simulations: int = 100
    """simulations per move of the MCTSBot opponent"""
    seed: int = 0
    """fixes the search noise and the opponent's moves"""
    commit: str = ""
    """the commit that trained the model (default: the checked-out one)"""
    out: str = ""
    """folder of matches.csv, whose row of the same model and opponent is replaced (default: print only)"""


def run_match(cfg: Match):
    if cfg.games <= 0 or cfg.games % 2:
        fail(f"--games must be positive and even (got {cfg.games}): half the games with each colour")
    if cfg.mcts_simulations <= 0:
        fail(f"--mcts-simulations must be positive (got {cfg.mcts_simulations})")
    script, args, net, params = load_model(cfg.model)
    if not is_board_game(script):
        fail(f"--model {cfg.model}: a {script.__name__}.py model; matches are between Breakthrough players")
    args = dataclasses.replace(args, eval_mcts_simulations=cfg.mcts_simulations)
    scores, colour, _ = play(script, args, net, params, cfg.games, cfg.seed, cfg.opponent)
    opponent = "random" if cfg.opponent == "random" else f"mcts-{cfg.mcts_simulations}"
    row = {
        "seed": args.seed,
        "board_size": args.board_size,
        "opponent": opponent,
        "games": cfg.games,
        "win_rate": scores.mean(),
        "as_black": scores[colour == 0].mean(),
        "as_white": scores[colour == 1].mean(),
        "plies": model_step(cfg.model),
        "model": os.path.relpath(cfg.model, REPO) if os.path.isabs(cfg.model) else cfg.model,
        "match_seed": cfg.seed,
        "commit": cfg.commit or git_commit(cfg.out or "."),
        "machine": machine_line(),
    }
    print(
        f"{row['model']} against {opponent}: {row['win_rate']:.3f} of {cfg.games} games "
        f"({row['as_black']:.2f} as black, {row['as_white']:.2f} as white)"
    )
    if cfg.out:
        path = os.path.join(cfg.out, "matches.csv")
        table = pd.DataFrame([row])
        if os.path.exists(path):
            old = read_table(path)
            old = old[~((old.model == row["model"]) & (old.opponent == opponent) & (old.match_seed == cfg.seed))]
            table = pd.concat([old, table], ignore_index=True)
        table.sort_values(["seed", "plies", "opponent"], kind="stable").to_csv(path, index=False)
    return row


def plot_ladder(ratings, path: str, title: str):
    """Elo of each run's checkpoints against training steps (one line per run), the anchors as horizontal lines."""
    checkpoints = ratings[ratings.step.notna()]
    several = checkpoints.run.nunique() > 1
    fig, ax = plt.subplots(figsize=(9, 3.8) if several else (6, 3.8))
    for run, ckpt in checkpoints.groupby("run", sort=False):
        ax.errorbar(
            ckpt.step,
            ckpt.elo,
            yerr=[ckpt.elo - ckpt.low, ckpt.high - ckpt.elo],
            fmt="o-",
            capsize=3,
            label=f"{run} (95% interval)" if several else "checkpoints (95% interval)",
        )
    for (_, anchor), style in zip(ratings[ratings.step.isna()].iterrows(), (":", "--", "-.", (0, (1, 4)), (0, (5, 8)))):
        ax.axhline(anchor.elo, color="grey", linestyle=style, label=anchor.player)
    ax.set(xlabel="training step (plies)", ylabel="Elo (random = 0)")
    ax.set_title(f"Elo ladder of {title}", fontsize="small")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v / 1000:g}k"))
    if several:  # beside the axes: the runs' lines fill them
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
    else:
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------
# Any script's saved model, its episodes and its searches
# ---------------------------------------------------------------------------------------------
def require(module: str, extra: str):
    """Imports an optional package, or stops with fail() and the line that installs it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError:
        fail(f"{module} is not installed: pip install -e '.[{extra}]' (in the repository)")


RENAMED_FLAGS = {"eval_games": "eval_episodes"}  # Breakthrough's --eval-episodes before it took the base's name
# flags the scripts no longer have: training, not play
REMOVED_FLAGS = ("anneal_lr", "weight_decay", "explored_priority", "importance_exponent_final", "rewarding_share")


def current_flag_names(flags: dict) -> dict:
    """The flags of an older run or model (saved JSON, logged hyperparameters) under today's names (RENAMED_FLAGS)."""
    return {RENAMED_FLAGS.get(name, name): value for name, value in flags.items()}


SCRIPTS = ("muzero_minatar", "muzero_minatar_reanalyze", "muzero_breakthrough", "muzero_atari_multigpu")  # load_model's


def read_model_json(model_path: str, flag: str) -> dict:
    """The object saved beside a model, `{model_path}.json`, refused (MissingFile, BadInput) naming the file and what
    is wrong with it: missing, unreadable, not UTF-8, not JSON, not a JSON object."""
    path = model_path + ".json"
    if not os.path.isfile(path):
        fail(f"{flag} {model_path}: no {path} beside it (a model saved by --save-model or a checkpoint)", MissingFile)
    try:
        with open(path, "rb") as f:
            saved = json.loads(f.read().decode("utf-8"))
    except OSError as e:
        fail(f"{flag} {model_path}: {path} cannot be read ({e.strerror})")
    except UnicodeDecodeError:
        fail(f"{flag} {model_path}: {path} is not UTF-8 text, so not a model's flags")
    except json.JSONDecodeError as e:
        fail(f"{flag} {model_path}: {path} is not JSON ({e})")
    if not isinstance(saved, dict):
        fail(f"{flag} {model_path}: {path} holds a JSON {type(saved).__name__}, not the object of a model's flags")
    return saved


def check_flag_types(args):
    """Each flag of a script's Args (read from a model's JSON, so unchecked by tyro) of its declared type: a Literal's
    choices, bool, int (not bool), float (an int too), str, tuple of ints, each of them or None where None is allowed."""
    for field in dataclasses.fields(args):
        value, kind = getattr(args, field.name), field.type
        if isinstance(kind, types.UnionType) and type(None) in typing.get_args(kind):
            if value is None:
                continue
            kind = next(k for k in typing.get_args(kind) if k is not type(None))
        if typing.get_origin(kind) is Literal:
            ok = value in typing.get_args(kind)
        elif kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif kind is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif typing.get_origin(kind) is tuple:
            ok = isinstance(value, tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        else:
            ok = isinstance(value, kind)
        if not ok:
            fail(f"--{field.name.replace('_', '-')} is {value!r}, not {getattr(kind, '__name__', kind)}")


def load_model(model_path: str, flag: str = "--model"):
    """(script module, args, network, params) of a model saved by any muzero_*.py script's --save-model (or a
    checkpoint's models/step_*): the script (one of SCRIPTS, never another module) and its flags are read from
    `{model_path}.json`, and the flags are checked by the script's own rules. A model missing (MissingFile), with a
    JSON that is not a model's, flags the script refuses, parameters or flags changed since it was saved (their
    sha256), parameters that the script's network of those flags cannot hold, or a Breakthrough model of the board's
    old view (BadInput) is refused naming the file; `flag` names where the path came from in the messages."""
    saved = read_model_json(model_path, flag)
    sha256 = saved.pop("sha256", None)  # models saved before the checksum have none
    flags_sha256 = saved.pop("flags_sha256", None)  # nor before the flags' checksum
    saved.pop("step", None)  # (model_step reads it)
    flags_of = {  # a flag only that script has: for models saved before the script was recorded
        "board_size": "muzero_breakthrough",
        "frame_skip": "muzero_atari_multigpu",
        "reanalyze_ratio": "muzero_minatar_reanalyze",
    }
    name = saved.pop("script", None) or next((name for flag, name in flags_of.items() if flag in saved), "muzero_minatar")
    if name not in SCRIPTS:
        fail(f"{flag} {model_path}: {model_path}.json names the script {name!r}, not one of {', '.join(SCRIPTS)}")
    view = saved.pop("view", None)  # "mover" in Breakthrough models of format 1 that see the board as their mover
    model_format = saved.pop("format", 1)  # muzero_run.MODEL_FORMAT; models saved before it have none
    mover_view = view == "mover" or (isinstance(model_format, int) and model_format >= 2)
    if name == "muzero_breakthrough" and not mover_view:  # models saved before the mover's view
        view = "a Breakthrough model of OpenSpiel's view, where white saw the board as black does"
        fail(f"{flag} {model_path}: {view}: load it at the commit that saved it")
    flags = dict(saved)  # as saved, for their checksum
    for removed in REMOVED_FLAGS:
        saved.pop(removed, None)
    saved = current_flag_names(saved)
    script = require(name, "atari") if name == "muzero_atari_multigpu" else importlib.import_module(name)
    unknown = sorted(set(saved) - {f.name for f in dataclasses.fields(script.Args)})
    if unknown:
        fail(f"{flag} {model_path}: {name}.py has no flags {', '.join(unknown)}: load it at the commit that saved it")
    args = script.Args(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()})
    try:
        if flags_sha256 is not None and muzero_run.flags_sha256(flags) != flags_sha256:
            raise ValueError(f"the flags in {model_path}.json are not those it was saved with: the file changed since")
        with open(model_path, "rb") as f:
            data = f.read()
        if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
            raise ValueError(f"its sha256 is not the one in {model_path}.json: the file changed since it was saved")
        check_flag_types(args)
        muzero_run.check_rules(args, script.flag_rules(args), BadInput)
        params = flax.serialization.msgpack_restore(data)  # the saved tree itself: no template needed
        num_actions = params["params"]["policy_head"]["Dense_1"]["bias"].shape[0]  # |A^a|
        net = script.make_network(args, num_actions)
        expected = jax.eval_shape(partial(script.init_params, net, args), jax.random.PRNGKey(0))
        if jax.tree.map(lambda x: x.shape, expected) != jax.tree.map(np.shape, params):
            raise ValueError(f"its parameters are not those of {name}.py's network with the flags in {model_path}.json")
    except Exception as e:
        fail(f"{flag} {model_path}: not a whole model of {name}.py ({type(e).__name__}: {e})")
    return script, args, net, params


def evaluate(model_path: str, eval_episodes: int = 10, seed: int = 0, opponent: str = "random"):
    """Loads a saved model and plays `eval_episodes` episodes with its evaluation planner (Breakthrough: games
    against `opponent`, both colours); returns each episode's return (Breakthrough: the model's score, 1 a win).
    Bad input raises BadInput (a ValueError; MissingFile, also a FileNotFoundError, for a model not there), with the
    command line's messages."""
    for name, value in (("eval_episodes", eval_episodes), ("seed", seed)):
        if not isinstance(value, int) or isinstance(value, bool):
            fail(f"{name} must be an integer (got {value!r})")
    check_seed(seed, "seed")
    if eval_episodes <= 0:
        fail(f"eval_episodes must be positive (got {eval_episodes})")
    script, args, net, params = load_model(model_path, "model_path")
    check_opponent(script, opponent, eval_episodes)
    return play(script, args, net, params, eval_episodes, seed, opponent)[0]


def check_opponent(script, opponent: str, games: int):
    """Breakthrough models play `games` (even: half with each colour) against "random" or "mcts"; the others play alone
    (opponent "random", the default)."""
    if not is_board_game(script):
        if opponent != "random":
            fail(f"opponent {opponent!r}: a {script.__name__}.py model plays alone (only Breakthrough models take one)")
        return
    if opponent not in ("random", "mcts"):
        fail(f"opponent must be 'random' or 'mcts' (got {opponent!r})")
    if games % 2:
        fail(f"eval_episodes must be even (half the games are played with each colour) (got {games})")


def is_board_game(script) -> bool:
    return script.__name__ == "muzero_breakthrough"


def play(script, args, net, params, episodes: int, seed: int, opponent: str, num_simulations: int = 0, record: bool = False):
    """The script's own evaluate_policy (Breakthrough: `episodes` games against `opponent`, the agent black
    in game 0) with its evaluation planner at `num_simulations` (0: the model's --eval-num-simulations);
    `record` keeps a Recording of episode 0 with the search tree of every step."""
    if num_simulations:
        args = dataclasses.replace(args, eval_num_simulations=num_simulations)
    act_fn = script.make_act_fn(net, script.planner_configs(args)[1], args.gamma, keep_tree=record)
    if is_board_game(script):
        return script.evaluate_policy(act_fn, params, args, opponent, episodes, (seed,), record=record)
    return script.evaluate_policy(act_fn, params, args, episodes, seed, record=record)


PANEL_WIDTH = 280  # pixels of the panel of the search's numbers beside a muzero_run.FRAME_SIZE frame
FONT_SIZE = 15


def search_numbers(tree, action: int) -> dict:
    """The numbers of one search at its root (the tree of one game): the action taken, v* (the root value after
    the search) and, per action, the prior p the search started from (after the legal mask and any root
    noise), the predicted reward r, the visit count N and Q = r + discount * value of the child (0 if not
    visited)."""
    summary = tree.summary()
    return {
        "action": action,
        "value": float(summary.value[0]),
        "prior": np.asarray(jax.nn.softmax(tree.children_prior_logits[0, 0])),
        "reward": np.asarray(tree.children_rewards[0, 0]),
        "visits": np.asarray(summary.visit_counts[0]).astype(int),
        "q": np.asarray(summary.qvalues[0]),
    }


def action_names_at(recording, step: int, depth: int = 0) -> list:
    """The name of each agent action played `depth` plies below the position of `step` (0: the action taken
    there). Breakthrough's agent sees the board as its mover does, so it names its actions per player: in its
    recorded game, black moves at the even steps, and below a position the players alternate."""
    if not isinstance(recording.action_names[0], list):
        return recording.action_names
    return recording.action_names[(step + depth) % 2]


def annotation_lines(numbers: dict, step: int, action_names: list, rows: int = 6) -> list[str]:
    """The text beside an annotated frame: the step, the action taken with its predicted reward, v*, then the
    `rows` actions with the most visits (legal ones only) with p, N and Q."""
    a = numbers["action"]
    lines = [
        f"step {step}  action {action_names[a]}",
        f"v* {numbers['value']:+.3f}  r {numbers['reward'][a]:+.3f}",
        f"{'action':8}{'p':>5}{'N':>4}{'Q':>7}",
    ]
    for b in np.lexsort((-numbers["prior"], -numbers["visits"]))[:rows]:
        if numbers["prior"][b] > 0:
            lines.append(f"{action_names[b][:8]:8}{numbers['prior'][b]:5.2f}{numbers['visits'][b]:4d}{numbers['q'][b]:+7.3f}")
    return lines


def save_annotated_gif(recording, path: str):
    """A Recording (a script's evaluate_policy, its act_fn keeping its trees) as an animated GIF: each observation
    with a panel beside it of the search's numbers at that step (annotation_lines)."""
    from PIL import Image, ImageDraw, ImageFont

    try:  # a monospaced font keeps the columns of p, N and Q aligned
        font = ImageFont.truetype("DejaVuSansMono.ttf", FONT_SIZE)
    except OSError:
        font = ImageFont.load_default(size=FONT_SIZE)

    def annotate(image, t: int):
        panel = Image.new("RGB", (FRAME_SIZE + PANEL_WIDTH, FRAME_SIZE), "white")
        panel.paste(image)
        numbers = search_numbers(recording.trees[t], recording.actions[t])
        lines = annotation_lines(numbers, t, action_names_at(recording, t))
        ImageDraw.Draw(panel).multiline_text((FRAME_SIZE + 8, 8), "\n".join(lines), fill="black", font=font, spacing=5)
        return panel

    save_gif(recording.frames[: len(recording.actions)], path, annotate, duration=400)


def record_episode(script, args, net, params, seed: int, opponent: str, num_simulations: int = 0):
    """One evaluation episode with the search of every step: a Recording (frames, trees, actions, names)."""
    return play(script, args, net, params, 1, seed, opponent, num_simulations, record=True)[2]


def first_steps(recording, steps: int):
    """A Recording cut to its first `steps` steps (0: the whole episode)."""
    if not steps:
        return recording
    return recording._replace(
        **{name: getattr(recording, name)[:steps] for name in recording._fields if name != "action_names"}
    )


def episode_table(recording) -> pd.DataFrame:
    """The numbers the annotated frames show, one row per step and legal action of its search: step, action,
    played, v* (value), the prior p, the predicted reward r, N (visits) and Q."""
    rows = []
    for t, (tree, a) in enumerate(zip(recording.trees, recording.actions)):
        numbers = search_numbers(tree, a)
        for b in np.flatnonzero(numbers["prior"] > 0):
            rows.append(
                {
                    "step": t,
                    "action": action_names_at(recording, t)[b],
                    "played": b == a,
                    "value": numbers["value"],
                    "prior": numbers["prior"][b],
                    "reward": numbers["reward"][b],
                    "visits": numbers["visits"][b],
                    "q": numbers["q"][b],
                }
            )
    return pd.DataFrame(rows)


def tree_nodes(tree) -> list[dict]:
    """Every node of a search tree of one game (an mctx.Tree with batch size 1), root first and each parent
    before its children: `index`, `parent` (-1 at the root), `depth`, `N` (visits), `V` (value after the search)
    and, on the edge from the parent, `action`, `p` (the parent's prior of it), `R` (predicted reward) and
    `Q` = R + discount * V (the Q that the search's summary reports at the root)."""
    t = {
        k: np.asarray(getattr(tree, k))[0]
        for k in (
            "node_visits",
            "node_values",
            "parents",
            "action_from_parent",
            "children_prior_logits",
            "children_rewards",
            "children_discounts",
            "children_values",
        )
    }
    nodes, depth = [], {}
    for i in np.flatnonzero(t["node_visits"] > 0):
        parent, action = int(t["parents"][i]), int(t["action_from_parent"][i])
        node = {
            "index": int(i),
            "parent": parent,
            "depth": 0 if parent < 0 else depth[parent] + 1,
            "N": int(t["node_visits"][i]),
            "V": float(t["node_values"][i]),
        }
        if parent >= 0:
            prior = scipy.special.softmax(t["children_prior_logits"][parent])
            reward = float(t["children_rewards"][parent, action])
            node.update(
                action=action,
                p=float(prior[action]),
                R=reward,
                Q=reward + float(t["children_discounts"][parent, action] * t["children_values"][parent, action]),
            )
        depth[int(i)] = node["depth"]
        nodes.append(node)
    return nodes


def mark_delusions(nodes: list[dict], root_state, openspiel_action: np.ndarray) -> list[dict]:
    """Replays a Breakthrough search (tree_nodes) in the real game from `root_state` (an OpenSpiel state), agent
    action a of player p being OpenSpiel's `openspiel_action[p, a - 1]` (BreakthroughVecEnv.openspiel_action): a node
    reached by a move that is not legal there is a delusion (thesis 5.8: below the root the learned model is
    not told the rules), and so is every node below one. Legal as the scripts' legal_actions: OpenSpiel's moves
    before the end, only the dummy action (the absorbing state the model is trained on) after it. Sets each
    node's `delusion`; returns the nodes."""
    states = {}
    for node in nodes:
        if node["parent"] < 0:
            node["delusion"], states[node["index"]] = False, root_state.clone()
            continue
        state, action = states[node["parent"]], node["action"]
        if state is None or (action == 0) != state.is_terminal():  # under a delusion, or the dummy at the wrong time
            node["delusion"], states[node["index"]] = True, None
        elif action == 0:  # after the end
            node["delusion"], states[node["index"]] = False, state
        else:
            move = int(openspiel_action[state.current_player(), action - 1])
            legal = move in state.legal_actions()
            node["delusion"], states[node["index"]] = not legal, state.child(move) if legal else None
    return nodes


def replay_game(envs, actions: list):
    """The OpenSpiel state of a Breakthrough game (`envs`: a BreakthroughVecEnv) after the given agent actions (from its
    first move)."""
    state = envs.game.new_initial_state()
    for a in actions:
        state.apply_action(int(envs.openspiel_action[state.current_player(), a - 1]))
    return state


def tree_graph(nodes: list[dict], names_at_depth, title: str):
    """A graphviz Digraph of tree_nodes: node index, R, V and N on nodes, action, p and Q on edges; delusions
    (if marked) filled red. `names_at_depth(depth)` names the actions played from a node at that depth."""
    import graphviz

    g = graphviz.Digraph(
        graph_attr={"label": title, "labelloc": "t", "fontsize": "11", "ranksep": "0.3"},
        node_attr={"shape": "box", "fontsize": "9", "height": "0.2", "margin": "0.04"},
        edge_attr={"fontsize": "8"},
    )
    for n in nodes:
        reward = "" if n["parent"] < 0 else f"R {n['R']:+.2f}\\n"  # \n: a line break in DOT's labels
        g.node(
            str(n["index"]),
            f"#{n['index']}\\n{reward}V {n['V']:+.2f}\\nN {n['N']}",
            style="filled",
            fillcolor="#f4a0a0" if n.get("delusion") else "white",
        )
        if n["parent"] >= 0:
            g.edge(
                str(n["parent"]),
                str(n["index"]),
                label=f"{names_at_depth(n['depth'] - 1)[n['action']]}\\np {n['p']:.2f}\\nQ {n['Q']:+.2f}",
            )
    return g


def default_out(model: str, name: str) -> str:
    return os.path.join(os.path.dirname(model) or ".", "analysis", name)


@dataclass
class Episode:
    """An annotated episode (thesis 4.5): one evaluation episode of a saved model (Breakthrough: one game, the
    agent black) as a GIF, each frame with the action, v*, the predicted reward and p, N, Q of the most visited
    actions."""

    model: str
    """a saved model (--save-model's `{exp_name}.muzero_model` or a checkpoint's models/step_*.muzero_model)"""
    seed: int = 0
    """fixes the environment, the opponent and the search noise"""
    opponent: Literal["random", "mcts"] = "mcts"
    """Breakthrough's opponent: a uniformly random player or MCTSBot with the model's --eval-mcts-simulations"""
    out: str = ""
    """the GIF (default: analysis/episode_{seed}.gif beside the model); its numbers go to the same path in .csv"""
    steps: int = 0
    """the GIF shows the episode's first this many steps (0: all; a MinAtar episode can reach 1,000 steps, 3.5 MB)"""


def run_episode(cfg: Episode):
    if cfg.steps < 0:
        fail(f"--steps must be 0 (the whole episode) or positive (got {cfg.steps})")
    script, args, net, params = load_model(cfg.model)
    recording = record_episode(script, args, net, params, cfg.seed, cfg.opponent)
    out = cfg.out or default_out(cfg.model, f"episode_{cfg.seed}.gif")
    shown = first_steps(recording, cfg.steps)
    save_annotated_gif(shown, out)
    episode_table(shown).to_csv(os.path.splitext(out)[0] + ".csv", index=False)
    print(f"{len(shown.frames)} annotated frames: {out} (numbers: .csv)")
    return recording


@dataclass
class Tree:
    """One search drawn with graphviz: the search made at step --step of an evaluation episode (as `episode`
    records it); for Breakthrough every node is replayed in the real game and delusions are filled red."""

    model: str
    """a saved model"""
    step: int = 8
    """the step (ply) of the episode whose search is drawn"""
    seed: int = 0
    """fixes the environment, the opponent and the search noise"""
    opponent: Literal["random", "mcts"] = "mcts"
    """Breakthrough's opponent"""
    simulations: int = 0
    """simulations of the drawn search (0: the model's --eval-num-simulations)"""
    out: str = ""
    """the path of the drawing without its suffix: .dot and .csv (the nodes' numbers) are always written, .png if
    graphviz's `dot` is installed (default: analysis/tree_{seed}_{step} beside the model)"""


def run_tree(cfg: Tree):
    graphviz = require("graphviz", "tools")

    if cfg.step < 0 or cfg.simulations < 0:
        fail(f"--step and --simulations must be non-negative (got {cfg.step}, {cfg.simulations})")
    script, args, net, params = load_model(cfg.model)
    recording = record_episode(script, args, net, params, cfg.seed, cfg.opponent, cfg.simulations)
    if cfg.step >= len(recording.trees):
        fail(f"--step {cfg.step}: the episode has {len(recording.trees)} steps")
    nodes = tree_nodes(recording.trees[cfg.step])
    title = f"{os.path.basename(cfg.model)}, seed {cfg.seed}, step {cfg.step}"
    if is_board_game(script):
        envs = script.BreakthroughVecEnv(args.board_size, 1)
        mark_delusions(nodes, replay_game(envs, recording.actions[: cfg.step]), envs.openspiel_action)
        title += f": {sum(n['delusion'] for n in nodes)} of {len(nodes) - 1} nodes are delusions (red)"
    out = cfg.out or default_out(cfg.model, f"tree_{cfg.seed}_{cfg.step}")
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    graph = tree_graph(nodes, partial(action_names_at, recording, cfg.step), title)
    graph.save(out + ".dot")
    pd.DataFrame(nodes).to_csv(out + ".csv", index=False)
    try:
        png = graph.pipe(format="png")  # before the file is opened: no empty PNG without `dot`
        with open(out + ".png", "wb") as f:
            f.write(png)
        print(f"{out}.dot, {out}.png")
    except graphviz.ExecutableNotFound:
        print(f"{out}.dot (install graphviz's `dot` for the PNG: apt-get install graphviz)")
    return nodes


# ---------------------------------------------------------------------------------------------
# Self-play positions: the delusion audit and t-SNE
# ---------------------------------------------------------------------------------------------
def make_envs(script, args, num_envs: int, seed: int):
    """The script's own batch of environments (Breakthrough's games, MinAtar, Atari as in evaluation)."""
    if is_board_game(script):
        return script.BreakthroughVecEnv(args.board_size, num_envs)
    if script.__name__ == "muzero_atari_multigpu":
        return script.AtariVecEnv(args, num_envs, seed, episodic_life=False)
    step_limit = args.max_episode_steps or script.GYMNAX_STEP_LIMITS.get(args.env_id, 1000)
    return script.MinAtarVecEnv(args.env_id, num_envs, seed, args.sticky_action_prob, step_limit)


def self_play(
    script, args, net, params, measure, num_positions: int, num_games: int, seed: int, num_simulations: int = 0
) -> list:
    """`measure(tree, game_state, move_number, player)` at `num_positions` positions of self-play as the actors
    play it: the training planner (its root noise, and Breakthrough's random moves, make the games differ;
    the evaluation planner would play one game over and over), one network for every game of a batch and
    both sides in Breakthrough. `tree` is one game's search (batch size 1), `game_state` its OpenSpiel state
    (None for the Atari games). Positions where a game has ended are left out. `num_simulations` replaces the
    run's --num-simulations (0 keeps it)."""
    if num_simulations:
        args = dataclasses.replace(args, num_simulations=num_simulations)
    act_fn = script.make_act_fn(net, script.planner_configs(args)[0], args.gamma, keep_tree=True)
    envs = make_envs(script, args, num_games, seed)
    state = script.initial_actor_state(num_games, args.history_length, envs.obs_shape)
    step = envs.step(np.zeros(num_games, np.int32))
    key, moves, results = jax.random.PRNGKey(seed), np.zeros(num_games, np.int64), []
    while len(results) < num_positions:
        key, sub = jax.random.split(key)
        state, action, _, _, tree = act_fn(params, state, step.obs, step.is_first, envs.legal_actions(step.is_last), sub)
        tree = jax.tree.map(np.asarray, tree)
        moves = np.where(step.is_first, 0, moves + 1)
        to_play = getattr(step, "to_play", np.zeros(num_games, np.int64))
        for g in np.flatnonzero(~step.is_last)[: num_positions - len(results)]:
            game_state = envs.states[g] if is_board_game(script) else None
            results.append(measure(jax.tree.map(lambda x: x[g : g + 1], tree), game_state, moves[g], to_play[g]))
        step = envs.step(np.asarray(action))
    return results


def delusion_shares(tree, game_state, openspiel_action: np.ndarray) -> tuple[float, float]:
    """(share of the simulations, share of the visit mass) of one search spent in delusional nodes (mark_delusions):
    each simulation adds one node, a node's visits are the simulations that passed through it."""
    nodes = mark_delusions(tree_nodes(tree), game_state, openspiel_action)[1:]  # the root is the real position
    deluded = [n for n in nodes if n["delusion"]]
    return len(deluded) / max(len(nodes), 1), sum(n["N"] for n in deluded) / max(sum(n["N"] for n in nodes), 1)


@dataclass
class Audit:
    """Delusion audit: over self-play positions of each Breakthrough model, the share of simulations and of
    visit mass the search spends in delusional nodes (moves the real game does not allow), as a curve over
    training."""

    models: tuple[str, ...]
    """saved Breakthrough models, e.g. runs/{run_name}/models/step_*.muzero_model"""
    positions: int = 512
    """self-play positions searched per model"""
    games: int = 16
    """self-play games played at once"""
    simulations: int = 0
    """simulations of the self-play search (0: the run's --num-simulations, as its actors searched)"""
    seed: int = 0
    """fixes the search noise"""
    out: str = "analysis/audit"
    """where audit.csv and audit.png go"""


def run_audit(cfg: Audit):
    if not cfg.models:
        fail("--models: give one or more saved models")
    if cfg.positions <= 0 or cfg.games <= 0 or cfg.simulations < 0:
        fail(
            f"--positions and --games must be positive, --simulations non-negative (got {cfg.positions}, "
            f"{cfg.games}, {cfg.simulations})"
        )
    agents = [load_model(m, "--models") for m in cfg.models]
    if not all(is_board_game(a[0]) for a in agents):
        fail("--models: the audit replays searches in the real game: Breakthrough models only")
    rows = []
    for path, (script, args, net, params) in zip(cfg.models, agents):
        openspiel_action = script.BreakthroughVecEnv(args.board_size, 1).openspiel_action
        shares = np.array(
            self_play(
                script,
                args,
                net,
                params,
                lambda tree, game, move, player: delusion_shares(tree, game, openspiel_action),
                cfg.positions,
                cfg.games,
                cfg.seed,
                cfg.simulations,
            )
        )
        rows.append(
            {
                "model": path,
                "step": model_step(path),
                "positions": len(shares),
                "simulations": cfg.simulations or args.num_simulations,
                "simulation_share": shares[:, 0].mean(),
                "visit_share": shares[:, 1].mean(),
            }
        )
        print(
            f"{path}: {rows[-1]['simulation_share']:.3f} of simulations, {rows[-1]['visit_share']:.3f} of visits in delusions",
            flush=True,
        )
    table = pd.DataFrame(rows).sort_values("step")
    os.makedirs(cfg.out, exist_ok=True)
    table.to_csv(os.path.join(cfg.out, "audit.csv"), index=False)
    plot_curves(
        table,
        "step",
        {"simulation_share": "share of simulations", "visit_share": "share of visit mass"},
        f"in delusional nodes ({cfg.simulations or args.num_simulations} simulations)",
        os.path.join(cfg.out, "audit.png"),
    )
    return table


@dataclass
class Tsne:
    """t-SNE of the root hidden states of self-play positions (thesis 5.9), coloured by v*, move number and
    player to move."""

    model: str
    """a saved model"""
    positions: int = 1000
    """self-play positions embedded"""
    games: int = 16
    """self-play games played at once"""
    perplexity: float = 30.0
    """t-SNE's perplexity (scikit-learn)"""
    seed: int = 0
    """fixes the search noise and t-SNE"""
    out: str = ""
    """where tsne.csv and tsne.png go (default: the analysis/ folder beside the model)"""


def run_tsne(cfg: Tsne):
    TSNE = require("sklearn.manifold", "tools").TSNE

    if cfg.positions <= 1 or cfg.games <= 0 or not 0 < cfg.perplexity < cfg.positions:
        fail(
            f"--positions > 1, --games > 0 and 0 < --perplexity < --positions (got {cfg.positions}, {cfg.games}, "
            f"{cfg.perplexity})"
        )
    script, args, net, params = load_model(cfg.model)

    def measure(tree, game, move, player):
        return np.ravel(tree.embeddings[0, 0]), float(tree.node_values[0, 0]), move, player  # v* is the root's value

    found = self_play(script, args, net, params, measure, cfg.positions, cfg.games, cfg.seed)
    points = TSNE(perplexity=cfg.perplexity, random_state=cfg.seed).fit_transform(np.stack([f[0] for f in found]))
    table = pd.DataFrame(
        {
            "x": points[:, 0],
            "y": points[:, 1],
            "value": [f[1] for f in found],
            "move": [f[2] for f in found],
            "player": [f[3] for f in found],
        }
    )
    out = cfg.out or default_out(cfg.model, "tsne")
    os.makedirs(out, exist_ok=True)
    table.to_csv(os.path.join(out, "tsne.csv"), index=False)
    plot_tsne(table, os.path.join(out, "tsne.png"), os.path.basename(cfg.model))
    return table


def plot_tsne(table, path: str, title: str):
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    for ax, (column, name, cmap) in zip(
        axes, [("value", "v*", "coolwarm"), ("move", "move number", "viridis"), ("player", "player to move", "bwr")]
    ):
        points = ax.scatter(table.x, table.y, c=table[column], s=4, cmap=cmap)
        fig.colorbar(points, ax=ax, label=name)
        ax.set(xticks=[], yticks=[], title=name)
    fig.suptitle(f"t-SNE of root hidden states: {title}", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------
# Search-budget scaling
# ---------------------------------------------------------------------------------------------
@dataclass
class Budget:
    """Search-budget scaling (thesis 5.4): the evaluation return (MinAtar, Atari) or win rate (Breakthrough,
    both colours) of each model with its evaluation planner at each number of simulations."""

    models: tuple[str, ...]
    """saved models of one script (e.g. a run's checkpoints: runs/{run_name}/models/step_*.muzero_model)"""
    simulations: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    """the search budgets"""
    episodes: int = 32
    """evaluation episodes (Breakthrough: games, half with each colour) per model and budget"""
    opponent: Literal["random", "mcts"] = "mcts"
    """Breakthrough's opponent"""
    mcts_simulations: int = 100
    """simulations per move of Breakthrough's MCTSBot opponent (the same at every budget)"""
    seed: int = 0
    """fixes the environments, the opponent and the search noise (the same at every budget)"""
    out: str = "analysis/budget"
    """where budget.csv and budget.png go"""


def run_budget(cfg: Budget):
    if not cfg.models:
        fail("--models: give one or more saved models")
    if cfg.episodes <= 0 or cfg.mcts_simulations <= 0 or min(cfg.simulations) <= 0:
        fail(
            "--episodes, --mcts-simulations and every --simulations must be positive "
            f"(got {cfg.episodes}, {cfg.mcts_simulations}, {cfg.simulations})"
        )
    agents = [load_model(m, "--models") for m in cfg.models]  # every model checked before the first evaluation
    os.makedirs(cfg.out, exist_ok=True)
    rows = []
    for path, (script, args, net, params) in zip(cfg.models, agents):
        if is_board_game(script):
            args = dataclasses.replace(args, eval_mcts_simulations=cfg.mcts_simulations)
        for n in cfg.simulations:
            result = play(script, args, net, params, cfg.episodes, cfg.seed, cfg.opponent, n)[0]
            rows.append(
                {
                    "model": path,
                    "step": model_step(path),
                    "simulations": n,
                    "mean": result.mean(),
                    "stderr": result.std(ddof=1) / np.sqrt(len(result)),
                    "episodes": len(result),
                }
            )
            print(f"{path} at {n} simulations: {result.mean():.3f} +- {rows[-1]['stderr']:.3f}", flush=True)
            table = pd.DataFrame(rows)
            table.to_csv(os.path.join(cfg.out, "budget.csv"), index=False)  # kept if a later budget is stopped
    opponent = "random" if cfg.opponent == "random" else f"MCTSBot-{cfg.mcts_simulations}"
    plot_budget(
        table,
        os.path.join(cfg.out, "budget.png"),
        f"win rate against {opponent}" if is_board_game(script) else "evaluation return",
    )
    return table


def plot_budget(table, path: str, ylabel: str):
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for model, rows in table.groupby("model", sort=False):
        label = f"step {rows.step.iloc[0]:,.0f}" if np.isfinite(rows.step.iloc[0]) else os.path.basename(model)
        ax.errorbar(rows.simulations, rows["mean"], yerr=rows.stderr, fmt="o-", capsize=3, label=label)
    ax.set(xscale="log", xlabel="simulations per search", ylabel=ylabel)
    ax.set_xticks(sorted(table.simulations.unique()), [str(n) for n in sorted(table.simulations.unique())])
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_curves(table, x: str, columns: dict, ylabel: str, path: str):
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for column, label in columns.items():
        ax.plot(table[x], table[column], "o-", label=label)
    ax.set(xlabel="training step (plies)", ylabel=ylabel)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v / 1000:g}k"))
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------
# Benchmark results: the collection step of benchmark/*.sh, the tables and curves the docs show
# ---------------------------------------------------------------------------------------------
REPO = os.path.dirname(os.path.abspath(__file__))
TRAIN_BIN = 20_000  # frames per point of the training-return curve
OPPONENTS = {"random": "uniform random", "mcts": "MCTSBot"}  # Breakthrough's evaluation opponents
# the win rates Breakthrough's runs aim at, by board size and opponent (the Breakthrough page): the final models'
# matches, and the runs' own evaluations against their MCTSBot
MATCH_TARGETS = {
    (5, "random"): 0.98,
    (5, "mcts-100"): 0.80,
    (5, "mcts-1000"): 0.95,
    (5, "mcts-10000"): 0.5,
    (8, "random"): 0.98,
    (8, "mcts-1000"): 0.80,
}


def seeds_label(n: int) -> str:
    """'1 seed', '2 seeds': the legends of the curves."""
    return f"{n} seed{'s' * (n > 1)}"


def runs_label(runs: pd.DataFrame) -> str:
    """What the runs of a figure are: `muzero_minatar.py` when every run is a script's under its default --exp-name,
    `--exp-name cons0` when they share another, otherwise each with its seeds ('--exp-name share25 (seed 1), ...')."""
    names = runs.sort_values("seed").groupby("exp_name", sort=False).seed.apply(list)
    if len(names) == 1:  # the seeds are in the legend
        return (
            f"{names.index[0]}.py"
            if os.path.exists(os.path.join(REPO, f"{names.index[0]}.py"))
            else f"--exp-name {names.index[0]}"
        )
    return "--exp-name " + ", ".join(
        f"{name} (seed{'s' * (len(s) > 1)} {', '.join(map(str, s))})" for name, s in names.items()
    )


def write_markdown(path: str, rows: list[str]) -> None:
    """Write the lines of a markdown table (and its notes) to `path` and print them: the docs include the file."""
    text = "\n".join(rows)
    with open(path, "w") as f:
        f.write(text + "\n")
    print(text)


def machine_line() -> str:
    """Cores, CPU, JAX version and backend. The CPU's family and model numbers and whether it has AVX-512 are
    included because a virtual machine's model name ("AMD EPYC") hides the host's generation (the scripts cap
    XLA's code at AVX2 so that it does not matter: docs/reproducibility.md lists the lines checked); the
    versions of the libraries that compute the update and the search, because an install without
    constraints.txt takes others."""
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            name, _, value = line.partition(":")
            info.setdefault(name.strip(), value.strip())
    cpu = info.get("model name", platform.processor())
    if "cpu family" in info:
        avx512 = ", avx512" if "avx512f" in info.get("flags", "").split() else ""
        cpu += f" (family {info['cpu family']} model {info.get('model', '?')}{avx512})"
    libraries = ", ".join(f"{name} {importlib.metadata.version(name)}" for name in ("flax", "optax", "mctx"))
    return f"{os.cpu_count()} cores, {cpu}, JAX {jax.__version__} ({libraries}), {jax.default_backend().upper()}"


def git_commit(out: str) -> str:
    """The checked-out commit, with "+changes" if anything but the docs and the benchmark's own output folder
    `out` differs from it (uncommitted results or pages must not mark the next run's code as changed;
    untracked files, such as a worktree's link to a virtual environment, do not count)."""

    def git(*args):
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=REPO, check=True).stdout.strip()

    out = os.path.relpath(os.path.abspath(out), REPO)
    changed = git(
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--",
        ".",
        ":(exclude)docs",
        *([] if out.startswith("..") else [f":(exclude){out}"]),
    )
    return git("rev-parse", "--short", "HEAD") + ("+changes" if changed else "")


def commit_at(unix_time: int) -> str:
    """The newest commit made before `unix_time` (a run whose start commit was not recorded)."""
    return (
        subprocess.run(
            ["git", "rev-list", "-1", "--abbrev-commit", f"--before={unix_time}", "HEAD"],
            capture_output=True,
            text=True,
            cwd=REPO,
        ).stdout.strip()
        or "unknown"
    )


def read_table(path: str) -> pd.DataFrame:
    """A results table (csv); its commit column stays text (a short hash such as 97e0696 would parse as a number)."""
    return pd.read_csv(path, dtype={"commit": str})


def replace_rows(path: str, new, env_id: str, seed: int):
    """Writes `new` into the CSV at `path` in place of its rows of (env_id, seed)."""
    if os.path.exists(path):
        old = read_table(path)
        old = old[~((old.env_id == env_id) & (old.seed == seed))]
        new = pd.concat([old, new], ignore_index=True)
    new.sort_values(["env_id", "seed"] + (["step"] if "step" in new else []), kind="stable").to_csv(path, index=False)


def series_means(events: EventAccumulator, tag: str) -> tuple[float, float, float]:
    """The means of a logged series over its first fifth of entries, its last fifth and all of them (NaN where the
    run did not log it)."""
    if tag not in events.Tags()["scalars"]:
        return np.nan, np.nan, np.nan
    values = np.array([e.value for e in events.Scalars(tag)])
    fifth = max(len(values) // 5, 1)
    return values[:fifth].mean(), values[-fifth:].mean(), values.mean()


def run_flags(events: EventAccumulator) -> dict:
    """Every flag of a run as the text of the hyperparameters table the script logs at its start ({name: value}),
    under today's names."""
    (tag,) = [t for t in events.Tags()["tensors"] if t.startswith("hyperparameters")]
    text = events.Tensors(tag)[0].tensor_proto.string_val[0].decode()
    return current_flag_names({line.split("|")[1]: line.split("|")[2] for line in text.splitlines() if line.count("|") >= 3})


def protocol(flags: dict) -> str:
    """How a run is evaluated, in words, from its flags (values as run_flags gives them): the environment's rules, the
    evaluations' schedule and size, and the evaluation planner. What a results table's protocol line says."""
    if flags["planner"] == "gumbel":
        scale = float(flags.get("eval_gumbel_scale", 0))  # runs before --eval-gumbel-scale evaluated at 0
        noise = f"with Gumbel noise of scale {scale:g}" if scale else "without Gumbel noise"
        planner = f"Gumbel MuZero with {flags['eval_num_simulations']} simulations, its action {noise}"
    else:
        planner = (
            f"PUCT with {flags['eval_num_simulations']} simulations, the action drawn from the visit counts at "
            f"temperature {flags['eval_temperature']}, Dirichlet({flags['eval_dirichlet_alpha']}) noise on "
            f"{flags['dirichlet_fraction']} of the root prior"
        )
    every = f"every {int(flags['eval_interval']):,}"
    if "board_size" in flags:
        n = flags["board_size"]
        return (
            f"Breakthrough {n}x{n}; evaluation {every} plies and at the end: {flags['eval_episodes']} games against each "
            f"of a uniformly random player and MCTSBot-{flags['eval_mcts_simulations']}, half with each colour; {planner}"
        )
    if "frame_skip" in flags:
        life = ", a lost life ends a training episode" if flags["episodic_life"] == "True" else ""
        return (
            f"sticky actions {flags['sticky_action_prob']}, {flags['frame_skip']} frames an agent step, up to "
            f"{flags['noop_max']} no-ops at the start{life}; evaluation {every} agent steps and at the end: "
            f"{flags['eval_episodes']} whole games cut at {int(flags['max_episode_steps']):,} agent steps; {planner}"
        )
    cap = flags.get("max_episode_steps", "None")
    cap = "gymnax's step limits (Freeway 2,500, the others 1,000)" if cap == "None" else f"{int(cap):,} steps"
    return (
        f"sticky actions {flags['sticky_action_prob']}; evaluation {every} frames and at the end: "
        f"{flags['eval_episodes']} episodes cut at {cap}; {planner}"
    )


def seed_ranges(seeds) -> str:
    """Seeds as text, three or more consecutive ones as a range: [1, 2, 3, 4, 5] -> "1-5", [1, 2, 4] -> "1, 2, 4"."""
    seeds = sorted(seeds)
    runs = []  # runs of consecutive seeds
    for seed in seeds:
        if runs and seed == runs[-1][-1] + 1:
            runs[-1].append(seed)
        else:
            runs.append([seed])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) >= 3 else ", ".join(map(str, run)) for run in runs)


def protocol_line(runs: pd.DataFrame) -> str:
    """The protocol line under a table of `runs` (rows of runs.csv): its protocol, or, where the runs have several,
    the words they share once and the words that differ with the runs each covers (games with the same seeds named
    together)."""
    if "protocol" not in runs or runs.protocol.isna().any():
        return "Protocol: not recorded for every run (collected before runs.csv had a protocol column)."
    texts = list(runs.protocol.unique())
    if len(texts) == 1:
        return f"Protocol: {texts[0]}."
    words = {text: text.split(" ") for text in texts}
    shortest = min(map(len, words.values()))
    # shared words at the start and the end, leaving each protocol at least one word of its own
    shared_start = min(len(os.path.commonprefix(list(words.values()))), shortest - 1)
    ends = [w[shared_start:][::-1] for w in words.values()]
    shared_end = min(len(os.path.commonprefix(ends)), shortest - shared_start - 1)
    variants = []
    for text, group in runs.groupby("protocol", sort=False):
        seeds_of_game = group.groupby("env_id").seed.apply(seed_ranges)
        covered = "; ".join(
            f"{', '.join(games.index)} seed{'s' * (not seeds.isdigit())} {seeds}"
            for seeds, games in seeds_of_game.groupby(seeds_of_game, sort=False)
        )
        own = words[text][shared_start : len(words[text]) - shared_end]
        variants.append(f"{' '.join(own)} ({covered})")
    shared = words[texts[0]]
    return "Protocol: " + " ".join([*shared[:shared_start], " or ".join(variants), *shared[len(shared) - shared_end :]]) + "."


def game_title(env_id: str) -> str:
    """'MinAtar Breakout' or 'Atari Breakout-v5' (envpool's Atari ids carry a version)."""
    return f"{'Atari' if '-v' in env_id else 'MinAtar'} {env_id}"


@dataclass
class Commit:
    """Prints the commit a benchmark run starts at ("+changes" if code differs from it)."""

    out: str
    """the benchmark's output folder (its uncommitted results do not count as changes)"""


def run_commit(cfg: Commit):
    print(git_commit(cfg.out))


@dataclass
class Collect:
    """Reads one run's TensorBoard events into `{out}`. A single-player run (MinAtar, Atari): its evaluation curve
    into `{out}/{env_id}.csv` (one row per evaluation), the returns of its training episodes averaged over bins
    of 20k frames (with their mean wall-clock minute) into `{out}/{env_id}_train.csv`. A Breakthrough run: its
    win rates against the random player and MCTSBot (overall and per colour) into `{out}/win_rates.csv`. Both: a
    summary row (commit, machine, wall time) into `{out}/runs.csv`. Collecting a game and seed again replaces
    its rows. Only these CSVs are needed to redraw, so they are what gets committed, not the event files. A run
    stopped and resumed counts its time running: minutes and wall time leave out the pauses between its pieces."""

    run_dir: str
    """the run's directory, runs/{env_id}__{exp_name}__{seed}__{time}"""
    out: str
    """the benchmark's output folder (e.g. docs/benchmark/muzero_minatar)"""
    wall_time: float | None = None
    """the run's wall time in seconds (default: its time running, from its events)"""
    commit: str | None = None
    """the commit the run ran at (default: the newest one before the run's start time in its name)"""
    cpu_steal: float | None = None
    """share of the machine's CPU time the host gave to other virtual machines during the run (/proc/stat)"""


def piece_starts(run_dir: str) -> list[float]:
    """Wall times at which a run's pieces began: its first events file's first event, and that of each file a
    --resume opened (its writer marks it with a SessionLog START at the step it resumed from). The files a run
    opens at its checkpoints carry no such mark; an empty file (a piece stopped before its first event) adds nothing."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.compat.proto.event_pb2 import SessionLog

    files = []  # per events file: (its first event's wall time, whether a --resume opened it)
    for path in glob.glob(os.path.join(run_dir, "events.out.tfevents.*")):
        head = list(itertools.islice(EventFileLoader(path).Load(), 3))  # file version, file version at the step, START
        if head:
            files.append((head[0].wall_time, any(event.session_log.status == SessionLog.START for event in head)))
    files.sort()
    return [files[0][0]] + [wall_time for wall_time, resumed in files[1:] if resumed]


def running_minutes(events: EventAccumulator, starts: list[float]):
    """A function from an event's wall time to the minutes its run had been running then, and the number of pauses.
    `starts` are the wall times at which the run's pieces began (piece_starts): the time from the last event kept
    before a piece's start to that start is a pause, left out. Its events past the checkpoint the piece resumed from
    were purged from `events` (their work is redone), so that work is left out with the pause."""
    scalar_times = [e.wall_time for tag in events.Tags()["scalars"] for e in events.Scalars(tag)]
    times = np.unique([events.FirstEventTimestamp(), *starts, *scalar_times])
    gaps = np.diff(times)
    is_pause = np.isin(times[1:], starts[1:])  # the gap that ends at a later piece's start
    paused = np.concatenate([[0.0], np.cumsum(np.where(is_pause, gaps, 0.0))])  # before each time

    def minutes(wall_time: float) -> float:
        return (wall_time - times[0] - paused[np.searchsorted(times, wall_time, side="right") - 1]) / 60

    return minutes, int(is_pause.sum())


def run_collect(cfg: Collect):
    run_name = os.path.basename(os.path.normpath(cfg.run_dir))
    if len(run_name.split("__")) != 4 or not glob.glob(os.path.join(cfg.run_dir, "events.out.tfevents.*")):
        fail(f"--run-dir {cfg.run_dir}: not a run (runs/{{env_id}}__{{exp_name}}__{{seed}}__{{time}} with its event files)")
    env_id, exp_name, seed, start = run_name.split("__")
    seed = int(seed)
    events = EventAccumulator(cfg.run_dir, size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    minutes_at, pauses = running_minutes(events, piece_starts(cfg.run_dir))
    flags = run_flags(events)
    os.makedirs(cfg.out, exist_ok=True)
    summary = {"env_id": env_id, "seed": seed, "run_name": run_name, "exp_name": exp_name}
    if "charts/eval_win_rate_random" in events.Tags()["scalars"]:  # a board game
        columns = {}
        for opponent in OPPONENTS:
            for suffix in ("", "_as_black", "_as_white"):
                scalars = events.Scalars(f"charts/eval_win_rate_{opponent}{suffix}")
                columns[f"{opponent}{suffix}"] = [e.value for e in scalars]
                if not suffix:
                    steps, minutes = [e.step for e in scalars], [minutes_at(e.wall_time) for e in scalars]
        curve = pd.DataFrame({"env_id": env_id, "seed": seed, "step": steps, "minutes": minutes, **columns})
        replace_rows(os.path.join(cfg.out, "win_rates.csv"), curve, env_id, seed)
        last = curve.iloc[-1]
        summary |= {
            "plies": int(last.step),
            "win_rate_random": last.random,
            "win_rate_mcts": last.mcts,
            "eval_games": int(flags["eval_episodes"]),
            "eval_mcts_simulations": int(flags["eval_mcts_simulations"]),
            "board_size": int(flags["board_size"]),
            "updates": int(events.Scalars("charts/num_updates")[-1].value),
        }
        result = f"final win rate {last.random:.2f} against random, {last.mcts:.2f} against MCTSBot, at {int(last.step)} plies"
    else:
        returns = events.Scalars("charts/eval_episodic_return")
        lengths = events.Scalars("charts/eval_episodic_length")
        curve = pd.DataFrame(
            {
                "env_id": env_id,
                "seed": seed,
                "step": [e.step for e in returns],
                "eval_return": [e.value for e in returns],
                "eval_length": [e.value for e in lengths],
                "minutes": [minutes_at(e.wall_time) for e in returns],
            }
        )
        replace_rows(os.path.join(cfg.out, f"{env_id}.csv"), curve, env_id, seed)
        train = pd.DataFrame(
            [(e.step, e.value, minutes_at(e.wall_time)) for e in events.Scalars("charts/episodic_return")],
            columns=["step", "train_return", "minutes"],
        )
        binned = train.groupby((train.step - 1) // TRAIN_BIN).mean().reset_index(drop=True)  # x: mean frame of the bin
        binned["step"] = binned.step.round().astype(int)
        binned.insert(0, "seed", seed)
        binned.insert(0, "env_id", env_id)
        replace_rows(os.path.join(cfg.out, f"{env_id}_train.csv"), binned, env_id, seed)
        # empty (NaN) when no training episode ended in the last 50k frames: Freeway's episodes all last
        # 2500 steps, so the 32 default envs finish together every 80k frames
        last_train = train.train_return[train.step > returns[-1].step - 50_000]
        summary |= {
            "frames": returns[-1].step,
            "final_eval_return": returns[-1].value,
            "eval_episodes": int(flags["eval_episodes"]),
            # NaN for runs made before the scripts logged it
            "final_eval_standard_error": (
                events.Scalars("charts/eval_standard_error")[-1].value
                if "charts/eval_standard_error" in events.Tags()["scalars"]
                else np.nan
            ),
            "final_train_return_last_50k": last_train.mean(),
        }
        entropy_first, entropy_last, _ = series_means(events, "charts/policy_entropy")  # of the search policy
        summary["policy_entropy_first_fifth"] = entropy_first
        summary["policy_entropy_last_fifth"] = entropy_last
        summary["rewarding_share"] = series_means(events, "losses/rewarding_share")[2]  # of the unrolled steps trained
        result = f"final evaluation return {returns[-1].value:.2f} at {returns[-1].step} frames"
    summary["protocol"] = protocol(flags)
    last_event = max(e.wall_time for tag in events.Tags()["scalars"] for e in events.Scalars(tag))
    wall_minutes = cfg.wall_time / 60 if cfg.wall_time is not None else minutes_at(last_event)
    summary |= {
        "wall_time_min": round(wall_minutes, 1),
        "pauses": pauses,
        "cpu_steal": cfg.cpu_steal,
        "SPS": events.Scalars("charts/SPS")[-1].value,
        "commit": cfg.commit or commit_at(int(start)),
        "machine": machine_line(),
    }
    replace_rows(os.path.join(cfg.out, "runs.csv"), pd.DataFrame([summary]), env_id, seed)
    print(f"{run_name}: {result}, {wall_minutes:.1f} min" + (f" running, in {pauses + 1} pieces" if pauses else ""))


# Atari 100k's 26 games with the random and human scores every reference normalises by: the table of DeepMind's DQN
# Zoo (dqn_zoo/atari_data.py; Mnih et al. 2015, van Hasselt et al. 2016), as DER, SPR and EfficientZero use it.
ATARI_100K = {  # game: (random, human)
    "Alien": (227.8, 7127.7), "Amidar": (5.8, 1719.5), "Assault": (222.4, 742.0), "Asterix": (210.0, 8503.3),
    "BankHeist": (14.2, 753.1), "BattleZone": (2360.0, 37187.5), "Boxing": (0.1, 12.1), "Breakout": (1.7, 30.5),
    "ChopperCommand": (811.0, 7387.8), "CrazyClimber": (10780.5, 35829.4), "DemonAttack": (152.1, 1971.0),
    "Freeway": (0.0, 29.6), "Frostbite": (65.2, 4334.7), "Gopher": (257.6, 2412.5), "Hero": (1027.0, 30826.4),
    "Jamesbond": (29.0, 302.8), "Kangaroo": (52.0, 3035.0), "Krull": (1598.0, 2665.5), "KungFuMaster": (258.5, 22736.3),
    "MsPacman": (307.3, 6951.6), "Pong": (-20.7, 14.6), "PrivateEye": (24.9, 69571.3), "Qbert": (163.9, 13455.0),
    "RoadRunner": (11.5, 7845.0), "Seaquest": (68.4, 42054.7), "UpNDown": (533.4, 11693.2),
}  # fmt: skip


def human_normalised(env_id: str, score: float) -> float:
    """(score - random) / (human - random) of an envpool id's game (e.g. Breakout-v5) in ATARI_100K."""
    random_score, human_score = ATARI_100K[env_id.split("-v")[0]]
    return (score - random_score) / (human_score - random_score)


def atari_aggregates(runs: pd.DataFrame, reps: int = 50_000, seed: int = 0) -> dict:
    """The human-normalised median and mean (of the games' means over runs) and interquartile mean (of every run)
    over the games of `runs` (rows of runs.csv; every game at the same seeds), each as (point, 95% lower, 95% upper)
    from the stratified percentile bootstrap of rliable (Agarwal et al. 2021): each game's runs resampled apart,
    `reps` times. (scipy's bootstrap with a sample per game; rliable itself needs arch < 8, which pandas 3 breaks.)
    With one run a game, the interval is the point."""
    table = runs.pivot(index="seed", columns="env_id", values="final_eval_return")  # (seeds, games)
    if table.isna().to_numpy().any():
        fail(
            f"the aggregate needs every game at the same seeds (runs.csv: {runs.groupby('env_id').seed.apply(list).to_dict()})"
        )
    games = [np.array([human_normalised(env_id, score) for score in table[env_id]]) for env_id in table]
    aggregates = {  # of one normalised-score array per game, its runs along `axis` (scipy's bootstrap adds resamples)
        "median": lambda *runs, axis=-1: np.median([game.mean(axis=axis) for game in runs], axis=0),
        "mean": lambda *runs, axis=-1: np.mean([game.mean(axis=axis) for game in runs], axis=0),
        "IQM": lambda *runs, axis=-1: scipy.stats.trim_mean(np.concatenate(runs, axis=axis), 0.25, axis=axis),
    }
    result = {}
    for name, statistic in aggregates.items():
        point = float(statistic(*games))
        if len(table) == 1:
            result[name] = (point, point, point)
            continue
        interval = scipy.stats.bootstrap(
            games, statistic, n_resamples=reps, method="percentile", vectorized=True, random_state=seed
        ).confidence_interval
        result[name] = (point, float(interval.low), float(interval.high))
    return result


# The published agents' Atari 100k scores, game by game (raw returns after 100k agent steps): DER as SPR's per-game
# table gives it (Schwarzer et al. 2021); CURL, DrQ, SPR, MuZero (run at 100k by EfficientZero's authors) and
# EfficientZero as EfficientZero's Table 1 gives them (Ye et al. 2021). Normalised over the 26 games, each column gives
# its paper's mean and median (tests/test_tools.py checks this).
ATARI_REFERENCES = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "docs/benchmark/muzero_atari_multigpu/references.csv"
)


def above_random(runs: pd.DataFrame, random: pd.DataFrame) -> pd.Series:
    """Per game of `runs` (rows of runs.csv), whether the seeds' mean final evaluation is above the random player's
    (random.csv) by more than twice the standard error of the difference, sqrt(ours^2 + random's^2): ours from the
    final evaluations' own errors (sqrt of their sum of squares / seeds); NaN where an error is missing."""
    games = runs.groupby("env_id").agg(
        score=("final_eval_return", "mean"),
        error=("final_eval_standard_error", lambda errors: np.sqrt((errors**2).sum(min_count=len(errors))) / len(errors)),
    )
    random = random.set_index("env_id").reindex(games.index)
    margin = 2 * np.sqrt(games.error**2 + random.standard_error**2)
    return (games.score - random.random_return > margin).where(margin.notna())


DIAGNOSTICS = ("policy_entropy_first_fifth", "policy_entropy_last_fifth", "rewarding_share")  # columns of collect


def atari_summary(runs: pd.DataFrame, random: pd.DataFrame) -> list[str]:
    """Markdown lines of results.md: per game, ours (the seeds' mean), normalised, against our random player
    (above_random), what tells why (the search policy's entropy early and late, the share of rewarding steps in
    training: DIAGNOSTICS) and beside the published agents (ATARI_REFERENCES); then the aggregates
    (atari_aggregates) of ours and of each published agent over the same games."""
    references = read_table(ATARI_REFERENCES).set_index("game")
    agents = list(references.columns)
    games = runs.groupby("env_id").final_eval_return.mean()
    above = above_random(runs, random) if "final_eval_standard_error" in runs and len(random) else pd.Series(dtype=float)
    rows = [
        f"| game | ours | normalised | random player (ours) | above it | search entropy, first → last fifth | rewarding "
        f"steps | minutes | random | human | {' | '.join(agents)} |",
        "|---" * (10 + len(agents)) + "|",
    ]
    diagnostics = runs.reindex(columns=["env_id", *DIAGNOSTICS, "wall_time_min"]).groupby("env_id").mean()
    floor = random.set_index("env_id").random_return if len(random) else pd.Series(dtype=float)
    for env_id, score in games.items():
        game = env_id.split("-v")[0]
        verdict = {True: "yes", False: "no"}.get(above.get(env_id), "–")
        floor_cell = f"{floor[env_id]:.1f}" if env_id in floor else "–"
        entropy_first, entropy_last, rewarding_share, minutes = diagnostics.loc[env_id]
        entropy_cell = f"{entropy_first:.2f} → {entropy_last:.2f}" if pd.notna(entropy_last) else "–"
        share_cell = f"{rewarding_share:.1%}" if pd.notna(rewarding_share) else "–"  # (NaN: collected before it)
        cells = [f"{score:.1f}", f"{human_normalised(env_id, score):.3f}", floor_cell, verdict, entropy_cell, share_cell]
        cells.append(f"{minutes:.1f}" if pd.notna(minutes) else "–")
        cells += [f"{value:g}" for value in (*ATARI_100K[game], *references.loc[game])]
        rows.append(f"| {game} | {' | '.join(cells)} |")
    decided = above.dropna()
    rows += [
        "",
        f"Above our random player by more than twice the standard error of the difference: {int(decided.sum())} of "
        f"{len(decided)} games (the errors of the final evaluation's episodes and of random.csv's)."
        if len(decided)
        else "Above our random player: not decided (the runs' evaluations carry no standard error, or random.csv is missing).",
        "Search entropy: the mean entropy of the training search's policy over the first and the last fifth of the "
        "run; rewarding steps: the share of the unrolled steps trained on that carry a reward; minutes: a run's wall "
        "time (seeds' means).",
        "Normalised: (score - random) / (human - random), by the standard table (DQN Zoo). Published agents: DER as "
        "SPR's per-game table gives it (Schwarzer et al. 2021); CURL, DrQ, SPR, MuZero (run by EfficientZero's authors) "
        "and EfficientZero as EfficientZero's Table 1 gives them (Ye et al. 2021); they play without sticky actions.",
        protocol_line(runs),
        "",
        "| agent | games | runs a game | median | mean | IQM |",
        "|---|---|---|---|---|---|",
    ]
    every_game = set.intersection(*(set(seeds) for _, seeds in runs.groupby("env_id").seed))  # a second seed on some
    tables = {"MuZero (ours)": runs[runs.seed.isin(every_game)]}
    for agent in agents:  # one run a game: the points alone
        scores = references.loc[[env_id.split("-v")[0] for env_id in games.index], agent]
        tables[agent] = pd.DataFrame({"env_id": games.index, "seed": 1, "final_eval_return": scores.to_numpy()})
    for agent, table in tables.items():
        cells = " | ".join(
            f"{point:.3f}" + (f" ({low:.3f} – {high:.3f})" if low < high else "")
            for point, low, high in atari_aggregates(table).values()
        )
        rows.append(f"| {agent} | {len(games)} | {len(table) // len(games)} | {cells} |")  # (ours: the seeds every game has)
    return rows + [
        "",
        "Human-normalised, over the games of the table above (the published agents' too). Our 95% intervals: rliable's "
        "stratified bootstrap over runs, 50,000 resamples (none with one run a game).",
    ]


@dataclass
class Report:
    """Draws the curves and writes the tables the docs include from a folder of collected runs. Single-player
    games: `{out}/{env_id}.png` (evaluation and training return, mean and min-max over seeds, against
    environment frames), `{out}/results.md`, and `{out}/figures.md` (the pictures as a table). Breakthrough:
    `{out}/win_rates.png` (both win rates against plies and against wall-clock minutes, every seed) and
    `{out}/results.md`."""

    out: str
    """a folder written by collect"""
    figures: bool = True
    """draw the curves too (--no-figures rewrites the tables only)"""


def run_report(cfg: Report):
    if not any(os.path.isfile(os.path.join(cfg.out, name)) for name in ("runs.csv", "win_rates.csv")):
        fail(f"--out {cfg.out}: no runs.csv there (a folder that collect wrote)")
    if os.path.exists(os.path.join(cfg.out, "win_rates.csv")):
        return report_win_rates(cfg.out, cfg.figures)
    out = cfg.out
    runs = read_table(os.path.join(out, "runs.csv"))
    random_path = os.path.join(out, "random.csv")
    floor = read_table(random_path).set_index("env_id").random_return if os.path.exists(random_path) else {}
    steps = "agent steps" if runs.env_id.str.contains("-v").all() else "frames"  # Atari: --frame-skip frames a step
    atari_100k = all(env_id.split("-v")[0] in ATARI_100K and "-v" in env_id for env_id in runs.env_id)  # a game a row
    rows = [
        f"| game | seeds | final eval return (mean ± std) | per seed | random policy | {steps} | wall time per run (min) "
        "| CPU steal |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for env_id, group in runs.groupby("env_id"):
        if cfg.figures:
            plot_returns(out, env_id, runs_label(group), floor.get(env_id))
        if atari_100k:
            continue
        final = group.final_eval_return
        std = final.std(ddof=0)
        random_return = f"{floor[env_id]:.2f}" if env_id in floor else "–"
        rows.append(
            f"| {env_id} | {', '.join(map(str, group.seed))} | {final.mean():.2f} ± {std:.2f} | "
            f"{' / '.join(f'{r:.2f}' for r in final)} | {random_return} | {group.frames.max():,} | "
            f"{group.wall_time_min.min():.1f} – {group.wall_time_min.max():.1f} | "
            f"{100 * group.cpu_steal.min():.0f} – {100 * group.cpu_steal.max():.0f}% |"
        )
    episodes = " or ".join(map(str, sorted(runs.get("eval_episodes", pd.Series([8])).fillna(8).astype(int).unique())))
    machine = f"Machine: {'; '.join(runs.machine.unique())}. Commits: {', '.join(runs.commit.unique())}."
    if atari_100k:
        random = read_table(random_path) if os.path.exists(random_path) else pd.DataFrame()
        rows = [*atari_summary(runs, random), machine, protocol_line(runs)]  # (which states the evaluation's games)
        return write_results(out, runs, rows)
    rows += [
        "",
        machine,
        f"The final evaluation is the mean return of {episodes} episodes (`--eval-episodes`) with the evaluation "
        "planner; ± is the standard deviation over seeds (ddof=0). CPU steal: share of the CPU time the host gave to "
        "other machines during the run (/proc/stat).",
        protocol_line(runs),
    ]
    if os.path.exists(os.path.join(out, "ppo", "ppo.csv")):
        rows += ["", *ppo_comparison(out)]
    write_results(out, runs, rows)


def write_results(out: str, runs: pd.DataFrame, rows: list[str]):
    """`{out}/results.md` (the table rows) and `{out}/figures.md` (each game's curves, for the docs page)."""
    write_markdown(os.path.join(out, "results.md"), rows)
    # the curves as a markdown table of images, for the docs page (paths relative to docs/)
    games = sorted(runs.env_id.unique())
    where = os.path.relpath(out, "docs")
    with open(os.path.join(out, "figures.md"), "w") as f:
        f.write("\n\n".join(f"![{g}]({where}/{g}.png)" for g in games) + "\n")  # (each picture is titled)


def plot_returns(out: str, env_id: str, runs_title: str, floor: float | None):
    """`{out}/{env_id}.png`: each seed's evaluation returns (markers; the test planner) and binned training returns
    (dashed), in the seed's colour, and the seeds' mean evaluation (black), against frames (left) and wall-clock
    minutes (right); the random policy's return dotted."""
    evals = read_table(os.path.join(out, f"{env_id}.csv"))
    train = read_table(os.path.join(out, f"{env_id}_train.csv"))
    seeds = sorted(evals.seed.unique())
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    frames = "agent steps (--frame-skip frames each)" if "-v" in env_id else "environment frames"
    for ax, x, label in ((axes[0], "step", frames), (axes[1], "minutes", "wall-clock minutes (2-core CPU)")):
        drawn = seeds if x in evals and x in train else []  # runs collected before the minutes were: no time panel
        for seed, colour in zip(drawn, plt.rcParams["axes.prop_cycle"].by_key()["color"]):
            run = evals[evals.seed == seed]
            ax.plot(run[x], run.eval_return, "o-", color=colour, label=f"seed {seed}, evaluation")
            run = train[train.seed == seed]
            ax.plot(run[x], run.train_return, "--", color=colour, alpha=0.8, label=f"seed {seed}, training")
        if len(drawn) > 1:  # the mean over seeds at the steps every seed was evaluated at
            shared = evals.groupby("step").filter(lambda rows: rows.seed.nunique() == len(seeds))
            mean = shared.groupby("step", as_index=False)[list({x, "eval_return"} - {"step"})].mean()
            ax.plot(mean[x], mean.eval_return, "s-", color="black", lw=2, label="mean, evaluation")
        if floor is not None:
            ax.axhline(floor, color="grey", linestyle=":", label="random policy")
        ax.set(xlabel=label)
        ax.set_xlim(left=0)
    axes[0].set_ylabel("episodic return")
    if min(float(np.nanmin(line.get_ydata())) for line in axes[0].get_lines()) >= 0:
        axes[0].set_ylim(bottom=0)  # MinAtar's and most Atari games' returns are never negative (Pong's are)
    fig.suptitle(f"{game_title(env_id)}: {runs_title}, {seeds_label(len(seeds))}", fontsize="medium")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(seeds) + 1, fontsize="small")  # a column per seed
    fig.tight_layout(rect=(0, 0.13, 1, 1))
    fig.savefig(os.path.join(out, f"{env_id}.png"), dpi=100)
    plt.close(fig)


def at_most(curves, x: str, limit: float) -> pd.Series:
    """Each seed's last evaluation return at `x` (frames or minutes) <= limit, by seed (NaN: none that early)."""
    early = curves[curves[x] <= limit]
    return early.groupby("seed").eval_return.last().reindex(sorted(curves.seed.unique()))


def ppo_comparison(out: str) -> list[str]:
    """The runs in `out` beside the PPO baseline's (benchmark/ppo_minatar_gymnax.py, `{out}/ppo/ppo.csv`) at the
    same frames, the same wall-clock minutes and at its own budget: the rows of a markdown table, and `{out}/ppo.png`
    (every seed's evaluations of both against frames and against minutes, a column per game). Minutes are compared
    on one machine line: ours are those of `{out}/ppo/muzero/` (runs of the benchmark's command on PPO's machine),
    whose line must be PPO's."""
    ppo = read_table(os.path.join(out, "ppo", "ppo.csv"))
    runs = read_table(os.path.join(out, "runs.csv"))
    timed_dir = os.path.join(out, "ppo", "muzero")
    if not os.path.exists(os.path.join(timed_dir, "runs.csv")):
        fail(f"{timed_dir}/runs.csv: no runs of ours on PPO's machine (OUT={timed_dir} bash benchmark/muzero_minatar.sh)")
    timed = read_table(os.path.join(timed_dir, "runs.csv"))
    if set(timed.machine) != set(ppo.machine):
        fail(f"{timed_dir}/runs.csv ran on {sorted(set(timed.machine))}, PPO on {sorted(set(ppo.machine))}: one line")
    games = sorted(set(runs.env_id) & set(ppo.env_id))
    fig, axes = plt.subplots(2, len(games), figsize=(max(3.2 * len(games), 7), 6), squeeze=False)

    def cell(returns: pd.Series) -> str:  # one seed: its value; several: mean ± std
        if not returns.notna().all():
            return "–"
        return f"{returns.mean():.1f}" + (f" ± {returns.std(ddof=0):.1f}" if len(returns) > 1 else "")

    rows = [
        "| game | ours: frames, minutes | ours: final eval return | PPO at our frames | PPO at our minutes "
        "| PPO: frames, minutes | PPO: final eval return |",
        "|---|---|---|---|---|---|---|",
    ]
    for column, env_id in enumerate(games):
        ours = runs[runs.env_id == env_id]
        theirs = ppo[ppo.env_id == env_id]
        frames = ours.frames.max()
        minutes = timed[timed.env_id == env_id].wall_time_min.mean()  # NaN: not timed on PPO's machine
        final = theirs.groupby("seed").last()
        rows.append(
            f"| {env_id} | {frames:,}, {'–' if np.isnan(minutes) else f'{minutes:.1f}'} | {cell(ours.final_eval_return)} "
            f"| {cell(at_most(theirs, 'frames', frames))} | {cell(at_most(theirs, 'minutes', minutes))} "
            f"| {final.frames.max():,}, {final.minutes.mean():.1f} | {cell(final.eval_return)} |"
        )
        for row, (x, label) in enumerate((("frames", "environment frames"), ("minutes", "wall-clock minutes"))):
            ax = axes[row, column]
            path = os.path.join(out if x == "frames" else timed_dir, f"{env_id}.csv")
            curves = read_table(path) if os.path.exists(path) else pd.DataFrame(columns=["seed"])
            for i, (seed, run) in enumerate(curves.groupby("seed")):  # a marker per seed
                x_values = run.step if x == "frames" else run.minutes
                marker = "osD^v<>"[i % 7]
                ax.plot(x_values, run.eval_return, marker + "-", color="C0", ms=4, label=f"MuZero (ours), seed {seed}")
            for i, (seed, run) in enumerate(theirs.groupby("seed")):  # a line style per seed
                style = ["-", "--", ":", "-."][i % 4]
                ax.plot(run[x], run.eval_return, style, color="C1", label=f"PPO (gymnax), seed {seed}")
            ax.set(xscale="log", xlabel=f"{label} (log)", title=game_title(env_id) if row == 0 else None)
        axes[0, column].set_ylabel("evaluation return" if column == 0 else None)
    axes[1, 0].set_ylabel("evaluation return")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    ncol = min(len(labels), max(2, len(games)))
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize="small")
    fig.suptitle("MuZero and PPO, every seed (machines: results.md)", fontsize="medium")
    fig.tight_layout(rect=(0, 0.04 * (1 + (len(labels) - 1) // ncol) + 0.02, 1, 1))
    fig.savefig(os.path.join(out, "ppo.png"), dpi=100)
    plt.close(fig)
    return rows + [
        "",
        f"Protocol of PPO: benchmark/ppo_minatar_gymnax.py at gymnax-blines' MinAtar settings, seeds "
        f"{', '.join(map(str, sorted(ppo.seed.unique())))}, {int(ppo.eval_episodes.iloc[0])} episodes of its sampled "
        f"policy per evaluation; its minutes include compilation and leave out its evaluations. Commits "
        f"{', '.join(ppo.commit.unique())}; machine {'; '.join(ppo.machine.unique())}. Our minutes: seed "
        f"{', '.join(map(str, sorted(timed.seed.unique())))} of {', '.join(sorted(timed.env_id.unique()))} on that "
        f"machine (`ppo/muzero/`, commits "
        f"{', '.join(timed.commit.unique())}); our returns: the runs above. At our frames and minutes: "
        "each seed's last evaluation by then.",
    ]


def report_win_rates(out: str, figures: bool = True):
    runs = read_table(os.path.join(out, "runs.csv"))
    curves = read_table(os.path.join(out, "win_rates.csv"))
    if figures:
        board = int(runs.get("board_size", pd.Series([5])).fillna(5).iloc[0])  # (rows before the column: 5x5)
        targets = {
            "random": MATCH_TARGETS.get((board, "random")),
            "mcts": MATCH_TARGETS.get((board, f"mcts-{int(runs.eval_mcts_simulations.iloc[0])}")),
        }
        plot_win_rates(out, curves, board, targets)
    write_win_rate_tables(out, runs, curves)


def plot_win_rates(out: str, curves: pd.DataFrame, board: int, targets: dict):
    """`{out}/win_rates.png`: both win rates of every seed against plies and against wall-clock minutes, each
    opponent's target (MATCH_TARGETS; None: none) dotted."""
    seeds = sorted(curves.seed.unique())
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.4), sharey=True)
    for ax, x, label in (
        (axes[0], "step", "plies (environment steps, both players)"),
        (axes[1], "minutes", "wall-clock minutes (2-core CPU)"),
    ):
        for (opponent, name), colour in zip(OPPONENTS.items(), ("tab:blue", "tab:red")):
            for seed, marker, style in zip(seeds, "os^vD", ("-", "--", "-.", ":", "-")):
                run = curves[curves.seed == seed]
                ax.plot(
                    run[x],
                    run[opponent],
                    marker=marker,
                    linestyle=style,
                    color=colour,
                    markersize=3,
                    label=f"against {name}, seed {seed}",
                )
            if targets[opponent] is not None:
                ax.axhline(targets[opponent], color=colour, linestyle=":", linewidth=1)
        ax.set(xlabel=label, ylim=(-0.02, 1.02))
        ax.set_xlim(left=0)
    axes[0].xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v / 1000:g}k"))
    axes[0].set_ylabel("win rate (both colours)")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=len(seeds), fontsize="small")
    dotted = " and ".join(f"{target:g}" for target in targets.values() if target is not None)
    fig.suptitle(
        f"Breakthrough {board}x{board}: muzero_breakthrough.py, {seeds_label(len(seeds))}"
        + (f" (dotted: targets {dotted})" if dotted else ""),
        fontsize="medium",
    )
    fig.tight_layout(rect=(0, 0.04 + 0.045 * len(seeds), 1, 1))  # room for the legend below
    fig.savefig(os.path.join(out, "win_rates.png"), dpi=100)
    plt.close(fig)


def write_win_rate_tables(out: str, runs: pd.DataFrame, curves: pd.DataFrame):
    """`{out}/results.md`: the matches of each run's final model (if `matches.csv` is there), then a row per run."""
    matches_path = os.path.join(out, "matches.csv")
    matches = read_table(matches_path) if os.path.exists(matches_path) else pd.DataFrame(columns=["seed", "plies"])
    rows = []
    if len(matches):
        final = matches.merge(runs[["seed", "plies"]], on=["seed", "plies"])  # the final model of each run
        rows += [
            "| opponent | games per seed | win rate (mean ± std) | per seed | as black / as white | target |",
            "|---|---|---|---|---|---|",
        ]
        for opponent, match in sorted(final.groupby("opponent"), key=lambda group: group[0] != "random"):
            target = MATCH_TARGETS.get((int(match.board_size.iloc[0]), opponent))
            rows.append(
                f"| {opponent} | {', '.join(map(str, match.games.unique()))} | {match.win_rate.mean():.3f} ± "
                f"{match.win_rate.std(ddof=0):.3f} | "
                + ", ".join(f"{r.win_rate:.3f} (seed {r.seed})" for r in match.itertuples())
                + " | "
                + ", ".join(f"{r.as_black:.2f} / {r.as_white:.2f}" for r in match.itertuples())
                + f" | {'–' if target is None else f'{target:g}'} |"
            )
        rows += [
            "",
            f"Matches of each run's final model (`matches.csv`), with its evaluation planner. Commits: "
            f"{', '.join(final.commit.unique())}. Machine: {'; '.join(final.machine.unique())}.",
            "Protocol: the model plays with its run's evaluation planner (below), MCTSBot with UCT c 2, one random rollout "
            "per leaf and the solver on; colours alternate game by game.",
            "",
        ]
    rows += [
        "| seed | plies | updates | last evaluation vs random | vs MCTSBot | as black / as white vs MCTSBot | games per "
        "opponent | wall time (min) | CPU steal |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in runs.iterrows():
        final = curves[curves.seed == r.seed].iloc[-1]
        rows.append(
            f"| {r.seed} | {r.plies:,} | {r.updates:,} | {r.win_rate_random:.2f} | {r.win_rate_mcts:.2f} | "
            f"{final.mcts_as_black:.2f} / {final.mcts_as_white:.2f} | {r.eval_games} | {r.wall_time_min:.1f} | "
            f"{100 * r.cpu_steal:.0f}% |"
        )
    rows += [
        "",
        f"Machine: {'; '.join(runs.machine.unique())}. Commits: {', '.join(runs.commit.unique())}. "
        f"MCTSBot: {', '.join(map(str, runs.eval_mcts_simulations.unique()))} simulations, UCT c 2, one random "
        "rollout per leaf, solver on. The run's own evaluations: the games of its last one, half with each colour.",
        protocol_line(runs),
    ]
    write_markdown(os.path.join(out, "results.md"), rows)


@dataclass
class RandomReturns:
    """Mean return of a uniformly random policy over each game's legal actions, under the evaluation's rules
    (MinAtar: step limits, sticky actions off; Atari: whole games, sticky actions, --fire-steps): the floor a
    learning curve starts from (`{out}/random.csv`, drawn by `report`)."""

    out: str
    """where random.csv goes (e.g. docs/benchmark/muzero_minatar)"""
    env_ids: tuple[str, ...] = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")
    """MinAtar games, or envpool's Atari ids (e.g. Breakout-v5 Pong-v5)"""
    episodes: int = 200
    seed: int = 0
    sticky_action_prob: float | None = None
    """the games' sticky actions (default: the script's --sticky-action-prob; the Atari 100k references play with 0)"""


def known_game(env_id: str) -> bool:
    """A MinAtar game (muzero_minatar.py's --env-id) or an envpool Atari game (muzero_atari_multigpu.py's)."""
    if "-v" not in env_id:
        return env_id in importlib.import_module("muzero_minatar").MINATAR_NAMES
    atari = importlib.import_module("muzero_atari_multigpu")
    args = atari.Args(env_id=env_id)
    return all(ok(env_id) for names, ok, _ in atari.flag_rules(args) if names == "env_id")


def run_random_returns(cfg: RandomReturns):
    unknown = [env_id for env_id in cfg.env_ids if not known_game(env_id)]
    if unknown:
        fail(f"--env-ids {' '.join(unknown)}: neither MinAtar games (Breakout, ...) nor envpool Atari ids (Breakout-v5, ...)")
    if cfg.episodes <= 0:
        fail(f"--episodes must be positive (got {cfg.episodes})")
    if cfg.sticky_action_prob is not None and not 0 <= cfg.sticky_action_prob <= 1:
        fail(f"--sticky-action-prob must be in [0, 1] (got {cfg.sticky_action_prob})")
    check_folder("--out", cfg.out)

    def act(params, state, obs, is_first, legal, key):  # uniform over the legal actions
        return state, jax.random.categorical(key, jnp.where(jnp.asarray(legal), 0.0, -jnp.inf)), None, None, None

    rows = []
    for env_id in cfg.env_ids:
        script = importlib.import_module("muzero_atari_multigpu" if "-v" in env_id else "muzero_minatar")
        args = script.Args(env_id=env_id)
        if cfg.sticky_action_prob is not None:
            args = dataclasses.replace(args, sticky_action_prob=cfg.sticky_action_prob)
        returns, _, _ = script.evaluate_policy(act, None, args, cfg.episodes, cfg.seed)
        rows.append(
            {
                "env_id": env_id,
                "sticky_action_prob": args.sticky_action_prob,
                "episodes": cfg.episodes,
                "random_return": float(returns.mean()),
                "standard_error": float(returns.std() / np.sqrt(cfg.episodes)),
            }
        )
        print(rows[-1])
    os.makedirs(cfg.out, exist_ok=True)
    pd.DataFrame(rows).to_csv(os.path.join(cfg.out, "random.csv"), index=False)


def seed_curve(train):
    """The binned training returns of several seeds (a `{env_id}_train.csv`) as one curve: per 20k-frame bin,
    the mean, min and max over seeds of the return, and the mean frame and wall-clock minute, indexed by that
    frame. A bin's frame is the mean frame of its episodes, so it differs a little between seeds: the bins
    are matched by their index, not by their frame."""
    curve = train.groupby((train.step - 1) // TRAIN_BIN).agg(
        step=("step", "mean"),
        mean=("train_return", "mean"),
        min=("train_return", "min"),
        max=("train_return", "max"),
        minutes=("minutes", "mean"),
    )
    return curve.set_index("step")


def frames_to_reach(train, level: float) -> float:
    """First frame at which the mean over seeds of the binned training return is >= level (NaN: never)."""
    mean = seed_curve(train)["mean"]
    reached = mean.index[mean.values >= level]
    return float(reached[0]) if len(reached) else float("nan")


@dataclass
class Select:
    """Copies the rows of some games and seeds from one collected folder into another (the base script's
    benchmark runs as reanalyze ratio 0, whose computation is the same: a test checks it)."""

    runs: str
    """the collected folder to copy from"""
    games: tuple[str, ...]
    seeds: tuple[int, ...]
    out: str


def run_select(cfg: Select):
    os.makedirs(cfg.out, exist_ok=True)
    for name in ["runs.csv"] + [f"{g}{suffix}.csv" for g in cfg.games for suffix in ("", "_train")]:
        table = read_table(os.path.join(cfg.runs, name))
        chosen = table[table.env_id.isin(cfg.games) & table.seed.isin(cfg.seeds)]
        for (env_id, seed), rows in chosen.groupby(["env_id", "seed"]):
            replace_rows(os.path.join(cfg.out, name), rows, env_id, seed)


@dataclass
class Weights:
    """Mean absolute value of every parameter array of saved models, one column per model
    (`{out}/weights.csv`): how far training and the L2 term moved each layer from its initialisation
    (LayerNorm scales start at 1, the heads' last layers at 0)."""

    models: tuple[str, ...]
    """saved models (--save-model's `{exp_name}.muzero_model` or a checkpoint's models/step_*.muzero_model)"""
    labels: tuple[str, ...] = ()
    """a column name per model (default: the name of the folder that holds it)"""
    out: str = "."


def run_weights(cfg: Weights) -> pd.DataFrame:
    labels = cfg.labels or tuple(os.path.basename(os.path.dirname(os.path.abspath(m))) for m in cfg.models)
    if len(labels) != len(cfg.models):
        fail(f"--labels: {len(labels)} names for {len(cfg.models)} models")
    columns = {}
    for label, path in zip(labels, cfg.models):
        leaves = jax.tree_util.tree_leaves_with_path(load_model(path, "--models")[3]["params"])
        columns[label] = {jax.tree_util.keystr(k, simple=True, separator="/"): float(np.abs(v).mean()) for k, v in leaves}
    table = pd.DataFrame(columns).rename_axis("parameter")  # rows in the first model's order
    table.to_csv(os.path.join(cfg.out, "weights.csv"), float_format="%.4g")
    print(table.to_string(float_format="%.4f"))
    return table


@dataclass
class Compare:
    """Several collected folders (one per configuration) side by side: per game, the training return against
    frames and against wall-clock minutes (`{out}/{env_id}_compare.png`), a table of final returns, wall
    time and the frames each configuration's training return needed to reach given levels (`{out}/compare.md`),
    over the seeds every configuration has run on the game; and every run with its configuration
    (`{out}/experiment.csv`)."""

    runs: tuple[str, ...]
    """folders written by collect, one per configuration (the folder's name labels it)"""
    out: str


def minutes_cell(group: pd.DataFrame) -> str:
    """Mean wall time of a row's runs, and how many CPU lines they ran on when more than one."""
    lines = group.machine.nunique()
    return f"{group.wall_time_min.mean():.1f}" + (f" ({lines} lines)" if lines > 1 else "")


def run_compare(cfg: Compare):
    folders, out = cfg.runs, cfg.out
    missing = [folder for folder in folders if not os.path.isfile(os.path.join(folder, "runs.csv"))]
    if missing:
        fail(f"--runs {' '.join(missing)}: no runs.csv there (`collect` writes it)", MissingFile)
    check_folder("--out", out)
    os.makedirs(out, exist_ok=True)
    labels = [os.path.basename(os.path.normpath(f)) for f in folders]
    runs = {label: read_table(os.path.join(f, "runs.csv")) for label, f in zip(labels, folders)}
    table = pd.concat([r.assign(setting=label) for label, r in runs.items()])
    table[["env_id", "seed", "setting", *(c for c in table if c not in ("env_id", "seed", "setting"))]].to_csv(
        os.path.join(out, "experiment.csv"), index=False
    )
    games = sorted(set(table.env_id))  # a game some configuration has not run has no paired seed: skipped below
    tabled = []  # the runs the table holds: the footer names their machines and commits only
    rows = [
        "| game | configuration | seeds | final eval return: mean (per seed) | training return, last 50k frames | "
        "minutes a run | frames to 25 / 50 / 75% of the best (levels) |",
        "|---|---|---|---|---|---|---|",
    ]
    for env_id in games:
        # paired: only the seeds that every configuration has run on this game
        seeds = sorted(set.intersection(*(set(r.seed[r.env_id == env_id]) for r in runs.values())))
        if not seeds:
            continue
        trains = {label: read_table(os.path.join(f, f"{env_id}_train.csv")) for label, f in zip(labels, folders)}
        trains = {label: t[t.seed.isin(seeds)] for label, t in trains.items()}
        # the best configuration's training return at its last bin (Freeway: no episode ends in the last 50k)
        best = max(seed_curve(t)["mean"].iloc[-1] for t in trains.values())
        levels = [best * q for q in (0.25, 0.5, 0.75)]
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), sharey=True)
        for label in labels:
            group, train = runs[label][(runs[label].env_id == env_id) & runs[label].seed.isin(seeds)], trains[label]
            tabled.append(group)
            curve = seed_curve(train)
            (line,) = axes[0].plot(curve.index, curve["mean"], label=f"{label} ({seeds_label(train.seed.nunique())})")
            # wall-clock minutes since the run's first event, mean over seeds
            axes[1].plot(curve.minutes, curve["mean"], color=line.get_color(), label=label)
            per_seed = " / ".join(f"{r:.2f}" for r in group.sort_values("seed").final_eval_return)
            reach = " / ".join(f"{f / 1000:.0f}k" if f == f else "never" for f in (frames_to_reach(train, v) for v in levels))
            rows.append(
                f"| {env_id} | {label} | {', '.join(map(str, sorted(group.seed)))} | "
                f"{group.final_eval_return.mean():.2f} ({per_seed}) | "
                f"{group.final_train_return_last_50k.mean():.2f} | "
                f"{minutes_cell(group)} | {reach} ({' / '.join(f'{v:.1f}' for v in levels)}) |"
            )
        axes[0].set(title=f"{game_title(env_id)}: training return", xlabel="environment frames", ylabel="return")
        axes[1].set(title="against wall time", xlabel="minutes since the start of the run (mean over seeds)")
        axes[0].legend(fontsize="small")
        fig.tight_layout()
        fig.savefig(os.path.join(out, f"{env_id}_compare.png"), dpi=100)
        plt.close(fig)
    rows += [
        "",
        "Each game's rows hold the seeds that every configuration has run on it (experiment.csv lists all runs). "
        "Training return: mean over seeds of training episodes, in bins of 20k frames (training planner, "
        "with exploration noise). Frames to 25 / 50 / 75% of the best: the first bin whose mean is at or above "
        "that share of the best configuration's last-bin mean (the levels in brackets; never: not reached). Minutes a "
        "run: the mean of the row's runs, each on 2 cores; '(n lines)' where they ran on n CPU lines. Machine: "
        + "; ".join(sorted(set(m for group in tabled for m in group.machine)))
        + ". Commits: "
        + ", ".join(sorted(set(c for group in tabled for c in group.commit)))
        + ".",
    ]
    write_markdown(os.path.join(out, "compare.md"), rows)


@dataclass
class Diagnostics:
    """The means of runs' logged series per bin of frames, side by side: every scalar tag but the per-episode ones
    (losses/, charts/ such as root_value and policy_entropy, reanalyze/, stats/), one row per run, tag and bin, in
    `{out}/diagnostics.csv` (a run's rows are replaced when it is read again). What a page says of a run's losses,
    entropies or values is read from there."""

    run_dirs: tuple[str, ...]
    """run directories, runs/{env_id}__{exp_name}__{seed}__{time}"""
    out: str
    """the folder of diagnostics.csv"""
    bin_frames: int = 50_000
    """width of a bin in environment frames"""


PER_EPISODE_TAGS = ("charts/episodic_return", "charts/episodic_length")  # in {env_id}_train.csv, binned by collect


def run_diagnostics(cfg: Diagnostics):
    rows = []
    for run_dir in cfg.run_dirs:
        run_name = os.path.basename(os.path.normpath(run_dir))
        if len(run_name.split("__")) != 4 or not glob.glob(os.path.join(run_dir, "events.out.tfevents.*")):
            fail(f"--run-dirs {run_dir}: not a run (runs/{{env_id}}__{{exp_name}}__{{seed}}__{{time}} with its event files)")
        env_id, exp_name, seed, _ = run_name.split("__")
        events = EventAccumulator(run_dir, size_guidance={"scalars": 0})
        events.Reload()
        for tag in sorted(set(events.Tags()["scalars"]) - set(PER_EPISODE_TAGS)):
            series = pd.DataFrame([(e.step, e.value) for e in events.Scalars(tag)], columns=["step", "value"])
            means = series.groupby((series.step - 1) // cfg.bin_frames).value.mean()  # bin b: frames b*w+1 .. (b+1)*w
            run = (env_id, exp_name, int(seed), run_name, tag)
            rows += [(*run, b * cfg.bin_frames, (b + 1) * cfg.bin_frames, mean) for b, mean in means.items()]
    columns = ["env_id", "exp_name", "seed", "run_name", "metric", "frames_from", "frames_to", "mean"]
    table, path = pd.DataFrame(rows, columns=columns), os.path.join(cfg.out, "diagnostics.csv")
    if os.path.exists(path):
        old = read_table(path)
        table = pd.concat([old[~old.run_name.isin(table.run_name)], table])
    os.makedirs(cfg.out, exist_ok=True)
    table.sort_values(["env_id", "exp_name", "seed", "metric", "frames_from"]).to_csv(path, index=False, float_format="%.6g")


@dataclass
class CpuLines:
    """Records that the golden runs (`python -m pytest tests -k golden`) were checked on this machine's CPU line:
    one row per script in `{out}/cpu_lines.csv` (machine line, identical yes/no, commit, note), then the
    table `{out}/cpu_lines.md` that the reproducibility page shows. Without --scripts it only redraws the table."""

    out: str
    """where cpu_lines.csv and cpu_lines.md go (docs/benchmark/reproducibility)"""
    scripts: tuple[str, ...] = ()
    """the scripts whose golden runs were checked here"""
    identical: Literal["yes", "no"] = "yes"
    """whether a fresh run gave the committed golden values, value for value"""
    note: str = ""
    """how it was checked, or which series differ"""
    machine: str = ""
    """the machine line, if not this machine's (e.g. an emulated CPU)"""


def run_cpu_lines(cfg: CpuLines):
    path = os.path.join(cfg.out, "cpu_lines.csv")
    table = (
        read_table(path)
        if os.path.exists(path)
        else pd.DataFrame(columns=["script", "machine", "identical", "commit", "date", "note"])
    )
    rows = pd.DataFrame(
        {
            "script": list(cfg.scripts),
            "machine": cfg.machine or machine_line(),
            "identical": cfg.identical,
            "commit": git_commit(cfg.out),
            "date": pd.Timestamp.now(tz="UTC").strftime("%Y-%m-%d"),
            "note": cfg.note,
        }
    )
    table = pd.concat([table, rows], ignore_index=True) if len(rows) else table
    os.makedirs(cfg.out, exist_ok=True)
    table.to_csv(path, index=False)
    write_markdown(
        os.path.join(cfg.out, "cpu_lines.md"),
        ["| script | machine | identical | commit | date | how |", "|---|---|---|---|---|---|"]
        + [
            f"| `{r.script}` | {r.machine} | {r.identical} | {r.commit} | {r.date} | {r.note} |"
            for r in table.fillna("").itertuples()
        ],
    )


TOOLS = {
    "ladder": (Ladder, run_ladder),
    "match": (Match, run_match),
    "episode": (Episode, run_episode),
    "tree": (Tree, run_tree),
    "audit": (Audit, run_audit),
    "tsne": (Tsne, run_tsne),
    "budget": (Budget, run_budget),
    "commit": (Commit, run_commit),
    "collect": (Collect, run_collect),
    "report": (Report, run_report),
    "random-returns": (RandomReturns, run_random_returns),
    "select": (Select, run_select),
    "compare": (Compare, run_compare),
    "weights": (Weights, run_weights),
    "diagnostics": (Diagnostics, run_diagnostics),
    "cpu-lines": (CpuLines, run_cpu_lines),
}


def main(cfg):
    """Runs the tool of `cfg`; bad input ends it with the message and exit status 2 (as argparse), nothing written."""
    try:
        if hasattr(cfg, "seed"):
            check_seed(cfg.seed)
        if getattr(cfg, "out", ""):  # before any work: a file path's folder (episode, tree) or the output folder
            folder = os.path.dirname(cfg.out) or "." if isinstance(cfg, (Episode, Tree)) else cfg.out
            check_folder(f"--out {cfg.out}", folder)
        next(run for cls, run in TOOLS.values() if isinstance(cfg, cls))(cfg)
    except BadInput as e:
        print(f"{os.path.basename(sys.argv[0])}: error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(tyro.extras.subcommand_cli_from_dict({name: cls for name, (cls, _) in TOOLS.items()}))
