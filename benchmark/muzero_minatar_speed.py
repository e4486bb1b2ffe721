"""Speed profile of muzero_minatar.py: where the time of a run goes, and how close each jitted
function gets to the machine's float32 matmul peak.

    python benchmark/muzero_minatar_speed.py            # every setting, ~20 min on 2 cores
    python benchmark/muzero_minatar_speed.py --settings default sebulba
    python benchmark/muzero_minatar_speed.py --compare 95a9662 --repeats 3   # old commit vs working tree
    python benchmark/muzero_minatar_speed.py --compare 95a9662 --end-to-end  # ... and a short run of each

`--checkpoint-cost` runs the default configuration for --iterations actor iterations with a checkpoint
after each one and writes {out}/checkpoint_cost.json and .md: the checkpoint's size and the time one
write takes (the replay is allocated whole at the start, so the size does not grow with the run).

`--compare REV` measures only the jitted update and the acting step of the default setting, for the
script as it is at REV (`git show REV:muzero_minatar.py`) and for the working tree, alternating
processes --repeats times so both see the same machine (each side at its own default batch size, or
both at --compare-batch-size); it writes {out}/speed_compare.json and .md
with the median of each and their ratio (this machine is shared: compare speeds as a ratio measured
in one run, not against an old table).

Each setting runs in its own process (forced host devices must be set before jax is imported) and
measures, at that setting's Args:
  * matmul peak: best float32 2048x2048 matmul, GFLOP/s, in the same process; and the speed of one
    3x3 convolution at the network's width and the learner's batch, alone (what the layer most FLOPs
    go through can reach at all);
  * acting: decisions/s of the jitted acting step (history stacking, initial inference, search) at
    --num-envs, and its network FLOP/s: XLA's cost analysis of one initial inference plus
    --num-simulations recurrent inferences (the search loop is a while loop, whose cost XLA counts
    once, so the search's own tree work is not counted as FLOPs: it is time without FLOPs);
  * learner: samples/s of the jitted update at --batch-size, and its FLOP/s (cost analysis of the
    whole update: targets, K-step unroll, backward pass, Adam);
  * end to end: a short run of `main` (--iterations actor iterations after --warmup ones), its
    environment steps/s, and each thread's queue waits as a share of wall time, read from the
    run's TensorBoard events (stats/*);
  * CPU steal: the share of the machine's CPU time the host gave to other virtual machines while the
    setting ran (/proc/stat); on a shared host it explains most of the run-to-run spread.
Writes {out}/speed.json and {out}/speed.md (with the machine line).
"""

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository: muzero_tools

SETTINGS = {  # name: (forced host devices, Args overrides)
    "default": (1, {}),
    "num_envs=64": (1, {"num_envs": 64}),
    "num_simulations=8": (1, {"num_simulations": 8}),
    "batch_size=256": (1, {"batch_size": 256}),
    "sebulba": (2, {"actor_device_ids": (1,), "learner_device_ids": (0,)}),
    "sebulba, 2 learner devices": (2, {"actor_device_ids": (1,), "learner_device_ids": (0, 1)}),
}


def best_time(fn, repeats: int) -> float:
    """Fastest of `repeats` timed calls (after one warm-up call that compiles)."""
    import jax

    jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return min(times)


def flops_of(jitted, *example) -> float:
    return float(jitted.lower(*example).compile().cost_analysis()["flops"])


def matmul_peak(n: int = 2048) -> float:
    import jax
    import jax.numpy as jnp

    a = jax.random.normal(jax.random.PRNGKey(0), (n, n), jnp.float32)
    mm = jax.jit(jnp.dot)
    return 2 * n**3 / best_time(lambda: mm(a, a), 10)


def conv_speed(batch: int, channels: int) -> float:
    """FLOP/s of one 3x3, channels -> channels convolution on a batch of 10x10 boards: the layer that
    most of the network's FLOPs go through, alone (an upper bound for the whole network)."""
    import jax
    import jax.numpy as jnp

    x = jax.random.normal(jax.random.PRNGKey(0), (batch, 10, 10, channels), jnp.float32)
    w = jax.random.normal(jax.random.PRNGKey(1), (3, 3, channels, channels), jnp.float32)
    conv = jax.jit(lambda x, w: jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
    return 2 * batch * 100 * 9 * channels * channels / best_time(lambda: conv(x, w), 20)


@contextlib.contextmanager
def short_run(m, run_args):
    """Runs muzero_minatar's main(run_args) in a temporary directory; yields the run's directory."""
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            m.main(run_args)
        finally:
            os.chdir(cwd)
        (run_dir,) = [os.path.join(tmp, "runs", d) for d in os.listdir(os.path.join(tmp, "runs"))]
        yield run_dir


def make_update(m, net, args, optimizer, params):
    """The script's update and its state on the learner devices, and the same on the first learner device alone
    (for FLOP counts: splitting the batch adds only the gradient all-reduce). Scripts from before the pmap
    learner (--compare with an older commit) jit the update over a mesh instead."""
    import jax
    import jax.numpy as jnp

    state = m.TrainState(params, params, optimizer.init(params), jnp.zeros((), jnp.int32))
    if not hasattr(m, "learner_mesh"):
        one = m.Args(**{**vars(args), "learner_device_ids": args.learner_device_ids[:1]})
        return (
            m.make_update_fn(net, args, optimizer),
            m.replicate(state, args),
            (m.make_update_fn(net, one, optimizer), m.replicate(state, one)),
        )
    mesh, one_mesh = m.learner_mesh(args.learner_device_ids), m.learner_mesh(args.learner_device_ids[:1])
    return (
        m.make_update_fn(net, args, optimizer, mesh),
        jax.device_put(state, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())),
        (m.make_update_fn(net, args, optimizer, one_mesh), jax.device_put(state, jax.local_devices()[0])),
    )


def make_replay(m, args, env):
    """A uniform replay of --buffer-size steps: the script's Replay (older scripts took its settings one by one)."""
    import dataclasses
    import inspect

    S = args.num_steps
    if list(inspect.signature(m.Replay.__init__).parameters)[1] == "args":
        uniform = dataclasses.replace(args, sampling="uniform", priority_epsilon=1e-3)
        return m.Replay(uniform, args.buffer_size // S, env.obs_shape, env.num_actions, 0)
    look = args.unroll_steps + args.td_steps
    return m.Replay(
        args.buffer_size // S, S, args.history_length, look, env.obs_shape, env.num_actions, "uniform", 1.0, 1e-3, 0
    )


def cpu_ticks() -> tuple[int, int]:
    """(steal, total) CPU ticks of the machine since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
    return fields[7], sum(fields)


def measure(
    name: str, iterations: int, warmup: int, source: str | None = None, parts_only: bool = False, batch_size: int | None = None
) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    sys.path.insert(0, source or os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import muzero_minatar as m

    _, overrides = SETTINGS[name]
    if batch_size is not None:
        overrides = {**overrides, "batch_size": batch_size}
    args = m.Args(**overrides)
    result = {
        "setting": name,
        "batch_size": args.batch_size,
        "overrides": {k: list(v) if isinstance(v, tuple) else v for k, v in overrides.items()},
    }
    peak = matmul_peak()
    result["matmul_peak_gflops"] = peak / 1e9
    result["conv3x3_gflops"] = conv_speed(args.batch_size, args.channels) / 1e9

    env = m.MinAtarVecEnv(args.env_id, args.num_envs, args.seed, args.sticky_action_prob)
    net = m.make_network(args, env.num_actions)
    params = m.init_params(net, args, jax.random.PRNGKey(0))
    actor_device = jax.local_devices()[args.actor_device_ids[0] if hasattr(args, "actor_device_ids") else args.actor_device_id]

    # acting, on the actor's device
    train_planner, _ = m.planner_configs(args)
    act = m.make_act_fn(net, train_planner, args.gamma)
    with jax.default_device(actor_device):
        a_params = jax.device_put(params, actor_device)
        state = m.initial_actor_state(args.num_envs, args.history_length, env.obs_shape)
        step = env.step(np.zeros(args.num_envs, np.int32))
        step = env.step(np.random.default_rng(0).integers(1, env.num_actions, args.num_envs))
        legal = env.legal_actions(step.is_last)
        key = jax.random.PRNGKey(1)
        act_time = best_time(lambda: act(a_params, state, step.obs, step.is_first, legal, key), 20)
        stacked = m.stack_history(state.frames, state.actions)
        initial = jax.jit(lambda p, s: net.apply(p, net.apply(p, s, method=m.MuZeroNet.represent), method=m.MuZeroNet.predict))
        x = net.apply(a_params, stacked, method=m.MuZeroNet.represent)
        recurrent = jax.jit(
            lambda p, x, a: net.apply(p, net.apply(p, x, a, method=m.MuZeroNet.dynamics)[0], method=m.MuZeroNet.predict)
        )
        act_flops = flops_of(initial, a_params, stacked) + args.num_simulations * flops_of(
            recurrent, a_params, x, jnp.zeros(args.num_envs, jnp.int32)
        )
    result["acting"] = {
        "decisions_per_s": args.num_envs / act_time,
        "ms_per_step": 1e3 * act_time,
        "network_gflop_per_step": act_flops / 1e9,
        "gflops": act_flops / act_time / 1e9,
        "share_of_peak": act_flops / act_time / peak,
    }

    # learning, on the learner's devices, from a replay filled with played steps
    optimizer = m.make_optimizer(args)
    update, train_state, one_device_update = make_update(m, net, args, optimizer, params)
    L, S = args.history_length, args.num_steps
    replay = make_replay(m, args, env)
    span = L + S + args.unroll_steps + args.td_steps
    segments = m.empty_segments(args.num_envs, span, env.obs_shape, env.num_actions)
    rng = np.random.default_rng(0)
    for _ in range(max(1, args.batch_size // (args.num_envs * S)) + 1):
        for t in range(span):
            step = env.step(rng.integers(1, env.num_actions, args.num_envs))
            played = dict(
                obs=step.obs,
                reward=step.reward,
                is_first=step.is_first,
                is_last=step.is_last,
                action=rng.integers(1, env.num_actions, args.num_envs),
                value=rng.normal(size=args.num_envs),
                policy=np.full((args.num_envs, env.num_actions), 1 / env.num_actions),
                valid=True,
            )
            for k, v in played.items():
                segments[k][:, t] = v
        replay.add(segments, np.ones((args.num_envs, S)))
    batch, weights = replay.sample(args.batch_size)
    holder = {"state": train_state}

    def one_update():
        holder["state"], metrics = update(holder["state"], batch, weights)
        return holder["state"]

    update_time = best_time(one_update, 10)
    update_flops = flops_of(jax.jit(one_device_update[0]), one_device_update[1], batch, weights)
    result["learner"] = {
        "samples_per_s": args.batch_size / update_time,
        "ms_per_update": 1e3 * update_time,
        "gflop_per_update": update_flops / 1e9,
        "gflops": update_flops / update_time / 1e9,
        "share_of_peak": update_flops / update_time / peak,
    }

    if parts_only:
        return result
    # end to end: a short run of main, timed from its events after the warm-up iterations
    steps_per_iteration = args.num_envs * S
    run_args = m.Args(
        **{
            **overrides,
            "total_timesteps": (warmup + iterations) * steps_per_iteration,
            "eval_interval": 10**9,
            "eval_episodes": 0,
            "log_interval": 1e9,
        }
    )
    with short_run(m, run_args) as run_dir:
        events = EventAccumulator(run_dir, size_guidance={"scalars": 0})
        events.Reload()
        series = {
            tag: [e for e in events.Scalars(tag) if e.step > warmup * steps_per_iteration]
            for tag in events.Tags()["scalars"]
            if tag.startswith(("stats/", "charts/SPS"))
        }
    first = [e for e in events.Scalars("charts/SPS") if e.step == warmup * steps_per_iteration][0]
    last = series["charts/SPS"][-1]
    wall = last.wall_time - first.wall_time
    total = {tag: sum(e.value for e in es) for tag, es in series.items()}
    result["end_to_end"] = {
        "env_steps_per_s": (last.step - first.step) / wall,
        "wall_s": wall,
        "iterations": iterations,
        "learner_queue_wait_share": (total["stats/learner_rollout_queue_wait"] + total["stats/learner_params_queue_put_wait"])
        / wall,
        "actor_queue_wait_share": (total["stats/actor_params_queue_wait"] + total["stats/actor_rollout_queue_put_wait"])
        / wall,
        "learner_samples_per_s": args.replay_ratio * (last.step - first.step) / wall,
        # the actor's speed while it is not waiting (history, search, environment steps, copies)
        "actor_active_decisions_per_s": (last.step - first.step)
        / (total["stats/actor_time"] - total["stats/actor_params_queue_wait"]),
    }
    return result


def write_report(results: list, out: str, meta: dict):
    from muzero_tools import write_markdown

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "speed.json"), "w") as f:
        json.dump({**meta, "results": results}, f, indent=1)
    rows = [
        "| setting | acting decisions/s | acting % of peak | learner samples/s | learner % of peak | "
        "3x3 conv alone, % of peak | env steps/s (end to end) | actor queue wait | learner queue wait | "
        "matmul peak GFLOP/s | CPU steal |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        a, learner, e, peak = r["acting"], r["learner"], r["end_to_end"], r["matmul_peak_gflops"]
        rows.append(
            f"| {r['setting']} | {a['decisions_per_s']:.0f} | {100 * a['share_of_peak']:.1f}% | "
            f"{learner['samples_per_s']:.0f} | {100 * learner['share_of_peak']:.1f}% | "
            f"{100 * r['conv3x3_gflops'] / peak:.0f}% | {e['env_steps_per_s']:.0f} | "
            f"{100 * e['actor_queue_wait_share']:.0f}% | {100 * e['learner_queue_wait_share']:.0f}% | "
            f"{peak:.0f} | {100 * r['cpu_steal']:.0f}% |"
        )
    rows += [
        "",
        "Acting and learner columns time each jitted function alone; the end-to-end columns come from "
        f"a short run of the script (both threads sharing the CPU). Machine: {meta['machine']}. "
        f"Commit: {meta['commit']}. Command: `{meta['command']}`.",
    ]
    write_markdown(os.path.join(out, "speed.md"), rows)


def compare(
    rev: str,
    repeats: int,
    out: str,
    meta: dict,
    batch_size: int | None = None,
    end_to_end: bool = False,
    iterations: int = 6,
    warmup: int = 2,
):
    """Learner and acting speed (and with `end_to_end` the environment steps/s of a short run) of
    muzero_minatar.py at `rev` and in the working tree, alternating; each at its own default batch size, or
    both at `batch_size`."""
    from muzero_tools import REPO, write_markdown

    with tempfile.TemporaryDirectory() as old_dir:
        code = subprocess.run(
            ["git", "show", f"{rev}:muzero_minatar.py"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout
        with open(os.path.join(old_dir, "muzero_minatar.py"), "w") as f:
            f.write(code)
        sources = {rev: old_dir, "working tree": REPO}
        samples = {name: [] for name in sources}
        for r in range(repeats):
            for name, source in sources.items():
                env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=1"}
                one = [
                    sys.executable,
                    __file__,
                    "--one",
                    "default",
                    "--source",
                    source,
                    "--iterations",
                    str(iterations),
                    "--warmup",
                    str(warmup),
                ] + ([] if end_to_end else ["--parts-only"])
                if batch_size is not None:
                    one += ["--compare-batch-size", str(batch_size)]
                done = subprocess.run(one, env=env, capture_output=True, text=True)
                if done.returncode != 0:
                    sys.exit(f"{name} failed:\n{done.stderr[-3000:]}")
                (line,) = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
                result = json.loads(line[len("RESULT ") :])
                samples[name].append(result)
                print(
                    f"round {r + 1} {name}: learner {result['learner']['samples_per_s']:.0f} samples/s, "
                    f"acting {result['acting']['decisions_per_s']:.0f} decisions/s",
                    flush=True,
                )
    import numpy as np

    def median(name, part, key):
        return float(np.median([x[part][key] for x in samples[name]]))

    speeds = ("learner_samples_per_s", "acting_decisions_per_s") + (("env_steps_per_s",) if end_to_end else ())
    summary = {
        name: {
            "batch_size": samples[name][0]["batch_size"],
            "learner_samples_per_s": median(name, "learner", "samples_per_s"),
            "acting_decisions_per_s": median(name, "acting", "decisions_per_s"),
            **({"env_steps_per_s": median(name, "end_to_end", "env_steps_per_s")} if end_to_end else {}),
        }
        for name in sources
    }
    new, old = summary["working tree"], summary[rev]
    ratio = {k: new[k] / old[k] for k in speeds}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "speed_compare.json"), "w") as f:
        json.dump(
            {**meta, "baseline": rev, "repeats": repeats, "median": summary, "ratio": ratio, "rounds": samples}, f, indent=1
        )
    e2e = end_to_end
    rows = [
        "| code | batch size | learner samples/s (median) | acting decisions/s (median) |"
        + (" env steps/s end to end (median) |" if e2e else ""),
        "|---|---|---|---|" + ("---|" if e2e else ""),
    ]
    rows += [
        f"| {label} | {s['batch_size']} | {s['learner_samples_per_s']:.0f} | {s['acting_decisions_per_s']:.0f} |"
        + (f" {s['env_steps_per_s']:.0f} |" if e2e else "")
        for label, s in ((rev, old), (meta["commit"], new))
    ]
    rows += [
        f"| ratio | | **{ratio['learner_samples_per_s']:.2f}x** | {ratio['acting_decisions_per_s']:.2f}x |"
        + (f" **{ratio['env_steps_per_s']:.2f}x** |" if e2e else ""),
        "",
        f"Median of {repeats} alternating processes each. Machine: {meta['machine']}. Command: `{meta['command']}`.",
    ]
    write_markdown(os.path.join(out, "speed_compare.md"), rows)


def checkpoint_cost(iterations: int, out: str, meta: dict):
    import numpy as np
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import muzero_minatar as m
    import muzero_run

    args = m.Args()
    steps = args.num_envs * args.num_steps
    run_args = m.Args(total_timesteps=(iterations + 1) * steps, checkpoint_interval=steps, eval_episodes=0, log_interval=1e9)
    with short_run(m, run_args) as run_dir:
        size = os.path.getsize(os.path.join(run_dir, muzero_run.CHECKPOINT_FILE))
        events = EventAccumulator(run_dir, size_guidance={"scalars": 0})
        events.Reload()
        times = [e.value for e in events.Scalars("stats/checkpoint_time")]
    result = {
        **meta,
        "env_id": args.env_id,
        "buffer_size": args.buffer_size,
        "checkpoints": len(times),
        "size_mb": size / 1e6,
        "median_write_s": float(np.median(times)),
        "max_write_s": float(np.max(times)),
    }
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "checkpoint_cost.json"), "w") as f:
        json.dump(result, f, indent=1)
    write_checkpoint_cost_table(result, out)


def write_checkpoint_cost_table(result: dict, out: str):
    """{out}/checkpoint_cost.md: the checkpoint's size and write time as a table, its machine, commit and command
    under it."""
    text = (
        "| game | replay (steps) | checkpoint | write time: median (longest) |\n|---|---|---|---|\n"
        f"| {result['env_id']} | {result['buffer_size']:,} | {result['size_mb']:.0f} MB | "
        f"{result['median_write_s']:.2f} s ({result['max_write_s']:.2f} s) |\n\n"
        f"{result['checkpoints']} checkpoints of the default configuration. Machine: {result['machine']}. "
        f"Commit: {result['commit']}. Command: `{result['command']}`.\n"
    )
    with open(os.path.join(out, "checkpoint_cost.md"), "w") as f:
        f.write(text)
    print(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--iterations", type=int, default=16, help="timed actor iterations per end-to-end run")
    parser.add_argument("--warmup", type=int, default=4, help="actor iterations before timing starts")
    parser.add_argument(
        "--compare",
        metavar="REV",
        help="only the learner and acting speed of REV against the working tree, alternating processes",
    )
    parser.add_argument("--repeats", type=int, default=3, help="--compare: processes per side")
    parser.add_argument(
        "--compare-batch-size", type=int, help="--compare: both sides at this batch size (default: each side's own default)"
    )  # also read by --one
    parser.add_argument(
        "--end-to-end",
        action="store_true",
        help="--compare: also a short run of each side (--warmup + --iterations actor iterations), its environment steps/s",
    )
    parser.add_argument(
        "--checkpoint-cost",
        action="store_true",
        help="only the size and write time of a checkpoint at the default configuration (--iterations checkpoints)",
    )
    parser.add_argument("--out", default="docs/benchmark/muzero_minatar")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure one setting, print JSON
    parser.add_argument("--source", help=argparse.SUPPRESS)  # internal: directory of the muzero_minatar.py to time
    parser.add_argument("--parts-only", action="store_true", help=argparse.SUPPRESS)  # internal: no end-to-end run
    a = parser.parse_args()
    if a.one:
        result = measure(a.one, a.iterations, a.warmup, a.source, a.parts_only, a.compare_batch_size)
        print("RESULT " + json.dumps(result), flush=True)
        return
    from muzero_tools import git_commit, machine_line

    # the commit is taken before measuring: the code the measurements run
    command = "python benchmark/muzero_minatar_speed.py" + (
        f" --compare {a.compare} --repeats {a.repeats}"
        + (f" --compare-batch-size {a.compare_batch_size}" if a.compare_batch_size else "")
        + (f" --end-to-end --iterations {a.iterations} --warmup {a.warmup}" if a.end_to_end else "")
        if a.compare
        else f" --checkpoint-cost --iterations {a.iterations}"
        if a.checkpoint_cost
        else ""
    )
    meta = {"machine": machine_line(), "commit": git_commit(a.out), "command": command}
    if a.compare:
        compare(a.compare, a.repeats, a.out, meta, a.compare_batch_size, a.end_to_end, a.iterations, a.warmup)
        return
    if a.checkpoint_cost:
        checkpoint_cost(a.iterations, a.out, meta)
        return
    results = []
    for name in a.settings:
        devices, _ = SETTINGS[name]
        env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
        print(f"== {name}", flush=True)
        steal0, total0 = cpu_ticks()
        out = subprocess.run(
            [sys.executable, __file__, "--one", name, "--iterations", str(a.iterations), "--warmup", str(a.warmup)],
            env=env,
            capture_output=True,
            text=True,
        )
        steal1, total1 = cpu_ticks()
        if out.returncode != 0:
            sys.exit(f"setting {name} failed:\n{out.stderr[-3000:]}")
        (line,) = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
        results.append({**json.loads(line[len("RESULT ") :]), "cpu_steal": (steal1 - steal0) / (total1 - total0)})
        print(json.dumps(results[-1], indent=1), flush=True)
    write_report(results, a.out, meta)


if __name__ == "__main__":
    main()
