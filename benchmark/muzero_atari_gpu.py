"""One-GPU check of muzero_atari_multigpu.py: its paper-scale command for a fixed wall time, and what it reached.

    python benchmark/muzero_atari_gpu.py --budget 420 --out gpu_check          # on the GPU (benchmark/muzero_atari_gpu.sh)
    python benchmark/muzero_atari_gpu.py --budget 60 --tiny --out /tmp/check    # tiny sizes (the CPU test adds its own flags)

Runs the script with PAPER_FLAGS (MuZero's Atari search and batch, its residual network on the 6 x 6 board, a
replay ratio of --replay-ratio) plus any extra flags, stops it with Ctrl-C (SIGINT) after --budget seconds of wall
time, and writes one row to {out}/gpu_check.csv from its TensorBoard events and the process:

    agent_steps, updates, evaluations: what the run reached (environment steps, learner updates, evaluations);
    agent_steps_per_s, updates_per_s, samples_per_s: over the iterations after the first (compilation excluded);
    device_memory_gib: the most GPU memory nvidia-smi saw in use while it ran (0 without nvidia-smi: a CPU);
    host_memory_gib: the run's peak resident memory; last_eval_return: its last evaluation (nan if none);
    exit_status: the run's (130 after Ctrl-C; 0 if it ended on its own first); machine, jax, command, budget_s.

XLA_PYTHON_CLIENT_PREALLOCATE=false, so that the GPU memory in use is the run's, not JAX's default reservation.
"""

import argparse
import csv
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# MuZero's Atari settings (Schrittwieser et al. 2020, appendix): 50 simulations, batch 256, 16 residual blocks of 256
# channels in h, g and f after the down-sampling front; the replay ratio is a flag (EfficientZero trains about 300
# samples per agent step, LightZero's MuZero about 64)
PAPER_FLAGS = (
    "--num-simulations 50 --eval-num-simulations 50 --batch-size 256 --channels 256 --repr-blocks 16 --dyn-blocks 16 "
    "--pred-blocks 16 --head-hidden 256 --eval-interval 20000 --eval-episodes 8"
).split()
# the CPU test's sizes: every part of the command runs, in seconds
TINY_FLAGS = (
    "--num-simulations 2 --eval-num-simulations 2 --batch-size 16 --channels 8 --repr-blocks 1 --dyn-blocks 1 "
    "--pred-blocks 0 --head-hidden 16 --resolution 32 --num-envs 4 --num-steps 16 --unroll-steps 2 --td-steps 3 "
    "--learning-starts 64 --buffer-size 2048 --eval-interval 128 --eval-episodes 2 --max-episode-steps 100"
).split()
COLUMNS = [
    "agent_steps",
    "updates",
    "evaluations",
    "agent_steps_per_s",
    "updates_per_s",
    "samples_per_s",
    "device_memory_gib",
    "host_memory_gib",
    "last_eval_return",
    "exit_status",
    "budget_s",
    "machine",
    "jax",
    "command",
]


def machine_line() -> str:
    """Cores, CPU, and the accelerator JAX runs on (the check needs only the script's own packages: no muzero_tools)."""
    import jax

    device = jax.devices()[0]
    with open("/proc/cpuinfo") as f:
        cpu = next((line.split(":")[1].strip() for line in f if line.startswith("model name")), platform.machine())
    return f"{os.cpu_count()} cores, {cpu}, {device.platform.upper()} {device.device_kind}"


def gpu_memory_in_use_gib() -> float:
    """The GPU memory in use now, summed over the GPUs nvidia-smi lists (0 without nvidia-smi)."""
    if shutil.which("nvidia-smi") is None:
        return 0.0
    query = ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"]
    out = subprocess.run(query, capture_output=True, text=True, timeout=30).stdout
    return sum(float(line) for line in out.split()) / 1024  # MiB


def run(command: list[str], budget: float, cwd: str) -> tuple[int, float]:
    """Runs `command` for `budget` seconds, then Ctrl-C; returns its exit status and the most GPU memory seen."""
    env = {**os.environ, "WANDB_MODE": "disabled", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    process = subprocess.Popen(command, cwd=cwd, env=env)
    deadline = time.time() + budget
    most_memory = 0.0
    while process.poll() is None and time.time() < deadline:
        most_memory = max(most_memory, gpu_memory_in_use_gib())
        time.sleep(min(5.0, max(deadline - time.time(), 0.1)))
    if process.poll() is None:
        process.send_signal(signal.SIGINT)  # the run saves its model and exits 130 within seconds
    try:
        status = process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        status = process.wait()
    return status, most_memory


def summarize(run_dir: str, batch_size: int) -> dict:
    """What the run reached, from its TensorBoard events."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    events.Reload()
    tags = events.Tags()["scalars"]
    sps = events.Scalars("charts/SPS") if "charts/SPS" in tags else []
    updates = events.Scalars("charts/num_updates") if "charts/num_updates" in tags else []
    evaluations = events.Scalars("charts/eval_episodic_return") if "charts/eval_episodic_return" in tags else []
    steps_per_s = updates_per_s = float("nan")
    if len(sps) >= 3:  # rates between the second logged iteration and the last: compilation left out
        seconds = sps[-1].wall_time - sps[1].wall_time
        steps_per_s = (sps[-1].step - sps[1].step) / seconds
        updates_per_s = (updates[-1].value - updates[1].value) / seconds
    return {
        "agent_steps": sps[-1].step if sps else 0,
        "updates": int(updates[-1].value) if updates else 0,
        "evaluations": len(evaluations),
        "agent_steps_per_s": steps_per_s,
        "updates_per_s": updates_per_s,
        "samples_per_s": updates_per_s * batch_size,
        "last_eval_return": evaluations[-1].value if evaluations else float("nan"),
    }


def last_flag_value(flags: list[str], name: str, default=None):
    """The value of the last `name` in flags (as a command line reads repeated flags), else default."""
    return flags[len(flags) - 1 - flags[::-1].index(name) + 1] if name in flags else default


def without_checkpoint(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """tarfile's filter for check(keep=): every file of a run but its checkpoint."""
    return None if member.name.endswith("checkpoint.pkl") else member


def check(script: str, flags: list[str], budget: float, batch_size: int, keep: str | None = None) -> dict:
    """Runs `python script flags` in a fresh folder for `budget` seconds (then Ctrl-C): what it reached (summarize),
    its memory, exit status, machine and command; floats unrounded. keep: a .tar.gz path that receives the run's
    folder (models, events) without its checkpoint, which holds the replay."""
    import jax

    with tempfile.TemporaryDirectory() as cwd:
        status, device_memory = run([sys.executable, os.path.join(ROOT, script), *flags], budget, cwd)
        host_memory = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20  # KiB on Linux
        (run_dir,) = [os.path.join(cwd, "runs", name) for name in os.listdir(os.path.join(cwd, "runs"))]
        row = summarize(run_dir, batch_size)
        if keep:
            with tarfile.open(keep, "w:gz") as archive:
                archive.add(run_dir, arcname=os.path.basename(run_dir), filter=without_checkpoint)
    return row | {
        "device_memory_gib": round(device_memory, 2),
        "host_memory_gib": round(host_memory, 2),  # the largest of this process's runs so far
        "exit_status": status,
        "budget_s": budget,
        "machine": machine_line(),
        "jax": jax.__version__,
        "command": " ".join(["python", script, *flags]),
    }


def rounded(row: dict) -> dict:
    """Finite floats to 3 decimals, for the CSV."""
    return {k: round(v, 3) if isinstance(v, float) and np.isfinite(v) else v for k, v in row.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=420.0, help="seconds of wall time the run gets")
    parser.add_argument("--replay-ratio", default="8", help="samples trained per agent step")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes instead of the paper's (the CPU test)")
    parser.add_argument("--out", default="gpu_check", help="folder of gpu_check.csv")
    cli, extra = parser.parse_known_args()
    if cli.budget <= 0:
        parser.error(f"--budget must be positive (got {cli.budget})")
    flags = [*(TINY_FLAGS if cli.tiny else PAPER_FLAGS), "--replay-ratio", cli.replay_ratio, "--save-model", *extra]
    batch_size = int(last_flag_value(flags, "--batch-size"))
    row = rounded(check("muzero_atari_multigpu.py", flags, cli.budget, batch_size))
    os.makedirs(cli.out, exist_ok=True)
    with open(os.path.join(cli.out, "gpu_check.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerow(row)
    print(", ".join(f"{k}={row[k]}" for k in COLUMNS[:10]), flush=True)


if __name__ == "__main__":
    main()
