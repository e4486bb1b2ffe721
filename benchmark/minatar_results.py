"""Results step of benchmark/muzero_minatar.sh.

    python benchmark/minatar_results.py collect --run-dir runs/Breakout__muzero_minatar__1__... --wall-time 2590
    python benchmark/minatar_results.py report
    python benchmark/minatar_results.py random     # once: the random policy's returns, for the table
    python benchmark/minatar_results.py commit     # the commit a run starts at (printed)
    python benchmark/minatar_results.py compare --out docs/benchmark/muzero_minatar_reanalyze \
        --runs docs/benchmark/muzero_minatar_reanalyze/ratio_*   # variants side by side
    python benchmark/minatar_results.py select --runs docs/benchmark/muzero_minatar --games Breakout \
        --seeds 1 2 --out docs/benchmark/muzero_minatar_reanalyze/ratio_0   # some collected runs, copied

`collect` reads one run's TensorBoard events (tensorboard's EventAccumulator) and stores its
evaluation curve in `{out}/{env_id}.csv` (one row per evaluation; a rerun of the same game and
seed replaces the old rows) and one summary row in `{out}/runs.csv` (commit, machine, wall time).
It also stores the returns of training episodes, averaged over bins of 20k frames (with their mean wall-clock minute), in
`{out}/{env_id}_train.csv`. `report` draws `{out}/{env_id}.png` (both curves: mean and min-max over
seeds against environment frames; MinAtar has no frame skip, so frames = environment steps) and
writes the table `{out}/results.md` and the figures' table `{out}/figures.md` that the docs include.
`compare` puts several collected folders (one per configuration) side by side: per game, the training
return against frames and against wall-clock minutes, and a table of final returns, wall time and
the frames each configuration's training return needed to reach given levels.
`select` copies the rows of some games and seeds from one collected folder into another (the base
script's benchmark runs as reanalyze ratio 0, whose computation is the same: a test checks it).
Only the CSVs are needed to redraw, so they are what gets committed, not the event files.
"""
import argparse
import os
import platform
import subprocess
import sys

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pandas as pd
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def machine_line() -> str:
    cpu = platform.processor()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return f"{os.cpu_count()} cores, {cpu}, JAX {jax.__version__}, {jax.default_backend().upper()}"


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def git_commit(out: str) -> str:
    """The checked-out commit, with "+changes" if anything but the benchmark's own output folder `out`
    differs from it (a run's uncommitted results must not mark the next run's code as changed; untracked
    files, such as a worktree's link to a virtual environment, do not count)."""
    def git(*args):
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=REPO, check=True).stdout.strip()
    out = os.path.relpath(os.path.abspath(out), REPO)
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", *([] if out.startswith("..") else [f":(exclude){out}"]))
    return git("rev-parse", "--short", "HEAD") + ("+changes" if changed else "")


def commit_at(unix_time: int) -> str:
    """The newest commit made before `unix_time` (a run whose start commit was not recorded)."""
    return subprocess.run(["git", "rev-list", "-1", "--abbrev-commit", f"--before={unix_time}", "HEAD"],
                          capture_output=True, text=True, cwd=REPO).stdout.strip() or "unknown"


TRAIN_BIN = 20_000  # frames per point of the training-return curve


def replace_rows(path: str, new: pd.DataFrame, env_id: str, seed: int):
    if os.path.exists(path):
        old = pd.read_csv(path)
        old = old[~((old.env_id == env_id) & (old.seed == seed))]
        new = pd.concat([old, new], ignore_index=True)
    new.sort_values(["env_id", "seed"] + (["step"] if "step" in new else []), kind="stable").to_csv(path, index=False)


def run_flag(events: EventAccumulator, name: str) -> str:
    """A flag's value from the hyperparameters table the script logs as text at the start of a run."""
    (tag,) = [t for t in events.Tags()["tensors"] if t.startswith("hyperparameters")]
    text = events.Tensors(tag)[0].tensor_proto.string_val[0].decode()
    return next(line.split("|")[2] for line in text.splitlines() if line.startswith(f"|{name}|"))


def collect(run_dir: str, wall_time: float, out: str, commit: str | None, cpu_steal: float | None):
    run_name = os.path.basename(os.path.normpath(run_dir))
    env_id, exp_name, seed, start = run_name.split("__")
    seed = int(seed)
    events = EventAccumulator(run_dir, size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    returns = events.Scalars("charts/eval_episodic_return")
    lengths = events.Scalars("charts/eval_episodic_length")
    curve = pd.DataFrame({
        "env_id": env_id, "seed": seed, "step": [e.step for e in returns],
        "eval_return": [e.value for e in returns], "eval_length": [e.value for e in lengths],
        "minutes": [(e.wall_time - events.FirstEventTimestamp()) / 60 for e in returns],
    })
    os.makedirs(out, exist_ok=True)
    replace_rows(os.path.join(out, f"{env_id}.csv"), curve, env_id, seed)
    train = pd.DataFrame([(e.step, e.value, (e.wall_time - events.FirstEventTimestamp()) / 60)
                          for e in events.Scalars("charts/episodic_return")], columns=["step", "train_return", "minutes"])
    binned = train.groupby((train.step - 1) // TRAIN_BIN).mean().reset_index(drop=True)  # x: mean frame of the bin
    binned["step"] = binned.step.round().astype(int)
    binned.insert(0, "seed", seed)
    binned.insert(0, "env_id", env_id)
    replace_rows(os.path.join(out, f"{env_id}_train.csv"), binned, env_id, seed)
    # empty (NaN) when no training episode ended in the last 50k frames: Freeway's episodes all last
    # 2500 steps, so the 32 default envs finish together every 80k frames
    last_train = train.train_return[train.step > returns[-1].step - 50_000]
    summary = pd.DataFrame([{
        "env_id": env_id, "seed": seed, "run_name": run_name, "exp_name": exp_name, "frames": returns[-1].step,
        "final_eval_return": returns[-1].value, "eval_episodes": int(run_flag(events, "eval_episodes")),
        "final_train_return_last_50k": last_train.mean(),
        "wall_time_min": round(wall_time / 60, 1), "cpu_steal": cpu_steal, "SPS": events.Scalars("charts/SPS")[-1].value,
        "commit": commit or commit_at(int(start)), "machine": machine_line(),
    }])
    replace_rows(os.path.join(out, "runs.csv"), summary, env_id, seed)
    print(f"{run_name}: final evaluation return {returns[-1].value:.2f} at {returns[-1].step} frames, "
          f"{wall_time / 60:.1f} min")


def random_returns(out: str, episodes: int = 200, seed: int = 0):
    """Mean return of a uniformly random policy over each game's minimal action set, with the
    evaluation's step limits and sticky actions off: the floor a learning curve starts from."""
    sys.path.insert(0, REPO)
    import muzero_minatar as m

    def act(params, state, obs, is_first, legal, key):  # uniform over the legal actions
        return state, jax.random.categorical(key, jnp.where(jnp.asarray(legal), 0.0, -jnp.inf)), None, None

    rows = []
    for env_id in ["Asterix", "Breakout", "Freeway", "SpaceInvaders"]:
        returns, _, _ = m.evaluate_policy(act, None, m.Args(env_id=env_id), episodes, seed)
        rows.append({"env_id": env_id, "episodes": episodes, "random_return": float(returns.mean()),
                     "standard_error": float(returns.std() / np.sqrt(episodes))})
        print(rows[-1])
    os.makedirs(out, exist_ok=True)
    pd.DataFrame(rows).to_csv(os.path.join(out, "random.csv"), index=False)


def game_title(env_id: str) -> str:
    """'MinAtar Breakout' or 'Atari Breakout-v5' (envpool's Atari ids carry a version)."""
    return f"{'Atari' if '-v' in env_id else 'MinAtar'} {env_id}"


def report(out: str):
    runs = pd.read_csv(os.path.join(out, "runs.csv"))
    random_path = os.path.join(out, "random.csv")
    floor = pd.read_csv(random_path).set_index("env_id").random_return if os.path.exists(random_path) else {}
    rows = ["| game | seeds | final eval return (mean ± std) | random policy | frames | wall time per run (min) "
            "| CPU steal |", "|---|---|---|---|---|---|---|"]
    for env_id, group in runs.groupby("env_id"):
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for name, column, style in ((f"{env_id}.csv", "eval_return", "o-"), (f"{env_id}_train.csv", "train_return", "--")):
            curve = pd.read_csv(os.path.join(out, name))
            stats = curve.groupby("step")[column].agg(["mean", "min", "max"])
            label = "evaluation (test planner)" if column == "eval_return" else "training episodes"
            n = curve.seed.nunique()
            line, = ax.plot(stats.index, stats["mean"], style, label=f"{label}, {n} seed{'s' * (n > 1)}")
            ax.fill_between(stats.index, stats["min"], stats["max"], alpha=0.2, color=line.get_color())
        ax.set(title=f"{game_title(env_id)}: {group.exp_name.iloc[0]}.py", xlabel="environment frames",
               ylabel="episodic return")
        if env_id in floor:
            ax.axhline(floor[env_id], color="grey", linestyle=":", label="random policy")
        ax.set_xlim(left=0)
        if min(float(np.nanmin(line.get_ydata())) for line in ax.get_lines()) >= 0:
            ax.set_ylim(bottom=0)  # MinAtar's and most Atari games' returns are never negative (Pong's are)
        ax.legend(loc="upper left", fontsize="small")
        fig.tight_layout()
        fig.savefig(os.path.join(out, f"{env_id}.png"), dpi=100)
        plt.close(fig)
        final = group.final_eval_return
        std = final.std(ddof=0)
        rows.append(f"| {env_id} | {', '.join(map(str, group.seed))} | {final.mean():.2f} ± {std:.2f} | "
                    f"{floor.get(env_id, float('nan')):.2f} | {group.frames.max():,} | {group.wall_time_min.min():.1f} – {group.wall_time_min.max():.1f} | "
                    f"{100 * group.cpu_steal.min():.0f} – {100 * group.cpu_steal.max():.0f}% |")
    rows += ["", f"Machine: {'; '.join(runs.machine.unique())}. Commits: {', '.join(runs.commit.unique())}.",
             "The final evaluation is the mean return of "
             + " or ".join(map(str, sorted(runs.get("eval_episodes", pd.Series([8])).fillna(8).astype(int).unique())))
             + " episodes (`--eval-episodes`; 8 before it became 32) with the evaluation planner; ± is the "
             "standard deviation over seeds (population, ddof=0). CPU steal: share of the machine's CPU "
             "time that the virtual machine's host gave to others during the run (from /proc/stat), the "
             "reason wall times vary."]
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(rows) + "\n")
    print("\n".join(rows))
    # the curves as a markdown table of images, for the docs page (paths relative to docs/)
    games = sorted(runs.env_id.unique())
    where = os.path.relpath(out, "docs")
    cells = [f"![{g}]({where}/{g}.png)" for g in games] + [""] * (len(games) % 2)
    figures = ["| | |", "|---|---|"] + [f"| {a} | {b} |" for a, b in zip(cells[::2], cells[1::2])]
    with open(os.path.join(out, "figures.md"), "w") as f:
        f.write("\n".join(figures) + "\n")


def frames_to_reach(train: pd.DataFrame, level: float) -> float:
    """First frame at which the mean over seeds of the binned training return is >= level (NaN: never)."""
    mean = train.groupby("step").train_return.mean()
    reached = mean.index[mean.values >= level]
    return float(reached[0]) if len(reached) else float("nan")


def select(folder: str, games: list[str], seeds: list[int], out: str):
    os.makedirs(out, exist_ok=True)
    for name in ["runs.csv"] + [f"{g}{suffix}.csv" for g in games for suffix in ("", "_train")]:
        table = pd.read_csv(os.path.join(folder, name))
        for (env_id, seed), rows in table[table.env_id.isin(games) & table.seed.isin(seeds)].groupby(["env_id", "seed"]):
            replace_rows(os.path.join(out, name), rows, env_id, seed)


def compare(folders: list[str], out: str):
    labels = [os.path.basename(os.path.normpath(f)) for f in folders]
    runs = {label: pd.read_csv(os.path.join(f, "runs.csv")) for label, f in zip(labels, folders)}
    games = sorted(set.intersection(*(set(r.env_id) for r in runs.values())))
    rows = ["| game | configuration | seeds | final eval return (mean) | training return, last 50k frames | "
            "wall time per run (min) | frames to reach a training return of 25% / 50% / 75% of the best last one |",
            "|---|---|---|---|---|---|---|"]
    for env_id in games:
        trains = {label: pd.read_csv(os.path.join(f, f"{env_id}_train.csv")) for label, f in zip(labels, folders)}
        # the best configuration's training return at its last bin (Freeway: no episode ends in the last 50k)
        best = max(t.groupby("step").train_return.mean().iloc[-1] for t in trains.values())
        levels = [best * q for q in (0.25, 0.5, 0.75)]
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), sharey=True)
        for label, folder in zip(labels, folders):
            group, train = runs[label][runs[label].env_id == env_id], trains[label]
            mean = train.groupby("step").train_return.mean()
            line, = axes[0].plot(mean.index, mean.values, label=f"{label} ({train.seed.nunique()} seeds)")
            minutes = train.groupby("step").minutes.mean()  # wall-clock minutes since the run's first event
            axes[1].plot(minutes.values, mean.values, color=line.get_color(), label=label)
            reach = " / ".join(f"{f / 1000:.0f}k" if f == f else "never" for f in (frames_to_reach(train, v) for v in levels))
            rows.append(f"| {env_id} | {label} | {', '.join(map(str, sorted(group.seed)))} | "
                        f"{group.final_eval_return.mean():.2f} | {group.final_train_return_last_50k.mean():.2f} | "
                        f"{group.wall_time_min.mean():.1f} | {reach} (levels {' / '.join(f'{v:.1f}' for v in levels)}) |")
        axes[0].set(title=f"{game_title(env_id)}: training return", xlabel="environment frames", ylabel="return")
        axes[1].set(title="against wall time", xlabel="minutes since the start of the run (mean over seeds)")
        axes[0].legend(fontsize="small")
        fig.tight_layout()
        fig.savefig(os.path.join(out, f"{env_id}_compare.png"), dpi=100)
        plt.close(fig)
    rows += ["", "Training return: mean over seeds of training episodes, in bins of 20k frames (training planner, "
             "with exploration noise). Frames to reach: the first bin whose mean is at or above the level (nan: "
             "never). Machine: " + "; ".join(sorted(set(m for r in runs.values() for m in r.machine))) + ". Commits: "
             + ", ".join(sorted(set(c for r in runs.values() for c in r.commit))) + "."]
    with open(os.path.join(out, "compare.md"), "w") as f:
        f.write("\n".join(rows) + "\n")
    print("\n".join(rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["commit", "collect", "report", "random", "compare", "select"])
    parser.add_argument("--run-dir", help="collect: the run's directory under runs/")
    parser.add_argument("--wall-time", type=float, help="collect: the run's wall time in seconds")
    parser.add_argument("--commit", help="collect: the commit the run ran at (default: the newest one before "
                        "the run's start time in its name)")
    parser.add_argument("--cpu-steal", type=float, help="collect: share of the machine's CPU time the host "
                        "gave to other virtual machines during the run (/proc/stat)")
    parser.add_argument("--runs", nargs="+", help="compare: folders written by collect, one per configuration; "
                        "select: the one folder to copy from")
    parser.add_argument("--games", nargs="+", help="select: the games to copy")
    parser.add_argument("--seeds", nargs="+", type=int, help="select: the seeds to copy")
    parser.add_argument("--out", default="docs/benchmark/muzero_minatar")
    a = parser.parse_args()
    if a.step == "commit":
        print(git_commit(a.out))
    elif a.step == "collect":
        if a.run_dir is None or a.wall_time is None:
            parser.error("collect needs --run-dir and --wall-time")
        collect(a.run_dir, a.wall_time, a.out, a.commit, a.cpu_steal)
    elif a.step == "random":
        random_returns(a.out)
    elif a.step == "compare":
        compare(a.runs, a.out)
    elif a.step == "select":
        if not a.runs or len(a.runs) != 1 or not a.games or not a.seeds:
            parser.error("select needs one --runs folder, --games and --seeds")
        select(a.runs[0], a.games, a.seeds, a.out)
    else:
        report(a.out)
