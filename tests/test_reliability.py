"""How runs end: a full disk, a failing thread, a peer that never joins. Each leaves what it should, and exits with
the status a scheduler expects (Ctrl-C, SIGTERM and SIGKILL with a resume: test_runs.py)."""

import dataclasses
import errno
import glob
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import types

import jax
import pytest
import tyro

import muzero_minatar as m
import muzero_run
from test_runs import CHECKPOINTED, ENV, SMALL_RUN, checkpoint_iteration, run


class FullDisk:
    """A file on a full disk: half of the first write lands, then ENOSPC."""

    def __init__(self, f):
        self.f = f

    def write(self, data):
        self.f.write(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def test_a_full_disk_keeps_the_last_checkpoint_whole_and_says_where_it_is(tmp_path, monkeypatch, capsys):
    """The disk fills once the first checkpoint is written: the second checkpoint and the model saved on the way out
    fail, no partial file is left, and the first checkpoint is whole and resumable."""

    def open_(path, mode="r", *a, **k):
        f = open(path, mode, *a, **k)
        full = "w" in mode and glob.glob(str(tmp_path / "runs" / "*" / muzero_run.CHECKPOINT_FILE))
        return FullDisk(f) if full else f

    monkeypatch.setattr(muzero_run, "open", open_, raising=False)  # the script's own writes: checkpoint, model, its flags
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OSError) as info:
        m.main(tyro.cli(m.Args, args=CHECKPOINTED))
    (run_dir,) = glob.glob(os.path.join("runs", "*"))
    model = os.path.join(run_dir, "muzero_minatar.muzero_model")
    assert info.value.errno == errno.ENOSPC and "muzero_model could not be written" in str(info.value)  # the model
    assert str(info.value).endswith("could not be written (No space left on device); nothing was written")
    resume = f"--resume {run_dir} continues from its checkpoint at step 256: python "  # cli's last line
    assert muzero_run.continue_line(muzero_run.open_runs[-1]).startswith(resume)
    errors, error = [], info.value
    while error:  # the model's error, raised while the checkpoint's went up
        errors, error = errors + [str(error)], error.__cause__ or error.__context__
    checkpoint_error = f"{run_dir}/checkpoint.pkl could not be written (No space left on device); the previous"
    assert any(checkpoint_error in e for e in errors), errors
    assert f"checkpoint at step 256: --resume {run_dir} continues from it" in capsys.readouterr().out.splitlines()
    assert sorted(os.listdir(run_dir)) == ["checkpoint.pkl"] + sorted(f for f in os.listdir(run_dir) if "events" in f)
    monkeypatch.setattr(muzero_run, "open", open)
    assert checkpoint_iteration(os.path.join(run_dir, "checkpoint.pkl")) == 1
    args = tyro.cli(m.Args, args=[*CHECKPOINTED, "--resume", run_dir])
    assert (
        muzero_run.read_checkpoint(m.SCRIPT, args)["progress"].num_updates == 0
    )  # learning starts at 256 steps: no update before
    assert not os.path.exists(model)


def test_a_model_saved_on_a_full_disk_leaves_the_previous_model_whole(tmp_path, monkeypatch):
    args = tyro.cli(m.Args, args=SMALL_RUN)
    params = m.init_params(m.make_network(args, 4), args, jax.random.PRNGKey(0))
    path = str(tmp_path / "muzero_minatar.muzero_model")
    muzero_run.save_model(path, m.SCRIPT, args, params, 0)
    before = {name: open(tmp_path / name, "rb").read() for name in os.listdir(tmp_path)}
    monkeypatch.setattr(muzero_run, "open", lambda *a, **k: FullDisk(open(*a, **k)), raising=False)
    with pytest.raises(OSError, match="the previous .* is whole"):
        muzero_run.save_model(path, m.SCRIPT, dataclasses.replace(args, seed=4), jax.tree.map(lambda x: x + 1, params), 0)
    assert {name: open(tmp_path / name, "rb").read() for name in os.listdir(tmp_path)} == before  # no .tmp either


@pytest.mark.parametrize("checkpoints", [True, False])
def test_a_full_disk_at_the_final_save_leaves_the_run_resumable_and_no_json_alone(tmp_path, monkeypatch, checkpoints):
    """Room for the checkpoints but not for the model: the run stops with the error and how to retry; no
    finished.json (so --resume takes the run), no model's json without its parameters."""

    def open_(path, mode="r", *a, **k):
        f = open(path, mode, *a, **k)
        return FullDisk(f) if "w" in mode and "muzero_model" in str(path) else f

    monkeypatch.setattr(muzero_run, "open", open_, raising=False)
    monkeypatch.chdir(tmp_path)
    flags = CHECKPOINTED if checkpoints else [*SMALL_RUN, "--save-model"]
    with pytest.raises(OSError) as info:
        m.main(tyro.cli(m.Args, args=flags))
    (run_dir,) = glob.glob(os.path.join("runs", "*"))
    assert sorted(f for f in os.listdir(run_dir) if "events" not in f) == (["checkpoint.pkl"] if checkpoints else [])
    retry = f"--resume {run_dir} continues from its checkpoint at step 1280: " if checkpoints else "there is no checkpoint"
    assert str(info.value).startswith("[Errno 28] the parameters after 80 updates are not saved: ")
    assert muzero_run.continue_line(muzero_run.open_runs[-1]).startswith(retry)  # cli's last line
    if checkpoints:  # the run is taken up again: not finished
        monkeypatch.setattr(muzero_run, "open", open)
        args = tyro.cli(m.Args, args=[*CHECKPOINTED, "--resume", run_dir])
        assert muzero_run.read_checkpoint(m.SCRIPT, args)["progress"].iteration == 5


def test_a_model_json_is_written_after_the_parameters_with_their_sha256(tmp_path, monkeypatch):
    args = tyro.cli(m.Args, args=SMALL_RUN)
    params = m.init_params(m.make_network(args, 4), args, jax.random.PRNGKey(0))
    path = str(tmp_path / "muzero_minatar.muzero_model")
    written = []
    real_atomic_write = muzero_run.atomic_write

    def atomic_write(target, write):
        written.append(os.path.basename(target))
        real_atomic_write(target, write)

    monkeypatch.setattr(muzero_run, "atomic_write", atomic_write)
    muzero_run.save_model(path, m.SCRIPT, args, params, 0)
    assert written == ["muzero_minatar.muzero_model", "muzero_minatar.muzero_model.json"]  # the json last
    saved = json.load(open(path + ".json"))
    assert saved["sha256"] == hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_a_run_stopped_before_its_first_update_says_there_is_nothing_to_save(tmp_path, capsys):
    args = tyro.cli(m.Args, args=[*SMALL_RUN, "--save-model"])
    params = m.init_params(m.make_network(args, 4), args, jax.random.PRNGKey(0))
    run = muzero_run.Run(m.SCRIPT, args, str(tmp_path), writer=types.SimpleNamespace(close=lambda: None))
    muzero_run.close_run(run, lambda: params, num_updates=0, steps_played=0)
    assert capsys.readouterr().out == "no update was made: there are no trained parameters to save\n"
    assert os.listdir(tmp_path) == []
    muzero_run.close_run(run, lambda: params, num_updates=3, steps_played=96)
    assert sorted(os.listdir(tmp_path)) == ["muzero_minatar.muzero_model", "muzero_minatar.muzero_model.json"]
    assert json.load(open(tmp_path / "muzero_minatar.muzero_model.json"))["step"] == 96


def test_an_events_file_that_cannot_be_written_ends_the_run_with_exit_1_and_the_model_saved(tmp_path):
    """tensorboardX's writing thread dies of ENOSPC after its first events: the run stops within an iteration with
    exit 1 naming the error, instead of waiting on the writer's queue forever, and --save-model still saves."""
    code = (
        "import errno, os, tyro, muzero_minatar as m\n"
        "from tensorboardX import event_file_writer as w\n"
        "written = []\n"
        "def write_event(self, event):\n"
        "    written.append(event)\n"
        "    if len(written) > 30: raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n"
        "w.EventsWriter.write_event = write_event\n"
        f"m.main(tyro.cli(m.Args, args={[*SMALL_RUN, '--save-model']}))"
    )
    start = time.time()
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert time.time() - start < 300
    assert out.returncode == 1, out.stderr[-3000:]
    assert "OSError: [Errno 28] No space left on device" in out.stderr and "RuntimeError: thread " in out.stderr
    assert "stopped" in out.stderr.splitlines()[-1], out.stderr[-2000:]
    assert "updates are saved to runs/" in out.stdout
    (model,) = glob.glob(str(tmp_path / "runs" / "*" / "muzero_minatar.muzero_model"))
    assert os.path.isfile(model + ".json") and not glob.glob(str(tmp_path / "runs" / "*" / "finished.json"))


def test_a_process_whose_peers_do_not_join_stops_with_exit_1_naming_them(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    flags = f"--num-processes 2 --process-id 1 --coordinator-address 127.0.0.1:{port} --distributed-timeout 3"
    start = time.time()
    out = run(flags.split(), tmp_path, timeout=120)
    assert out.returncode == 1 and time.time() - start < 60
    assert f"process 1: process 0 (the coordinator, 127.0.0.1:{port}) has not joined within --distributed-timeout 3 s" in (
        out.stderr
    )
    assert os.listdir(tmp_path) == []


FAILURES = {  # a BaseException, not an Exception: the kind of error that used to leave the other thread waiting forever
    "actor": """
real_step = m.MinAtarVecEnv.step
def step(self, actions):  # the actor's first environment step raises, before it ever fetches parameters
    if threading.current_thread() is not threading.main_thread():
        raise Boom("actor")
    return real_step(self, actions)
m.MinAtarVecEnv.step = step
""",
    "learner": """
def add(self, segments, priorities):  # the learner fails on its first rollout while the actor works on the next ones
    raise Boom("learner")
m.Replay.add = add
""",
}


@pytest.mark.parametrize("where", ["actor", "learner"])
def test_a_thread_that_dies_ends_the_run_with_exit_1_in_bounded_time(tmp_path, where):
    code = (
        "import atexit, threading, tyro, muzero_minatar as m\nclass Boom(BaseException): pass\n"
        + FAILURES[where]
        + "atexit.register(lambda: print('threads at exit:', [t.name for t in threading.enumerate()]))\n"
        + f"m.main(tyro.cli(m.Args, args={[*SMALL_RUN, '--eval-episodes', '0', '--save-model']}))"
    )
    start = time.time()
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert time.time() - start < 300  # compiling included; before, the learner blocked forever
    # exit 1 with the error, not an abort (134) of a thread still inside XLA at exit
    assert out.returncode == 1 and f"Boom: {where}" in out.stderr and "Fatal Python error" not in out.stderr, out.stderr
    assert "threads at exit: ['MainThread']" in out.stdout  # the actor thread was joined before the error went up
    if where == "learner":  # it failed before its first update: there is nothing to save
        assert "saved" not in out.stdout and not glob.glob(str(tmp_path / "runs" / "*" / "*.muzero_model"))


def test_steps_per_second_after_a_resume_count_the_steps_since_it():
    logged = {}

    class Writer:
        def add_scalar(self, tag, value, step):
            logged[tag] = value

    rollout = m.Rollout(None, [], [], {"stats/actor_params_queue_wait": 0.0}, None)
    now = time.time()  # resumed at step 1024 ten seconds ago, now at step 1280
    times = m.IterationTimes(now - 10, 1024, now, now, now, now)
    m.log_iteration(muzero_run.Run(m.SCRIPT, None, "", Writer()), m.Progress(0), [rollout], [], 1280, times, console=False)
    assert 24 <= logged["charts/SPS"] <= 25.6  # 256 steps in 10 s, not 1280


def test_the_atari_script_without_envpool_exits_with_the_install_line(tmp_path):
    code = "import sys; sys.modules['envpool'] = None; import muzero_atari_multigpu"  # as if it were not installed
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "envpool is not installed: pip install -e '.[atari]'" in out.stderr, out.stderr


def run_cli(tmp_path, main_code: str, flags: list) -> subprocess.Popen:
    """`muzero_run.cli` of muzero_minatar.py with `flags`, its main replaced by `main_code` (Python defining main)."""
    code = (
        "import errno, os, sys, muzero_run, muzero_minatar as m\n"
        f"{main_code}\n"
        f"sys.argv = ['muzero_minatar.py', *{flags!r}]\n"
        "muzero_run.cli(main, m.Args)\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code], cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


STUCK = (  # a run whose learner does not come back to Python, as inside an XLA compilation, with `UPDATES` unsaved
    "def main(args):\n"
    "    run = muzero_run.open_run(m.SCRIPT, args, None, 256, 6)\n"
    "    muzero_run.end_iteration(run, UPDATES)\n"
    "    print('stuck', flush=True)\n"
    "    os.read(os.pipe()[0], 1)  # Python's handler runs inside it, and the read goes on\n"
)


def test_a_signal_stops_a_run_stuck_in_xla_within_10_s_when_nothing_trained_would_be_lost(tmp_path):
    proc = run_cli(tmp_path, "UPDATES = 0\n" + STUCK, SMALL_RUN)
    assert proc.stdout.readline().startswith("run: runs/")
    while proc.stdout.readline() != "stuck\n":
        pass
    start = time.time()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143 and muzero_run.STOP_SECONDS <= time.time() - start < 10
    last = proc.stderr.read().splitlines()[-1]
    assert last == "SIGTERM: stopped at once; there is no checkpoint to continue from (--checkpoint-interval N writes them)"


def test_a_second_signal_stops_a_run_stuck_in_xla_at_once_when_it_has_trained(tmp_path):
    proc = run_cli(tmp_path, "UPDATES = 5\n" + STUCK, SMALL_RUN)
    while proc.stdout.readline() != "stuck\n":
        pass
    proc.send_signal(signal.SIGINT)
    with pytest.raises(subprocess.TimeoutExpired):  # the trained parameters are worth the wait
        proc.wait(timeout=muzero_run.STOP_SECONDS + 2)
    assert proc.stdout.readline().startswith("still inside XLA: the run stops once it returns")
    start = time.time()
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130 and time.time() - start < 2
    assert proc.stderr.read().splitlines()[-1].startswith("SIGINT: stopped at once; there is no checkpoint")


@pytest.mark.parametrize("full", ["muzero_model", "checkpoint"])
def test_a_failed_run_ends_with_what_failed_and_the_resume_command(tmp_path, full):
    """The disk fills at the final save (or at the second checkpoint): the last line of the run's output is the
    --resume sentence with the command that continues, and no traceback comes after the failure's paragraph."""
    patch = (
        "class FullDisk:\n"
        "    def __init__(self, f): self.f = f\n"
        "    def write(self, data): raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n"
        "    def __getattr__(self, name): return getattr(self.f, name)\n"
        "    def __enter__(self): return self\n"
        "    def __exit__(self, *exc): self.f.close()\n"
        "def open_(path, mode='r', *a, **k):\n"
        "    f = open(path, mode, *a, **k)\n"
        f"    full = 'w' in mode and {full!r} in str(path) and os.path.exists(str(path).replace('.tmp', ''))\n"
        "    return FullDisk(f) if full or ('w' in mode and 'muzero_model' in str(path) and FULL_MODEL) else f\n"
        f"FULL_MODEL = {full == 'muzero_model'}\n"
        "muzero_run.open = open_\n"
        "main = m.main\n"
    )
    proc = run_cli(tmp_path, patch, CHECKPOINTED)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err[-3000:]
    (run_dir,) = os.listdir(tmp_path / "runs")
    step = 1280 if full == "muzero_model" else 256  # the last checkpoint written whole (the last iteration writes none)
    paragraph = err[err.rindex("\nthe run ") :].splitlines()
    assert paragraph[1].startswith(f"the run runs/{run_dir} failed: OSError: [Errno 28] ")
    assert paragraph[2] == (
        f"--resume runs/{run_dir} continues from its checkpoint at step {step}: "
        f"python muzero_minatar.py {' '.join(CHECKPOINTED)} --resume runs/{run_dir}"
    )
    assert len(paragraph) == 3 and "Traceback" in err  # the error's traceback, before the paragraph
