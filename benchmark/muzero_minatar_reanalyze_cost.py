"""What reanalysis at sampling time costs: environment steps/s and updates/s of muzero_minatar_reanalyze.py with
`--reanalyze-mode sample` (--sample-flags: the experiment's) against no reanalysis, at replay ratio 2 and 8.
The four settings run in turn, A B C D A B C D, so that every one sees the same machine; each rate is taken from
the run's TensorBoard events between the end of --skip actor iterations (compilation and the first updates are
behind it) and the run's end. Writes {out}/cost.csv (every run) and {out}/cost.md (medians, ratios against no
reanalysis at the same replay ratio, the machine line).

    COST=1 bash benchmark/muzero_minatar_reanalyze.sh                    # the experiment's flags, 2 rounds
    COST=1 bash benchmark/muzero_minatar_reanalyze.sh --rounds 3 --total-timesteps 16384
"""

import argparse
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np
import pandas as pd
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
import muzero_tools  # noqa: E402


def settings(sample_flags: list, plain_flags: list) -> dict:
    return {
        "no reanalysis, replay ratio 2": [*plain_flags, "--replay-ratio", "2"],
        "sample, replay ratio 2": [*sample_flags, "--replay-ratio", "2"],
        "no reanalysis, replay ratio 8": [*plain_flags, "--replay-ratio", "8"],
        "sample, replay ratio 8": [*sample_flags, "--replay-ratio", "8"],
    }


def steady_rates(run_dir: str, skip: int) -> tuple[float, float]:
    """Environment steps/s and updates/s between the end of actor iteration `skip` and the run's last one."""
    events = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    events.Reload()
    updates = events.Scalars("charts/num_updates")  # one event per actor iteration: its step, updates and wall time
    first, last = updates[skip - 1], updates[-1]
    seconds = last.wall_time - first.wall_time
    return (last.step - first.step) / seconds, (last.value - first.value) / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2, help="times each setting runs (A B C D, then again)")
    parser.add_argument("--total-timesteps", type=int, default=8192, help="environment steps of each run")
    parser.add_argument("--skip", type=int, default=3, help="actor iterations of 1,024 steps left out of the rates")
    parser.add_argument("--env-id", default="Breakout")
    parser.add_argument("--sample-flags", required=True, help="the flags of reanalysis at sampling time, one string")
    parser.add_argument("--plain-flags", required=True, help="the flags of no reanalysis (the base's computation)")
    parser.add_argument("--out", default="docs/benchmark/muzero_minatar_reanalyze")
    cfg = parser.parse_args()
    rows = []
    compared = settings(cfg.sample_flags.split(), cfg.plain_flags.split())
    with tempfile.TemporaryDirectory() as work:
        for round_index in range(cfg.rounds):
            for setting_index, (setting, flags) in enumerate(compared.items()):
                command = [sys.executable, os.path.join(REPO, "muzero_minatar_reanalyze.py"), "--env-id", cfg.env_id]
                command += ["--total-timesteps", str(cfg.total_timesteps), "--eval-episodes", "0", *flags]
                name = f"cost{round_index}_{setting_index}"
                command += ["--exp-name", name]
                print(f"== round {round_index + 1}: {setting}", flush=True)
                subprocess.run(command, cwd=work, check=True, stdout=subprocess.DEVNULL)
                (run_dir,) = glob.glob(os.path.join(work, "runs", f"*__{name}__*"))
                steps_per_second, updates_per_second = steady_rates(run_dir, cfg.skip)
                rows.append(dict(setting=setting, round=round_index + 1, env_steps_per_s=steps_per_second))
                rows[-1]["updates_per_s"] = updates_per_second
                print(f"   {steps_per_second:.1f} env steps/s, {updates_per_second:.2f} updates/s", flush=True)
    table = pd.DataFrame(rows)
    table["commit"] = muzero_tools.git_commit(cfg.out)
    table["machine"] = muzero_tools.machine_line()
    os.makedirs(cfg.out, exist_ok=True)
    table.to_csv(os.path.join(cfg.out, "cost.csv"), index=False)
    medians = table.groupby("setting", sort=False)[["env_steps_per_s", "updates_per_s"]].median()
    lines = [
        f"Median of {cfg.rounds} runs per setting ({cfg.env_id}, {cfg.total_timesteps} steps each, rates after "
        f"{cfg.skip} actor iterations), run in turn; commit {table['commit'][0]}; {table['machine'][0]}.",
        "",
        "| setting | env steps/s | updates/s | env steps/s against no reanalysis |",
        "|---|---|---|---|",
    ]
    for setting, row in medians.iterrows():
        base = medians.loc["no reanalysis, " + setting.split(", ")[1], "env_steps_per_s"]
        lines.append(f"| {setting} | {row.env_steps_per_s:.0f} | {row.updates_per_s:.2f} | {row.env_steps_per_s / base:.2f} |")
    muzero_tools.write_markdown(os.path.join(cfg.out, "cost.md"), lines)
    print("\n".join(lines))
    assert np.isfinite(table[["env_steps_per_s", "updates_per_s"]].to_numpy()).all()


if __name__ == "__main__":
    main()
