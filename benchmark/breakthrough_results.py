"""Results step of benchmark/muzero_breakthrough.sh.

    python benchmark/breakthrough_results.py collect --run-dir runs/breakthrough__muzero_breakthrough__1__... --wall-time 3500
    python benchmark/breakthrough_results.py report

`collect` reads one run's TensorBoard events and stores its evaluation curves (win rate against the
uniform-random player and against MCTSBot, overall and per colour, with the wall-clock minute of each
evaluation) in `{out}/win_rates.csv`, and one summary row in `{out}/runs.csv` (commit, machine, wall
time). `report` draws `{out}/win_rates.png` (both win rates against plies and against wall-clock
minutes, every seed) and writes the table `{out}/results.md` that the docs include. The commit,
machine and row-replacing helpers are minatar_results.py's.
"""
import argparse
import os

import matplotlib
import pandas as pd
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from minatar_results import commit_at, git_commit, machine_line, replace_rows, run_flag

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

OPPONENTS = {"random": "uniform random", "mcts": "MCTSBot"}
TARGETS = {"random": 0.95, "mcts": 0.50}  # issue 12: the win rates the default configuration must reach


def collect(run_dir: str, wall_time: float, out: str, commit: str | None, cpu_steal: float | None):
    run_name = os.path.basename(os.path.normpath(run_dir))
    env_id, exp_name, seed, start = run_name.split("__")
    seed = int(seed)
    events = EventAccumulator(run_dir, size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    t0 = events.FirstEventTimestamp()
    columns = {}
    for opponent in OPPONENTS:
        for suffix in ("", "_as_black", "_as_white"):
            scalars = events.Scalars(f"charts/eval_win_rate_{opponent}{suffix}")
            columns[f"{opponent}{suffix}"] = [e.value for e in scalars]
            if not suffix:
                steps, minutes = [e.step for e in scalars], [(e.wall_time - t0) / 60 for e in scalars]
    curve = pd.DataFrame({"env_id": env_id, "seed": seed, "step": steps, "minutes": minutes, **columns})
    os.makedirs(out, exist_ok=True)
    replace_rows(os.path.join(out, "win_rates.csv"), curve, env_id, seed)
    last = curve.iloc[-1]
    summary = pd.DataFrame([{
        "env_id": env_id, "seed": seed, "run_name": run_name, "exp_name": exp_name, "plies": int(last.step),
        "win_rate_random": last.random, "win_rate_mcts": last.mcts,
        "eval_games": int(run_flag(events, "eval_games")), "eval_mcts_simulations": int(run_flag(events, "eval_mcts_simulations")),
        "updates": int(events.Scalars("charts/num_updates")[-1].value),
        "wall_time_min": round(wall_time / 60, 1), "cpu_steal": cpu_steal, "SPS": events.Scalars("charts/SPS")[-1].value,
        "commit": commit or commit_at(int(start)), "machine": machine_line(),
    }])
    replace_rows(os.path.join(out, "runs.csv"), summary, env_id, seed)
    print(f"{run_name}: final win rate {last.random:.2f} against random, {last.mcts:.2f} against MCTSBot, "
          f"at {int(last.step)} plies, {wall_time / 60:.1f} min")


def report(out: str):
    runs = pd.read_csv(os.path.join(out, "runs.csv"))
    curves = pd.read_csv(os.path.join(out, "win_rates.csv"))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, x, label in ((axes[0], "step", "plies (environment steps, both players)"),
                         (axes[1], "minutes", "wall-clock minutes (2-core CPU)")):
        for (opponent, name), colour in zip(OPPONENTS.items(), ("tab:blue", "tab:red")):
            for i, (seed, run) in enumerate(curves.groupby("seed")):
                ax.plot(run[x], run[opponent], "o-", color=colour, alpha=0.5 + 0.5 * (i == 0), markersize=3,
                        label=f"against {name}" if i == 0 else None)
            ax.axhline(TARGETS[opponent], color=colour, linestyle=":", linewidth=1)
        ax.set(xlabel=label, ylim=(-0.02, 1.02))
        ax.set_xlim(left=0)
    axes[0].xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v / 1000:g}k"))
    axes[0].set_ylabel("win rate (both colours)")
    axes[0].legend(loc="lower right", fontsize="small")
    seeds = sorted(curves.seed.unique())
    fig.suptitle(f"Breakthrough 5x5: muzero_breakthrough.py, seed{'s' * (len(seeds) > 1)} {', '.join(map(str, seeds))}"
                 " (dotted: the issue's targets)", fontsize="medium")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "win_rates.png"), dpi=100)
    plt.close(fig)
    rows = ["| seed | plies | updates | win rate vs random | vs MCTSBot | as black / as white vs MCTSBot | games per opponent "
            "| wall time (min) | CPU steal |", "|---|---|---|---|---|---|---|---|---|"]
    for _, r in runs.iterrows():
        final = curves[curves.seed == r.seed].iloc[-1]
        rows.append(f"| {r.seed} | {r.plies:,} | {r.updates:,} | {r.win_rate_random:.2f} | {r.win_rate_mcts:.2f} | "
                    f"{final.mcts_as_black:.2f} / {final.mcts_as_white:.2f} | {r.eval_games} | {r.wall_time_min:.1f} | "
                    f"{100 * r.cpu_steal:.0f}% |")
    rows += ["", f"Machine: {'; '.join(runs.machine.unique())}. Commits: {', '.join(runs.commit.unique())}. "
             f"MCTSBot: {', '.join(map(str, runs.eval_mcts_simulations.unique()))} simulations, UCT c 2, one random "
             "rollout per leaf, solver on. Win rates are over the games of the last evaluation, half with each colour."]
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(rows) + "\n")
    print("\n".join(rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["commit", "collect", "report"])
    parser.add_argument("--run-dir", help="collect: the run's directory under runs/")
    parser.add_argument("--wall-time", type=float, help="collect: the run's wall time in seconds")
    parser.add_argument("--commit", help="collect: the commit the run ran at")
    parser.add_argument("--cpu-steal", type=float, help="collect: share of the machine's CPU time the host gave "
                        "to other virtual machines during the run (/proc/stat)")
    parser.add_argument("--out", default="docs/benchmark/muzero_breakthrough")
    a = parser.parse_args()
    if a.step == "commit":
        print(git_commit(a.out))
    elif a.step == "collect":
        if a.run_dir is None or a.wall_time is None:
            parser.error("collect needs --run-dir and --wall-time")
        collect(a.run_dir, a.wall_time, a.out, a.commit, a.cpu_steal)
    else:
        report(a.out)
