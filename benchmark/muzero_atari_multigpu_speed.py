"""Speed table of muzero_atari_multigpu.py: agent steps/s, acting decisions/s, learner samples/s and each
thread's queue waits, for 1 and 2 learner devices, 1 and 2 actor threads, and 1 and 2 localhost processes.

    python benchmark/muzero_atari_multigpu_speed.py                      # every setting, ~30 min on 2 cores
    python benchmark/muzero_atari_multigpu_speed.py --settings base "2 processes" --iterations 20
    python benchmark/muzero_atari_multigpu_speed.py --settings base --revisions 558f08a dc026a3 558f08a dc026a3

Each setting is a short run of the script at its defaults (plus the setting's flags) in fresh processes
(forced host devices must be set before jax starts). The figures are medians over the actor iterations after
--warmup ones (compilation and the first updates excluded), read from process 0's TensorBoard events:
  * agent steps/s: steps of all actor threads of all processes per second of wall time between iterations;
  * acting decisions/s: each thread's num_envs x num_steps over its stats/actor_time less its wait for
    parameters (the time it spends acting and stepping its games);
  * learner samples/s: batch_size x updates per iteration over stats/learner_time;
  * waits: stats/actor_params_queue_wait (per thread: the actor waiting for parameters, i.e. for the
    learner) and stats/learner_rollout_queue_wait (the learner waiting for the actors), as shares of an
    iteration's wall time.
With --revisions each setting runs with the script at each of these git revisions in turn (rows named "setting
at REV"; old and new alternated, the way to compare speeds) instead of the checkout's. Writes {out}/speed.json
and {out}/speed.md with the machine line and commit.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

sys.path.insert(0, ROOT)
from muzero_atari_multigpu import Args  # noqa: E402
from muzero_tools import git_commit, machine_line, write_markdown  # noqa: E402

DEFAULTS = Args()  # each setting runs the script's defaults plus its flags
PER_THREAD = DEFAULTS.num_envs * DEFAULTS.num_steps  # one actor thread's steps per iteration

SETTINGS = {  # name: (processes, forced host devices per process, flags)
    "base": (1, 1, []),
    "2 learner devices": (1, 2, ["--learner-device-ids", "0", "1"]),
    "2 actor threads": (1, 2, ["--num-actor-threads", "2", "--actor-device-ids", "0", "1"]),
    "sebulba split": (1, 2, ["--actor-device-ids", "1", "--learner-device-ids", "0"]),
    "2 processes": (2, 1, []),
}


def run_setting(name: str, args, revision: str | None = None) -> dict:
    """One setting's figures, with the checkout's script or (revision) the script at that git revision."""
    processes, devices, flags = SETTINGS[name]
    steps = PER_THREAD * processes * (2 if "--num-actor-threads" in flags else 1)  # all threads' steps per iteration
    total = steps * (args.warmup + args.iterations)
    with tempfile.TemporaryDirectory() as tmp:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {**os.environ, "WANDB_MODE": "disabled", "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
        script = os.path.join(ROOT, "muzero_atari_multigpu.py")
        if revision:
            script = os.path.join(tmp, "muzero_atari_multigpu.py")
            with open(script, "w") as f:
                f.write(subprocess.check_output(["git", "show", f"{revision}:muzero_atari_multigpu.py"], cwd=ROOT, text=True))
            env["PYTHONPATH"] = ROOT  # for muzero_tools
        cmd = [
            sys.executable,
            script,
            *flags,
            "--total-timesteps",
            str(total),
            "--eval-episodes",
            "0",
            "--learning-starts",
            str(steps),
            "--log-interval",
            "60",
        ]
        if processes > 1:
            cmd += ["--num-processes", str(processes), "--coordinator-address", f"127.0.0.1:{port}"]
        procs = [
            subprocess.Popen(
                cmd + (["--process-id", str(i)] if processes > 1 else []),
                cwd=tmp,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for i in range(processes)
        ]
        for p in procs:
            out, _ = p.communicate()
            if p.returncode:
                raise RuntimeError(f"{name}: exit {p.returncode}\n{out[-3000:]}")
        (run_dir,) = [os.path.join(tmp, "runs", d) for d in os.listdir(os.path.join(tmp, "runs"))]
        return summarize(run_dir, f"{name} at {revision}" if revision else name, steps, args.warmup)


def summarize(run_dir: str, name: str, steps: int, warmup: int) -> dict:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]

    def series(tag):
        return np.array([e.value for e in acc.Scalars(tag)][warmup:])

    wall = np.diff([e.wall_time for e in acc.Scalars("charts/SPS")])[warmup - 1 :]  # seconds per iteration
    updates = np.diff([e.value for e in acc.Scalars("charts/num_updates")])[warmup - 1 :]
    threads = sorted(t for t in tags if t.startswith("stats/actor_time"))  # process 0's threads
    result = {
        "setting": name,
        "agent_steps_per_s": float(steps / np.median(wall)),
        # stats/actor_time runs from the start of an actor iteration, its wait for parameters included
        "acting_decisions_per_s": [
            float(PER_THREAD / np.median(series(t) - series(t.replace("actor_time", "actor_params_queue_wait"))))
            for t in threads
        ],
        "learner_samples_per_s": float(np.median(updates) * DEFAULTS.batch_size / np.median(series("stats/learner_time"))),
        "actor_params_wait_share": [
            float(np.median(series(t.replace("actor_time", "actor_params_queue_wait")) / wall)) for t in threads
        ],
        "learner_rollout_wait_share": float(np.median(series("stats/learner_rollout_queue_wait") / wall)),
        "seconds_per_iteration": float(np.median(wall)),
    }
    print(json.dumps(result), flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--warmup", type=int, default=4, help="actor iterations left out (compilation)")
    parser.add_argument("--iterations", type=int, default=12, help="actor iterations measured")
    parser.add_argument("--revisions", nargs="+", default=[None], help="git revisions whose scripts run each setting in turn")
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmark", "muzero_atari_multigpu"))
    args = parser.parse_args()
    results = [run_setting(name, args, revision) for name in args.settings for revision in args.revisions]
    os.makedirs(args.out, exist_ok=True)
    machine = machine_line()
    commit = git_commit(args.out)
    with open(os.path.join(args.out, "speed.json"), "w") as f:
        json.dump({"machine": machine, "commit": commit, "results": results}, f, indent=2)
    rows = [
        "| setting | agent steps/s | acting decisions/s (per thread) | learner samples/s | actor waits for "
        "parameters (share, per thread) | learner waits for rollouts (share) |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        rows.append(
            f"| {r['setting']} | {r['agent_steps_per_s']:.0f} | "
            f"{' / '.join(f'{x:.0f}' for x in r['acting_decisions_per_s'])} | {r['learner_samples_per_s']:.0f} | "
            f"{' / '.join(f'{x:.2f}' for x in r['actor_params_wait_share'])} | "
            f"{r['learner_rollout_wait_share']:.2f} |"
        )
    write_markdown(os.path.join(args.out, "speed.md"), rows + ["", f"Machine: {machine}. Commit: {commit}."])


if __name__ == "__main__":
    main()
