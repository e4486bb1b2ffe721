"""End-to-end tests: the script as a researcher runs it, in a subprocess."""

import ast
import dataclasses
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import jax
import numpy as np
import pytest
import tyro
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

import muzero_minatar as m
import muzero_breakthrough as bt
import muzero_minatar_reanalyze as r
import muzero_atari_multigpu as ma
import muzero_run
import muzero_tools as tools

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "muzero_minatar.py")
REANALYZE_SCRIPT = os.path.join(os.path.dirname(SCRIPT), "muzero_minatar_reanalyze.py")
ENV = {**os.environ, "WANDB_MODE": "disabled", "COLUMNS": "500"}
SMALL_RUN = (
    "--total-timesteps 1536 --num-envs 8 --num-steps 32 --learning-starts 256 --batch-size 32 --buffer-size 4096 "
    "--channels 8 --repr-blocks 1 --pred-blocks 0 --head-hidden 16 --num-simulations 4 --eval-num-simulations 4 "
    "--eval-episodes 2 --max-episode-steps 50 --eval-interval 768 --seed 3"
).split()
REANALYZE_SEARCH = ["--reanalyze-num-simulations", "8"]  # the small run's reanalysis searches (its golden run's)
# push mode with the base's replay ratio, priorities and bootstrap: the reanalyze script's settings before its defaults
# became reanalysis at sampling time, pinned so that its golden runs (made on two cache sizes) still hold
PUSH = "--reanalyze-mode push --replay-ratio 2 --priority-exponent 1 --value-bootstrap search --td-age-updates 0".split()


def run(args, cwd, timeout=600, script=SCRIPT):
    return subprocess.run([sys.executable, script, *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout)


def run_together(jobs, timeout=600):
    """[(args, cwd, script, env)] started at once (XLA compiles on one core: two small runs take little more wall
    time than one; processes of one jax.distributed run must run together); each must exit 0, and every failing
    one's output is shown: its last progress lines, its first Python traceback (the cause, which a later abort's
    thread dump would push out of the tail) and its stderr's end. Output goes to files, not pipes: a pipe nobody
    reads yet fills up and stalls its process, and one stalled process of a jax.distributed run stalls the
    others. A process still running after `timeout` gets SIGABRT, on which faulthandler prints every thread's
    stack (JAX catches SIGTERM)."""
    outs = [(tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")) for _ in jobs]
    procs = [
        subprocess.Popen(
            ["timeout", "-s", "ABRT", "-k", "30", str(timeout), sys.executable, "-X", "faulthandler", script, *args],
            cwd=cwd,
            env=env or ENV,
            stdout=out,
            stderr=err,
        )
        for (args, cwd, script, env), (out, err) in zip(jobs, outs)
    ]
    start, ended = time.time(), {}
    try:
        while len(ended) < len(procs) and time.time() - start < timeout + 60:
            for i, p in enumerate(procs):
                if i not in ended and p.poll() is not None:
                    ended[i] = time.time() - start  # when each ended: which process of a failed run went first
            time.sleep(0.2)
    finally:  # none is left running
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()  # its returncode (-9) then counts it as failed
    failed = []
    for i, ((args, _, script, _), p, (out, err)) in enumerate(zip(jobs, procs, outs)):
        out.seek(0), err.seek(0)
        if p.returncode:
            stdout, stderr = out.read(), err.read()
            first = stderr.find("Traceback (most recent call last)")
            when = f"after {ended[i]:.0f} s" if i in ended else "killed"
            failed.append(
                f"--- {os.path.basename(script)} {' '.join(args)} (exit {p.returncode} {when}):\n"
                f"[stdout, end]\n{stdout[-1000:]}\n"
                + (f"[stderr, first traceback]\n{stderr[first : first + 3000]}\n" if first >= 0 else "")
                + f"[stderr, end]\n{stderr[-2500:]}"
            )
        out.close(), err.close()
    assert not failed, "\n".join(failed)


def field_docstrings(script):
    """Args field -> the docstring written under it in the source."""
    tree = ast.parse(open(script).read())
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Args").body
    docs = {}
    for node, nxt in zip(body, body[1:]):
        if isinstance(node, ast.AnnAssign) and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
            docs[node.target.id] = nxt.value.value
    return docs


@pytest.mark.parametrize(
    "module",
    [m, r, bt, ma],
    ids=["muzero_minatar", "muzero_minatar_reanalyze", "muzero_breakthrough", "muzero_atari_multigpu"],
)
def test_help_documents_every_flag(monkeypatch, capsys, module):
    monkeypatch.setenv("COLUMNS", "500")  # one line per flag: the docstrings are not wrapped
    monkeypatch.setattr(sys, "argv", [module.__file__, "--help"])
    with pytest.raises(SystemExit) as exit_:
        tyro.cli(module.Args)
    assert exit_.value.code == 0
    out = capsys.readouterr()
    docs = field_docstrings(module.__file__)
    help_text = " ".join(out.out.split())
    for field in dataclasses.fields(module.Args):
        assert f"--{field.name.replace('_', '-')}" in help_text
        assert docs.get(field.name), f"{field.name} has no docstring"
        assert " ".join(docs[field.name].split())[:40] in help_text, field.name


def test_no_script_imports_the_tools_and_the_run_module_imports_no_script():
    """The scripts import muzero_run.py (what a run needs that is not MuZero) and never muzero_tools.py, which imports
    them: no circle of imports, and a training run does not load the tools' plotting libraries."""
    scripts = ["muzero_minatar", "muzero_minatar_reanalyze", "muzero_breakthrough", "muzero_atari_multigpu"]
    for name in [*scripts, "muzero_run"]:
        with open(os.path.join(os.path.dirname(m.__file__), f"{name}.py")) as f:
            tree = ast.parse(f.read())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert "muzero_tools" not in imported, name
        assert ("muzero_run" in imported) == (name != "muzero_run") and not imported & set(scripts), (name, imported)


def assert_refused(module, flags, named, cwd, monkeypatch, capsys, runs_dir_allowed=False):
    """`python script.py *flags` in this process (no second jax start-up), in `cwd`, must stop at once: exit
    status 2, a message naming the flag `named`, no traceback, no `runs/` (unless one was there before: the
    caller checks its files). A run that starts instead fails the test at once."""
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", [module.__file__, *flags])

    def started(*a, **k):
        raise AssertionError(f"{flags} were accepted: the run started")

    monkeypatch.setattr(muzero_run, "SummaryWriter", started)
    with pytest.raises(SystemExit) as exit_:
        module.main(tyro.cli(module.Args))
    stderr = capsys.readouterr().err
    assert exit_.value.code == 2 and named in stderr and "Traceback" not in stderr, stderr
    assert runs_dir_allowed or not os.path.exists(os.path.join(cwd, "runs"))  # stopped before anything was written


def scalars(run_dir, prefixes):
    acc = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"] if tag.startswith(prefixes)}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    dirs = [tmp_path_factory.mktemp(name) for name in ("a", "b")]
    # --track (W&B disabled) and --capture-video must not change what the run learns. One after the other:
    # the second loads what the first compiled from the tests' compilation cache
    for d, extra in zip(dirs, ([], ["--track", "--capture-video"])):
        run_together([([*SMALL_RUN, "--save-model", *extra], d, SCRIPT, None)])
    return dirs


def test_smoke_run_writes_events_and_a_loadable_model(two_runs):
    (run_dir,) = glob.glob(str(two_runs[0] / "runs" / "*"))
    assert os.path.basename(run_dir).startswith("Breakout__muzero_minatar__3__")
    logged = scalars(run_dir, ("charts/", "losses/", "stats/"))
    for tag in [
        "charts/episodic_return",
        "charts/eval_episodic_return",
        "charts/SPS",
        "charts/root_value",
        "charts/policy_entropy",
        "losses/total_loss",
        "losses/policy_loss",
        "losses/value_loss",
        "losses/reward_loss",
        "losses/consistency_loss",
        "stats/learner_rollout_queue_wait",
        "stats/actor_params_queue_wait",
    ]:
        assert tag in logged, tag
    # 6 iterations of 256 steps; learning starts once 256 positions are stored
    assert [s for s, _ in logged["losses/total_loss"]][0] == 512
    assert len(logged["losses/total_loss"]) == 5
    assert [s for s, _ in logged["charts/eval_episodic_return"]] == [768, 1536]
    assert all(np.isfinite(v) for _, v in logged["losses/total_loss"])

    (model,) = glob.glob(os.path.join(run_dir, "*.muzero_model"))
    _, args, net, params = tools.load_model(model)
    assert args.channels == 8 and args.seed == 3
    returns = tools.evaluate(model, eval_episodes=3, seed=5)
    assert returns.shape == (3,)
    assert np.all(returns >= 0) and np.all(returns <= 50)  # Breakout: +1 a brick, at most 50 steps
    np.testing.assert_array_equal(returns, tools.evaluate(model, eval_episodes=3, seed=5))


def test_capture_video_writes_an_evaluation_gif(two_runs):
    from PIL import Image

    from muzero_run import FRAME_SIZE

    gifs = sorted(glob.glob(str(two_runs[1] / "videos" / "*" / "eval_*.gif")))
    assert [os.path.basename(g) for g in gifs] == ["eval_1536.gif", "eval_768.gif"]
    with Image.open(gifs[0]) as gif:
        assert gif.size == (FRAME_SIZE, FRAME_SIZE) == (320, 320)  # the observation (muzero_tools' episode adds the search)
        assert gif.n_frames >= 2  # an episode of at least two observations


# what a run computes (not how long it took): two runs that log the same values here ran the same
RUN_TAGS = (
    "losses/",
    "charts/episodic_return",
    "charts/episodic_length",
    "charts/eval_episodic_return",
    "charts/num_updates",
    "charts/root_value",
    "charts/policy_entropy",
    "stats/replay_size",
)


@pytest.fixture(scope="module")
def reanalyze_runs(tmp_path_factory):
    """muzero_minatar_reanalyze.py on the small run at push mode's reanalyze ratios 0 and 0.5, and at its defaults."""
    flags = {ratio: [*SMALL_RUN, *PUSH, "--reanalyze-ratio", ratio, *REANALYZE_SEARCH] for ratio in ("0", "0.5")}
    flags["defaults"] = SMALL_RUN
    cwds = {name: tmp_path_factory.mktemp(f"reanalyze{name}") for name in flags}
    for name, d in cwds.items():  # one after the other, as two_runs
        run_together([(flags[name], d, REANALYZE_SCRIPT, None)])
    return {name: glob.glob(str(d / "runs" / "*"))[0] for name, d in cwds.items()}


def test_golden_run_muzero_minatar(two_runs, golden):
    (run_dir,) = glob.glob(str(two_runs[0] / "runs" / "*"))
    golden("muzero_minatar", ["python", "muzero_minatar.py", *SMALL_RUN, "--save-model"], scalars(run_dir, RUN_TAGS))


def test_golden_runs_on_other_caches_share_what_a_new_machine_is_held_to():
    """The committed golden runs of one script made on different CPU caches agree where check_across_caches asks
    a machine without a golden run of its own to agree; and that check finds a change in either part."""
    from conftest import GOLDEN_DIR, check_across_caches, golden_path

    runs = {}
    for path in sorted(glob.glob(os.path.join(GOLDEN_DIR, "*.json"))):
        with open(path) as f:
            made = json.load(f)
        name = os.path.basename(path).split(".")[0]
        assert path == golden_path(name, made["caches"]), "a golden file not named by the caches it was made on"
        runs.setdefault(name, []).append(made)
    assert sorted(runs) == ["muzero_atari_multigpu", "muzero_breakthrough", "muzero_minatar", "muzero_minatar_reanalyze"]
    pairs = [(a, b) for made in runs.values() for i, a in enumerate(made) for b in made[i + 1 :]]
    # a script's golden run on a second cache size comes when a machine with that size makes it (today MinAtar,
    # reanalyze and Breakthrough have two sizes, 32K and 48K; Atari 32K only, since its first convolution changed)
    assert len(pairs) >= 3 and all(a["caches"] != b["caches"] for a, b in pairs)
    for a, b in pairs:
        assert check_across_caches(a["series"], b) == [] == check_across_caches(b["series"], a)
    golden = runs["muzero_minatar"][0]
    acting = {**golden["series"], "charts/root_value": [[256, 0.5]] + golden["series"]["charts/root_value"][1:]}
    loss = dict(golden["series"])
    loss["losses/total_loss"] = [[step, value * 1.2] for step, value in loss["losses/total_loss"]]
    assert check_across_caches(acting, golden) == ["charts/root_value: entries before step 512 differ"]
    assert [p.split(":")[0] for p in check_across_caches(loss, golden)] == ["losses/total_loss"]


def test_golden_run_muzero_minatar_reanalyze(reanalyze_runs, golden):
    golden(
        "muzero_minatar_reanalyze",
        ["python", "muzero_minatar_reanalyze.py", *SMALL_RUN, *PUSH, "--reanalyze-ratio", "0.5", *REANALYZE_SEARCH],
        scalars(reanalyze_runs["0.5"], RUN_TAGS + ("charts/reanalysed_positions", "reanalyze/")),
    )


def test_reanalyze_ratio_0_is_muzero_minatar(two_runs, reanalyze_runs):
    (reference,) = glob.glob(str(two_runs[0] / "runs" / "*"))
    variant = scalars(reanalyze_runs["0"], RUN_TAGS + ("charts/reanalysed_positions", "reanalyze/"))
    assert [v for _, v in variant.pop("charts/reanalysed_positions")] == [0.0] * 6
    assert variant == scalars(reference, RUN_TAGS)  # every value the base script logs, bit for bit


def test_reanalyze_ratio_half_doubles_the_generated_targets(reanalyze_runs):
    base, half = (scalars(reanalyze_runs[k], ("charts/", "reanalyze/")) for k in ("0", "0.5"))
    # 8 environments: 8 reanalysed segments join the 8 played ones each iteration once learning starts, and
    # updates follow all of them (thesis 5.5), so the run makes twice the updates for the same frames
    assert half["charts/num_updates"][-1][1] == 2 * base["charts/num_updates"][-1][1] == 160
    reanalysed = [v for _, v in half["charts/reanalysed_positions"]]
    assert reanalysed[0] == 0 < reanalysed[1] and all(b > a for a, b in zip(reanalysed[1:], reanalysed[2:]))
    assert reanalysed[-1] <= 5 * 8 * (32 + 15)  # at most every step of 8 segments after their history, 5 times
    changes = [v for _, v in half["reanalyze/value_change"]]
    assert len(changes) == 5 and all(np.isfinite(changes)) and max(changes) > 0  # newer parameters, new values
    ages = [v for _, v in half["reanalyze/targets_age_updates"]]
    assert all(0 <= a <= 160 for a in ages) and ages[-1] > 0


def test_the_reanalyze_script_reanalyses_at_its_defaults(reanalyze_runs):
    """No reanalysis flag: each update searches a quarter of its batch again (32 x 0.25 = 8 samples, K + 1 = 6
    positions each) and trains on policies that differ from the stored ones; replay ratio 4, twice the base's updates."""
    logged = scalars(reanalyze_runs["defaults"], ("charts/", "reanalyze/"))
    updates = logged["charts/num_updates"][-1][1]
    assert updates == 2 * scalars(reanalyze_runs["0"], ("charts/",))["charts/num_updates"][-1][1] == 160
    assert logged["charts/reanalysed_positions"][-1][1] == updates * 8 * 6
    changes = [v for _, v in logged["reanalyze/policy_change"]]
    assert len(changes) == 5 and all(0 < change <= 1 for change in changes)


def test_same_seed_same_logs(two_runs):
    logs = [
        scalars(glob.glob(str(d / "runs" / "*"))[0], ("losses/", "charts/episodic_return", "charts/eval_episodic_return"))
        for d in two_runs
    ]
    assert logs[0]["charts/episodic_return"], "no episode finished"
    assert logs[0] == logs[1]


def test_benchmark_results_step(two_runs, tmp_path):
    """muzero_tools.py's results step (collect, report, select, called in this process): the per-game CSV holds
    the run's evaluation curve; seeds are aggregated in the table; collecting a game and seed again replaces its rows."""
    import pandas as pd

    (run_dir,) = glob.glob(str(two_runs[0] / "runs" / "*"))
    evals = scalars(run_dir, ("charts/eval_episodic_return",))["charts/eval_episodic_return"]
    other_seed = tmp_path / "Breakout__muzero_minatar__4__1"  # the same events, filed as seed 4
    shutil.copytree(run_dir, other_seed)
    out = tmp_path / "out"
    for d, wall, steal in ((run_dir, 60, 0.1), (other_seed, 90, 0.2), (other_seed, 120, 0.3)):
        tools.run_collect(tools.Collect(str(d), wall_time=wall, cpu_steal=steal, out=str(out)))
    pd.DataFrame({"env_id": ["Breakout"], "random_return": [0.25]}).to_csv(out / "random.csv", index=False)
    tools.run_report(tools.Report(str(out)))

    curve = pd.read_csv(out / "Breakout.csv")
    assert curve.seed.tolist() == [3, 3, 4, 4]
    assert list(zip(curve.step, curve.eval_return))[:2] == [(s, pytest.approx(v)) for s, v in evals]
    runs = pd.read_csv(out / "runs.csv")
    assert runs.seed.tolist() == [3, 4] and runs.wall_time_min.tolist() == [1.0, 2.0]
    assert runs.final_eval_standard_error.isna().all()  # muzero_minatar.py does not log it (the Atari script does)
    final = evals[-1][1]
    table = open(out / "results.md").read()
    assert (
        f"| Breakout | 3, 4 | {final:.2f} ± 0.00 | {final:.2f} / {final:.2f} | 0.25 | 1,536 | 1.0 – 2.0 | 10 – 30% |" in table
    )
    # the protocol line: the small run's own flags (4 simulations, 2 episodes cut at 50 steps, every 768 frames)
    assert (
        runs.protocol.tolist()
        == [
            "sticky actions 0.0; evaluation every 768 frames and at the end: 2 episodes cut at 50 steps; PUCT with 4 "
            "simulations, the action drawn from the visit counts at temperature 0.25, Dirichlet(0.1) noise on 0.25 of the "
            "root prior"
        ]
        * 2
    )
    assert f"\nProtocol: {runs.protocol[0]}.\n" in table
    assert "/Breakout.png)" in open(out / "figures.md").read()
    with open(out / "Breakout.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    # select: one seed's rows copied to another folder (the base runs as reanalyze ratio 0)
    tools.run_select(tools.Select(str(out), games=("Breakout",), seeds=(4,), out=str(tmp_path / "picked")))
    for name in ("runs.csv", "Breakout.csv", "Breakout_train.csv"):
        whole = tools.read_table(out / name)  # the commit column as text: a short hash of digits alone parses as a number
        picked = tools.read_table(tmp_path / "picked" / name)
        pd.testing.assert_frame_equal(picked, whole[whole.seed == 4].reset_index(drop=True))


CHECKPOINTED = [*SMALL_RUN, "--save-model", "--checkpoint-interval", "256"]  # a checkpoint every iteration


def checkpoint_iteration(path, script=m):
    try:
        return muzero_run.load_checkpoint(path, script.SCRIPT)["progress"].iteration
    except (OSError, ValueError):  # not there yet, or being written
        return 0


def file_states(root):
    return {p: open(p, "rb").read() for p in glob.glob(str(root / "**" / "*"), recursive=True) if os.path.isfile(p)}


def stop(d, sig, flags, stop_after, script=m, env=ENV, steps=256):
    """Runs `script flags` in folder `d` until its checkpoint after iteration `stop_after` (of `steps` steps) is
    written, then sends it `sig`: SIGKILL leaves no new model, Ctrl-C and SIGTERM exit 130 and 143 with the model
    saved. Returns the run directory and the iteration of its last checkpoint (the run may have written one more
    before the signal came)."""
    with tempfile.TemporaryFile("w+") as err:  # (a pipe nobody reads could fill up and stall the run)
        proc = subprocess.Popen(
            [sys.executable, script.__file__, *flags], cwd=d, env=env, stdout=subprocess.PIPE, stderr=err, text=True
        )
        stdout = ""
        for line in proc.stdout:  # the script prints a line as soon as a checkpoint is written
            stdout += line
            if line.startswith("checkpoint at step ") and int(line.split()[3][:-1]) >= steps * stop_after:
                os.kill(proc.pid, sig)
                break
        stdout += proc.stdout.read()  # Ctrl-C and SIGTERM: within seconds, the model saved
        proc.wait(timeout=120)
        err.seek(0)
        stderr = err.read()
    assert proc.returncode == (-sig if sig == signal.SIGKILL else 128 + sig), f"exit {proc.returncode}: {stderr[-3000:]}"
    (run_dir,) = glob.glob(str(d / "runs" / "*"))
    stopped_at = checkpoint_iteration(os.path.join(run_dir, "checkpoint.pkl"), script)
    assert stop_after <= stopped_at <= stop_after + 1
    resume = f"checkpoint at step {steps * stopped_at}: --resume {os.path.relpath(run_dir, d)} continues from it"
    if sig == signal.SIGKILL:
        assert "--resume" in flags or not glob.glob(os.path.join(run_dir, "*.muzero_model"))  # it stopped at once
    else:
        saved = "updates are saved to"  # the model
        assert resume in stdout.splitlines() and saved in stdout and "Traceback" not in stderr, stdout + stderr[-3000:]
        last = stderr.splitlines()[-1]  # the command that continues from the checkpoint
        assert last.startswith(f"{signal.Signals(sig).name}: stopped; --resume {os.path.relpath(run_dir, d)} continues"), last
    return run_dir, stopped_at


def resume_to_the_end(d, run_dir, flags, stopped_at, script=m, env=ENV, steps=256):
    resumed = subprocess.run(
        [sys.executable, script.__file__, *flags, "--resume", os.path.relpath(run_dir, d)],
        cwd=d,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resumed at step {steps * stopped_at}" in resumed.stdout


@pytest.fixture(scope="module")
def stopped_three_times(tmp_path_factory):
    """The checkpointed run (6 iterations, a checkpoint after each but the last) stopped by SIGKILL after its first
    checkpoint, resumed and stopped by Ctrl-C after a new one, resumed and stopped by SIGTERM after a new one, then
    resumed to the end. Returns the run directory and a copy of the runs as the SIGKILL left them."""
    d = tmp_path_factory.mktemp("stopped")
    run_dir, stopped_at = stop(d, signal.SIGKILL, CHECKPOINTED, 1)
    saved = d / "saved"  # for the refusal tests
    shutil.copytree(d / "runs", saved)
    resumed = [*CHECKPOINTED, "--resume", os.path.relpath(run_dir, d)]
    for sig in (signal.SIGINT, signal.SIGTERM):
        _, stopped_at = stop(d, sig, resumed, stopped_at + 1)
    resume_to_the_end(d, run_dir, CHECKPOINTED, stopped_at)
    return run_dir, saved


def test_a_run_stopped_by_sigkill_ctrl_c_and_sigterm_and_resumed_ends_as_the_uninterrupted_run(two_runs, stopped_three_times):
    run_dir = stopped_three_times[0]
    (reference,) = glob.glob(str(two_runs[0] / "runs" / "*"))
    resumed, uninterrupted = scalars(run_dir, RUN_TAGS), scalars(reference, RUN_TAGS)
    assert len(resumed["losses/total_loss"]) == 5 and len(resumed["charts/eval_episodic_return"]) == 2
    assert resumed == uninterrupted  # every step once (the stopped runs' events after their checkpoint are purged)
    params = tools.load_model(glob.glob(os.path.join(run_dir, "*.muzero_model"))[0])[3]
    reference_params = tools.load_model(glob.glob(os.path.join(reference, "*.muzero_model"))[0])[3]
    for a, b in zip(jax_leaves(params), jax_leaves(reference_params)):
        np.testing.assert_array_equal(a, b)  # bit for bit
    with open(os.path.join(run_dir, muzero_run.FINISHED_FILE)) as f:
        assert json.load(f) == {"step": 1536, "updates": 80}
    # the events files (one more after each checkpoint, several in one second) sort by name in step order
    files = sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*")))
    steps = [[e.step for e in EventFileLoader(f).Load() if e.HasField("summary")] for f in files]
    first_steps = [min(s) for s in steps if s]  # (a stopped run's last file may be empty)
    assert files[-1].endswith(".000000005") and first_steps == sorted(first_steps), (files, first_steps)


SAMPLE_MODE = (  # reanalysis at sampling time with every part on: new policies, target-network values, age, weights
    "--reanalyze-mode sample --reanalyze-ratio 0.5 --value-bootstrap target_network --td-age-updates 20 "
    "--importance-exponent 0.4"
).split()


def test_reanalysis_at_sampling_time_resumes_exactly(tmp_path):
    """--reanalyze-mode sample keeps state outside the learner's: the priorities the learner's errors set, the stored
    steps' ages. A run stopped by SIGTERM after a checkpoint and resumed ends as the uninterrupted run, bit for bit."""
    flags = [*CHECKPOINTED, *REANALYZE_SEARCH, *SAMPLE_MODE]
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    whole.mkdir()
    stopped.mkdir()
    run_together([(flags, whole, REANALYZE_SCRIPT, None)])
    run_dir, stopped_at = stop(stopped, signal.SIGTERM, flags, 3, script=r)
    resume_to_the_end(stopped, run_dir, flags, stopped_at, script=r)
    (reference,) = glob.glob(str(whole / "runs" / "*"))
    resumed, uninterrupted = scalars(run_dir, RUN_TAGS), scalars(reference, RUN_TAGS)
    assert len(resumed["losses/total_loss"]) == 5 and resumed == uninterrupted
    assert uninterrupted["losses/importance_weight"][-1][1] < 1  # weighted samples: the importance exponent is above 0


def jax_leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


@pytest.mark.parametrize(
    "damage, named",
    [
        ("truncate", "--resume"),
        ("flipped_bytes", "its sha256 does not match"),  # 16 bytes changed in the middle: the pickle may still load
        ("other_flags", "--channels"),
        ("removed_flag", "--anneal-lr False (now None)"),  # written by a version of the script with a flag it has no more
        ("added_flag", "--eval-temperature 0.25 (now 0.5)"),  # written before the flag existed: it had its default
    ],
)
def test_bad_checkpoints_are_refused_and_nothing_is_touched(stopped_three_times, tmp_path, monkeypatch, capsys, damage, named):
    _, saved = stopped_three_times
    shutil.copytree(saved, tmp_path / "runs")
    (run_dir,) = glob.glob(str(tmp_path / "runs" / "*"))
    flags = list(CHECKPOINTED)
    if damage == "truncate":
        path = os.path.join(run_dir, "checkpoint.pkl")
        data = open(path, "rb").read()
        open(path, "wb").write(data[: len(data) // 2])
    elif damage == "flipped_bytes":
        path = os.path.join(run_dir, "checkpoint.pkl")
        data = bytearray(open(path, "rb").read())
        middle = len(data) // 2
        data[middle : middle + 16] = bytes(255 - b for b in data[middle : middle + 16])
        open(path, "wb").write(bytes(data))
    elif damage == "removed_flag":
        path = os.path.join(run_dir, "checkpoint.pkl")
        checkpoint = muzero_run.load_checkpoint(path, m.SCRIPT)
        checkpoint["args"]["anneal_lr"] = False
        with open(path, "wb") as f:
            muzero_run.write_checkpoint(f, m.SCRIPT, checkpoint)
    elif damage == "added_flag":
        without_flag(os.path.join(run_dir, "checkpoint.pkl"), "eval_temperature")
        flags += ["--eval-temperature", "0.5"]
    else:
        flags[flags.index("--channels") + 1] = "16"
    before = file_states(tmp_path)
    assert_refused(
        m,
        [*flags, "--resume", os.path.relpath(run_dir, tmp_path)],
        named,
        tmp_path,
        monkeypatch,
        capsys,
        runs_dir_allowed=True,
    )
    assert file_states(tmp_path) == before  # nothing written, nothing overwritten


def without_flag(path: str, flag: str):
    """Rewrites the checkpoint at `path` as a version of the script without `flag` would have written it."""
    checkpoint = muzero_run.load_checkpoint(path, m.SCRIPT)
    del checkpoint["args"][flag]
    with open(path, "wb") as f:
        muzero_run.write_checkpoint(f, m.SCRIPT, checkpoint)


def test_a_checkpoint_written_before_a_flag_existed_resumes_at_the_flags_default(stopped_three_times, tmp_path):
    _, saved = stopped_three_times
    shutil.copytree(saved, tmp_path / "runs")
    (run_dir,) = glob.glob(str(tmp_path / "runs" / "*"))
    without_flag(os.path.join(run_dir, "checkpoint.pkl"), "eval_temperature")
    args = tyro.cli(m.Args, args=[*CHECKPOINTED, "--resume", run_dir])
    assert args.eval_temperature == m.Args().eval_temperature
    checkpoint = muzero_run.read_checkpoint(m.SCRIPT, args)
    assert "eval_temperature" not in checkpoint["args"] and checkpoint["progress"].iteration > 0


def test_readme_evaluate_snippet_works_from_any_directory(two_runs, tmp_path):
    """README: after `pip install -e .`, `from muzero_tools import evaluate` works outside the repository."""
    (model,) = glob.glob(str(two_runs[0] / "runs" / "*" / "muzero_minatar.muzero_model"))
    code = f"from muzero_tools import evaluate; print(list(evaluate({model!r}, eval_episodes=3, seed=5)))"
    env = {k: v for k, v in ENV.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert eval(out.stdout.strip().splitlines()[-1]) == list(tools.evaluate(model, eval_episodes=3, seed=5))
