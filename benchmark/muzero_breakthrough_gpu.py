"""Speed of muzero_breakthrough.py on 8x8 on one GPU: plies/s of the 2-core configuration and of larger ones.

    python benchmark/muzero_breakthrough_gpu.py --budget 150 --out gpu_speed    # on the GPU (muzero_breakthrough_gpu.sh)
    python benchmark/muzero_breakthrough_gpu.py --learn --budget 450 --out gpu_learn   # a learning run's first piece

Runs the script once per configuration in CONFIGURATIONS (8x8, no evaluation, the given extra flags added to each),
stops each with Ctrl-C after --budget seconds of wall time, and writes one row per configuration to
{out}/gpu_speed.csv from its TensorBoard events, as benchmark/muzero_atari_gpu.py does for Atari (whose check it
uses):

    plies, updates: what the run reached in its budget (self-play plies, learner updates);
    plies_per_s, updates_per_s, samples_per_s: over the iterations after the first (compilation excluded);
    plies_in_3_hours: plies_per_s x 10,800 (the issue's training budget on 2 cores);
    device_memory_gib, host_memory_gib, exit_status, budget_s, machine, jax, command: as in the Atari check.
"""

import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from muzero_atari_gpu import ROOT, check, last_flag_value, rounded  # noqa: E402

sys.path.insert(0, ROOT)  # muzero_breakthrough's Args, for its default batch size

# every configuration: the 8x8 board as benchmark/muzero_breakthrough.sh plays it, no evaluation (its games against
# MCTSBot run on the CPU and would take the budget); the 2-core configuration first, then more games per search batch,
# then also a larger batch, the thesis' channels and twice the simulations, and those 256 games over 4 actor threads
BOARD = "--board-size 8 --total-timesteps 2000000 --eval-episodes 0".split()
CONFIGURATIONS = {
    "cpu_configuration": [],
    "envs_256": "--num-envs 256".split(),
    "envs_256_batch_256_channels_32_simulations_32": (
        "--num-envs 256 --batch-size 256 --channels 32 --num-simulations 32".split()
    ),
    "threads_4_envs_64_batch_256_channels_32_simulations_32": (
        "--num-actor-threads 4 --num-envs 64 --batch-size 256 --channels 32 --num-simulations 32".split()
    ),
}
# --learn: the largest configuration, trained for --budget seconds toward 20M plies (the GPU's 3 hours), a model kept
# every 250k plies and at the end (run.tar.gz, 2.6 MiB a model: 16 MiB come back) for matches here (muzero_tools.py match)
LEARN = [
    *BOARD,
    *CONFIGURATIONS["envs_256_batch_256_channels_32_simulations_32"],
    *"--total-timesteps 20000000 --checkpoint-interval 250000 --save-model --exp-name muzero_breakthrough_8x8_gpu".split(),
]
COLUMNS = [
    "configuration",
    "plies",
    "updates",
    "plies_per_s",
    "updates_per_s",
    "samples_per_s",
    "plies_in_3_hours",
    "device_memory_gib",
    "host_memory_gib",
    "exit_status",
    "budget_s",
    "machine",
    "jax",
    "command",
]


def in_plies(reached: dict) -> dict:
    """check()'s row with its agent steps named as a board game counts them, plies (those two first)."""
    rest = {k: v for k, v in reached.items() if k not in ("agent_steps", "agent_steps_per_s")}
    return {"plies": reached["agent_steps"], "plies_per_s": reached["agent_steps_per_s"], **rest}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=150.0, help="seconds of wall time each configuration gets")
    parser.add_argument("--configurations", nargs="+", default=list(CONFIGURATIONS), choices=list(CONFIGURATIONS))
    parser.add_argument("--out", default="gpu_speed", help="folder of gpu_speed.csv")
    parser.add_argument("--learn", action="store_true", help="one run of LEARN, its models kept (gpu_learn.csv, run.tar.gz)")
    cli, extra = parser.parse_known_args()
    if cli.budget <= 0:
        parser.error(f"--budget must be positive (got {cli.budget})")
    from muzero_breakthrough import Args

    os.makedirs(cli.out, exist_ok=True)
    if cli.learn:
        flags = [*LEARN, *extra]
        batch_size = int(last_flag_value(flags, "--batch-size", Args.batch_size))
        row = check("muzero_breakthrough.py", flags, cli.budget, batch_size, keep=os.path.join(cli.out, "run.tar.gz"))
        row = rounded(in_plies(row))
        with open(os.path.join(cli.out, "gpu_learn.csv"), "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(row))
            writer.writeheader()
            writer.writerow(row)
        print(", ".join(f"{k}={v}" for k, v in row.items()), flush=True)
        return
    path = os.path.join(cli.out, "gpu_speed.csv")
    with open(path, "w", newline="") as f:
        csv.DictWriter(f, fieldnames=COLUMNS).writeheader()
    for name in cli.configurations:
        flags = [*BOARD, *CONFIGURATIONS[name], *extra]
        batch_size = int(last_flag_value(flags, "--batch-size", Args.batch_size))
        reached = check("muzero_breakthrough.py", flags, cli.budget, batch_size)
        row = {"configuration": name, **in_plies(reached)}
        row["plies_in_3_hours"] = row["plies_per_s"] * 3 * 3600
        row = rounded({k: row[k] for k in COLUMNS})
        with open(path, "a", newline="") as f:  # each configuration's row as it ends
            csv.DictWriter(f, fieldnames=COLUMNS).writerow(row)
        print(", ".join(f"{k}={row[k]}" for k in COLUMNS[:11]), flush=True)


if __name__ == "__main__":
    main()
