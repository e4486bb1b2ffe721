"""A/B screening of muzero_minatar.py's learning levers at equal frames.

    python benchmark/muzero_minatar_ablation.py run --levers baseline gumbel --games Asterix Breakout \
        --seeds 1 2 --total-timesteps 100000 --jobs 2
    python benchmark/muzero_minatar_ablation.py report

`run` trains every lever x game x seed (`python muzero_minatar.py --exp-name ablation-{lever}` plus the
defaults the lever starts from and its flags, one evaluation of --eval-episodes at the end; a lever without a flag
runs a copy of the script with its SOURCE_CHANGES made), --jobs runs at a time. What a run learns
depends only on its flags and seed (the actor acts with parameters exactly one version behind), so
running two at a time changes wall times, not results; the wall time column says how many shared the
machine. Each finished run adds a row to `{out}/ablation.csv` (a rerun of the same lever, game, seed and
budget replaces it). `report` writes `{out}/ablation.md`: per lever, game and budget, the mean over
seeds of the final evaluation return and of the training return over the last 30% of the frames,
beside those of the lever it is compared with at the same budget and seeds.
"""

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository: muzero_tools
from muzero_tools import REPO, git_commit, machine_line, read_table, write_markdown  # noqa: E402

# The acting search every lever below was measured with: 8 simulations, the default until the simulations_16
# lever made it 16. The later levers start from today's defaults with it.
SCREEN_DEFAULTS = ["--num-simulations", "8"]
# muzero_minatar.py's defaults before the screen below changed them (batch 256, uniform replay, 8 acting
# simulations). The screen's levers were measured on top of them, so those runs pass them first and the lever's
# flags after (the last value of a repeated flag wins): a rerun reproduces the screen whatever today's defaults are.
OLD_DEFAULTS = [
    "--batch-size",
    "256",
    "--sampling",
    "uniform",
    "--priority-epsilon",
    "0.001",
    "--importance-exponent",
    "1",
    *SCREEN_DEFAULTS,
]
# Levers whose flags left the script: their rows in ablation.csv name the commit that ran them, which reruns them
RETIRED = {
    "gumbel_q_in_return_units": "baseline",
    "target_bootstrap": "batch_64_strong_reward_focus",
    "replay_ratio_2_to_3": "batch_64_strong_reward_focus",
    "replay_ratio_2_to_4": "batch_64_strong_reward_focus",
    "no_layer_norm": "batch_64_strong_reward_focus",
}  # lever: the lever it was compared with
LEVERS = {  # name: (the lever it is compared with, the defaults it starts from, the flags it adds)
    "baseline": (None, OLD_DEFAULTS, []),
    "gumbel": ("baseline", OLD_DEFAULTS, ["--planner", "gumbel"]),
    # P ~ |v* - G^N|, bias undone by importance weights
    "prioritized": ("baseline", OLD_DEFAULTS, ["--sampling", "proportional"]),
    # windows with a reward within N steps drawn ~8x as often as the rest, the bias kept: the reward
    # head sees rewarding steps often enough to learn them (Asterix: 0.65% of steps reward)
    "reward_focused_replay": (
        "baseline",
        OLD_DEFAULTS,
        ["--sampling", "proportional", "--priority-epsilon", "0.1", "--importance-exponent", "0"],
    ),
    # more updates for the same samples and about the same compute (the update's cost is linear in the
    # batch on this CPU: 64, 128 and 256 all ran at the same samples/s)
    "batch_128": ("baseline", OLD_DEFAULTS, ["--batch-size", "128"]),
    "batch_64": ("baseline", OLD_DEFAULTS, ["--batch-size", "64"]),
    # both at once, the reward focus ~10x stronger (eps 0.01): can the RL loop learn Asterix's reward at all
    # when rewarding windows dominate the batches (the supervised check needed ~25% of a batch)? It did, and
    # these became the script's defaults (with 8 acting simulations), and the levers below compare with it
    "batch_64_strong_reward_focus": (
        "baseline",
        OLD_DEFAULTS,
        ["--batch-size", "64", "--sampling", "proportional", "--priority-epsilon", "0.01", "--importance-exponent", "0"],
    ),
    # levers on top of today's defaults with SCREEN_DEFAULTS (= batch_64_strong_reward_focus)
    "replay_ratio_4": ("batch_64_strong_reward_focus", SCREEN_DEFAULTS, ["--replay-ratio", "4"]),
    # 1.5x the updates per frame: what the 35-minute cap leaves room for at 300k frames (runs took 17-25 min)
    "replay_ratio_3": ("batch_64_strong_reward_focus", SCREEN_DEFAULTS, ["--replay-ratio", "3"]),
    # ratio 3 seemed to stall Asterix: its updates with 2/3 of the step size (learning rate x updates as at ratio 2)
    "replay_ratio_3_lr_2e-3": (
        "batch_64_strong_reward_focus",
        SCREEN_DEFAULTS,
        ["--replay-ratio", "3", "--learning-rate", "2e-3"],
    ),
    # the acting search at the evaluation planner's 16 simulations instead of 8: PUCT's visits move further from
    # the noised prior (the "weak search at 8 simulations"); acting is ~1/6 of a run's machine time
    "simulations_16": ("batch_64_strong_reward_focus", SCREEN_DEFAULTS, ["--num-simulations", "16"]),
    # the reward loss averaged over K = 5 like value and policy
    "reward_loss_mean": ("batch_64_strong_reward_focus", SCREEN_DEFAULTS, ["--reward-coef", "0.2"]),
    # today's defaults, and the levers muzero_atari_multigpu.py's defaults took from the references
    "defaults": (None, [], []),
    # Q-values min-max normalised over a range of at least 0.01 (EfficientZero) instead of mctx's 1e-8
    "q_min_range_0.01": ("defaults", [], ["--q-min-range", "0.01"]),
    # the one-hot move fed to h and g undivided (SOURCE_CHANGES), as MuZero and the Atari and Breakthrough scripts do
    "undivided_move": ("defaults", [], []),
}
# Levers without a flag: the run uses a copy of muzero_minatar.py, written to runs/ablation-{lever}/, with each old
# text (found exactly once) replaced by the new one
SOURCE_CHANGES = {
    "undivided_move": {
        # ActionStem: the thesis (4.3.4) divides the action planes by |A^a|
        ".reshape(-1, L * self.num_actions) / self.num_actions": ".reshape(-1, L * self.num_actions)",
    },
}
KEYS = ["lever", "env_id", "seed", "frames"]
# last logged value of each, kept per run (with the min and final search-policy entropy): what the
# diagnosis of the Asterix stall looked at (rewards never predicted, search policy collapsing)
DIAGNOSTICS = ["losses/reward_error_rewarding", "losses/reward_error_other", "losses/rewarding_share", "losses/value_error"]


def lever_script(lever: str, runs_dir: str) -> str:
    """The script a lever runs: muzero_minatar.py, or the copy with the lever's SOURCE_CHANGES made (in runs_dir)."""
    if lever not in SOURCE_CHANGES:
        return "muzero_minatar.py"
    source = open(os.path.join(REPO, "muzero_minatar.py")).read()
    for old, new in SOURCE_CHANGES[lever].items():
        if source.count(old) != 1:
            raise ValueError(f"{lever}: {old!r} occurs {source.count(old)} times in muzero_minatar.py, not once")
        source = source.replace(old, new)
    path = os.path.join(runs_dir, f"ablation-{lever}", "muzero_minatar.py")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(source)
    return path


def run_one(lever: str, env_id: str, seed: int, total_timesteps: int, eval_episodes: int, out: str, jobs: int, commit: str):
    exp_name = f"ablation-{lever}"
    log = os.path.join(out, "logs", f"{lever}__{env_id}__{total_timesteps}__seed{seed}.log")
    start = time.time()
    with open(log, "w") as f:
        done = subprocess.run(
            [
                sys.executable,
                lever_script(lever, os.path.join(REPO, "runs")),
                "--env-id",
                env_id,
                "--seed",
                str(seed),
                "--exp-name",
                exp_name,
                "--total-timesteps",
                str(total_timesteps),
                "--eval-interval",
                str(total_timesteps),
                "--eval-episodes",
                str(eval_episodes),
                *LEVERS[lever][1],
                *LEVERS[lever][2],
            ],
            cwd=REPO,
            stdout=f,
            stderr=subprocess.STDOUT,
            env={**os.environ, "WANDB_MODE": "disabled"},
        )
    wall = time.time() - start
    if done.returncode != 0:
        print(f"{lever} {env_id} seed {seed} failed, see {log}", flush=True)
        return None
    prefix = os.path.join(REPO, "runs", f"{env_id}__{exp_name}__{seed}__")
    run_dir = max(
        (
            d
            for d in (os.path.join(REPO, "runs", n) for n in os.listdir(os.path.join(REPO, "runs")))
            if d.startswith(prefix) and os.path.getmtime(d) >= start - 5
        ),
        key=os.path.getmtime,
    )
    events = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    events.Reload()
    evals = events.Scalars("charts/eval_episodic_return")
    episodes = events.Scalars("charts/episodic_return")
    train = [e.value for e in episodes if e.step > 0.7 * evals[-1].step]
    # the benchmark's measure (muzero_tools collect: runs.csv's final_train_return_last_50k), to set a lever beside it
    train_50k = [e.value for e in episodes if e.step > evals[-1].step - 50_000]
    entropy = [e.value for e in events.Scalars("charts/policy_entropy")]
    last = {k: events.Scalars(k)[-1].value for k in DIAGNOSTICS}
    source_changes = [f"{old!r} -> {new!r}" for old, new in SOURCE_CHANGES.get(lever, {}).items()]
    row = {
        "lever": lever,
        "env_id": env_id,
        "seed": seed,
        "frames": evals[-1].step,
        "eval_return": evals[-1].value,
        "eval_episodes": eval_episodes,
        "train_return_last_30pct": sum(train) / len(train) if train else float("nan"),
        "train_return_last_50k": sum(train_50k) / len(train_50k) if train_50k else float("nan"),
        "updates": events.Scalars("charts/num_updates")[-1].value,
        "wall_time_min": round(wall / 60, 1),
        "policy_entropy_min": min(entropy),
        "policy_entropy_final": entropy[-1],
        **last,
        "parallel_jobs": jobs,
        "flags": " ".join([*LEVERS[lever][2], *source_changes]),
        "commit": commit,
        "machine": machine_line(),
        "run_name": os.path.basename(run_dir),
    }
    print(
        f"{lever} {env_id} seed {seed}: eval {row['eval_return']:.2f} train {row['train_return_last_30pct']:.2f} "
        f"({row['wall_time_min']} min)",
        flush=True,
    )
    return row


def run(a):
    os.makedirs(os.path.join(a.out, "logs"), exist_ok=True)
    commit = git_commit(a.out)
    todo = [(lever, g, s) for lever in a.levers for g in a.games for s in a.seeds]
    with ThreadPoolExecutor(a.jobs) as pool:
        futures = [
            pool.submit(run_one, lever, g, s, a.total_timesteps, a.eval_episodes, a.out, a.jobs, commit)
            for lever, g, s in todo
        ]
        for fut in futures:
            row = fut.result()
            if row is not None:
                store(pd.DataFrame([row]), os.path.join(a.out, "ablation.csv"))
    report(a.out)


def store(new: pd.DataFrame, path: str):
    if os.path.exists(path):
        old = read_table(path)
        key = old[KEYS].apply(tuple, axis=1).isin(new[KEYS].apply(tuple, axis=1))
        new = pd.concat([old[~key], new], ignore_index=True)
    new.sort_values(KEYS, kind="stable").to_csv(path, index=False)


def diagnostic(base: pd.DataFrame, lever: pd.DataFrame, column: str) -> str:
    """'reference → lever' means over seeds, '– → lever' without reference runs, '–' where runs predate the column."""
    if column not in lever or lever[column].isna().any():
        return "–"
    if base.empty:
        return f"– → {lever[column].mean():.2f}"
    if base[column].isna().any():
        return "–"
    return f"{base[column].mean():.2f} → {lever[column].mean():.2f}"


def machine_label(machine: str) -> str:
    """The CPU part of a machine line: 'family 25 model 17, avx512', or 'not recorded' for the early runs."""
    cpu = machine.split(", JAX")[0]
    return cpu[cpu.index("(") + 1 : cpu.rindex(")")] if "(" in cpu else "not recorded"


def report(out: str):
    """A lever is compared with its reference's runs of the same game, budget, seeds and machine line: on one
    line a seed fixes a run, across lines it does not (docs, "Reproducibility"). A lever whose reference has no
    run on its line gets a row of its own with the reference shown as –."""
    runs = read_table(os.path.join(out, "ablation.csv"))
    rows = [
        "| lever | compared with | flags it adds | game | machine | seeds | frames | eval: reference → lever "
        "| train: reference → lever | reward error on rewarding steps | min policy entropy "
        "| wall time (min, jobs in parallel) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (lever, env_id, frames, machine), group in runs.groupby(["lever", "env_id", "frames", "machine"]):
        reference = LEVERS[lever][0] if lever in LEVERS else RETIRED[lever]
        if reference is None:
            continue
        base = runs[(runs.lever == reference) & (runs.env_id == env_id) & (runs.frames == frames) & (runs.machine == machine)]
        seeds = sorted(set(group.seed) & set(base.seed)) or sorted(set(group.seed))
        b, g = base[base.seed.isin(seeds)], group[group.seed.isin(seeds)]
        wall = f"{b.wall_time_min.mean():.1f}" if len(b) else "–"
        rows.append(
            f"| {lever} | {reference} | `{g['flags'].iloc[0] if isinstance(g['flags'].iloc[0], str) else ''}` | {env_id} | "
            f"{machine_label(machine)} | {', '.join(map(str, seeds))} | {frames:,} | {diagnostic(b, g, 'eval_return')} | "
            f"{diagnostic(b, g, 'train_return_last_30pct')} | "
            f"{diagnostic(b, g, 'losses/reward_error_rewarding')} | {diagnostic(b, g, 'policy_entropy_min')} | "
            f"{wall} → {g.wall_time_min.mean():.1f} ({g.parallel_jobs.max()}) |"
        )
    rows += [
        "",
        f"Machine: {'; '.join(runs.machine.unique())}. Commits: {', '.join(runs.commit.unique())}. "
        f"`baseline` and the levers compared with it start from the defaults before the screen "
        f"(`{' '.join(OLD_DEFAULTS)}`), the others from today's with `{' '.join(SCREEN_DEFAULTS)}`, "
        "`defaults` and its levers from the defaults of the commit that ran them. "
        "A lever is compared only with reference runs "
        "of the same machine line (CPU, library versions; the machine column shows the CPU family and model); – where "
        "the reference has no run on that line. Returns are means over the seeds listed; eval: the final evaluation "
        f"({', '.join(map(str, runs.eval_episodes.unique()))} episodes, evaluation planner); train: training "
        "episodes ending in the last 30% of the frames; reward error: the last logged "
        "`losses/reward_error_rewarding`; min policy entropy: the lowest `charts/policy_entropy` of the run "
        "(uniform over Asterix's 5 actions: 1.61); – where the runs predate these columns. Per-run rows: "
        "`ablation.csv`.",
    ]
    write_markdown(os.path.join(out, "ablation.md"), rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["run", "report"])
    parser.add_argument("--levers", nargs="+", default=list(LEVERS), choices=list(LEVERS))
    parser.add_argument("--games", nargs="+", default=["Asterix", "Breakout"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--total-timesteps", type=int, default=100_000)
    parser.add_argument("--eval-episodes", type=int, default=32)
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time")
    parser.add_argument("--out", default="docs/benchmark/muzero_minatar/ablation")
    a = parser.parse_args()
    run(a) if a.step == "run" else report(a.out)
