"""What a run needs that is not MuZero, shared by the four muzero_*.py scripts as CleanRL's scripts share
cleanrl_utils: refusing bad input, joining hosts, signals and the queues between threads, the run's directory,
TensorBoard writer and W&B run, checkpoints and resuming, saved models, the end of a run, and annotated GIFs.
Each script holds the whole agent (networks, planner, replay, targets, loss, actor and learner threads); nothing
here knows MuZero. Plain functions and small records, in the order a run meets them. A script sets its XLA flags
before importing this module (it imports jax).
"""

import dataclasses
import hashlib
import importlib
import io
import json
import math
import os
import pickle
import queue
import select
import shlex
import signal
import socket
import sys
import threading
import time
import traceback
from typing import Any, Callable

import flax
import jax
import numpy as np
import tyro
from jax.experimental import multihost_utils
from tensorboardX import SummaryWriter

MAX_REPLAY_RATIO = 256  # samples per environment step: EfficientZero's (batch 256, an update per step)


# ---------------------------------------------------------------------------------------------
# Bad input: refused before anything is compiled or written
# ---------------------------------------------------------------------------------------------
def fail(message: str, error: type | None = None):
    """Refuses bad input: raises `error` (muzero_tools' BadInput, for Python callers) or, by default, prints the message
    as argparse does and exits with status 2."""
    if error is not None:
        raise error(message)
    print(f"{os.path.basename(sys.argv[0])}: error: {message}", file=sys.stderr)
    sys.exit(2)


def check_folder(name: str, path: str, error: type | None = None):
    """Refuses with fail() a folder to write in that is a file, or that this process cannot create or write in."""
    folder = os.path.abspath(path)
    while not os.path.exists(folder):  # the nearest existing folder is where it would be created
        folder = os.path.dirname(folder)
    if not (os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK)):
        fail(f"{name}: {folder} is not a folder this process can write in", error)


def check_rules(args, rules: list, error: type | None = None):
    """Every float flag finite, then each rule of a script's table: (flag names separated by spaces, a test of the
    value, what the flags must be), refused with fail() naming the flag (raising `error`, if given)."""
    floats = " ".join(f.name for f in dataclasses.fields(args) if f.type is float)
    for names, ok, what in [(floats, math.isfinite, "a finite number"), *rules]:
        for name in names.split():
            if not ok(getattr(args, name)):
                fail(f"--{name.replace('_', '-')} must be {what} (got {getattr(args, name)})", error)


def check_run_flags(args):
    """The flags of a run that every script has: the run's name, the folder it writes in, its length, the updates it
    makes, the coordinator of hosts."""
    name_ok = all(c.isalnum() or c in "-_." for c in args.exp_name) and args.exp_name not in ("", ".", "..")
    if not name_ok or len(args.exp_name) > 100:
        fail(f"--exp-name must be at most 100 letters, digits, '-', '_' and '.' (got {args.exp_name!r}): it names files")
    check_folder(f"--resume {args.resume}" if args.resume else "runs/ (runs are written in ./runs)", args.resume or "runs")
    if args.total_timesteps > 10**12:  # (at the 500 steps a second of a 2-core line, 63 years)
        fail(f"--total-timesteps must be at most 10**12, more than a run could play (got {args.total_timesteps})")
    if args.learning_starts > args.total_timesteps or args.replay_ratio * args.total_timesteps < args.batch_size:
        fail(f"--learning-starts ({args.learning_starts}) and --replay-ratio ({args.replay_ratio}) leave no update to run")
    if args.replay_ratio > MAX_REPLAY_RATIO:  # (the thesis used 4)
        fail(f"--replay-ratio {args.replay_ratio:g} is above {MAX_REPLAY_RATIO} samples per step, EfficientZero's ratio")
    host, _, port = (args.coordinator_address or "").rpartition(":")
    if args.num_processes > 1 and not (host and port.isdigit()):
        fail(f"--num-processes {args.num_processes} needs --coordinator-address host:port of process 0")


def join_processes(args):
    """jax.distributed.initialize (with --num-processes > 1) with a bounded wait: XLA aborts a process whose peers do
    not join, so a watchdog stops it first (exit 1), naming who is missing."""
    if args.num_processes == 1:
        return

    def give_up():
        host, _, port = args.coordinator_address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
            missing = "the other processes have" if args.process_id == 0 else "a process other than 0 has"
        except OSError:
            missing = f"process 0 (the coordinator, {args.coordinator_address}) has"
        waited = f"--distributed-timeout {args.distributed_timeout} s"
        print(f"process {args.process_id}: {missing} not joined within {waited}", file=sys.stderr, flush=True)
        os._exit(1)

    watchdog = threading.Timer(args.distributed_timeout, give_up)
    watchdog.start()
    timeout = args.distributed_timeout + 60  # XLA's own deadline, after the watchdog's
    jax.distributed.initialize(args.coordinator_address, args.num_processes, args.process_id, initialization_timeout=timeout)
    watchdog.cancel()


def check_devices(args):
    """The device flags against this process's devices (after jax.distributed starts, before compiling)."""
    for name in ("actor_device_ids", "learner_device_ids"):
        ids = getattr(args, name)
        if not ids or len(set(ids)) < len(ids) or not all(0 <= i < len(jax.local_devices()) for i in ids):
            fail(
                f"--{name.replace('_', '-')} {ids} must be distinct indices of the {len(jax.local_devices())} local "
                f"devices (on CPU, XLA_FLAGS=--xla_force_host_platform_device_count=N gives N)"
            )
    if (args.batch_size // args.num_processes) % len(args.learner_device_ids):
        fail(f"--batch-size ({args.batch_size}) must split evenly over the --learner-device-ids of each process")


def check_memory(needs: dict):
    """Refuses sizes whose arrays cannot fit in this machine's memory: `needs` maps the flags that set an array's size
    to its bytes in this process (a script's check_memory computes them)."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    total = sum(needs.values()) / 2**30
    if total > memory:
        parts = ", ".join(f"{k} ({v / 2**30:.1f} GiB)" for k, v in sorted(needs.items(), key=lambda kv: -kv[1]))
        fail(f"the run needs about {total:.1f} GiB, mostly for {parts}; this machine has {memory:.1f} GiB")


# ---------------------------------------------------------------------------------------------
# Signals, and the queues between the learner and the actor threads
# ---------------------------------------------------------------------------------------------
class Interrupted(Exception):
    """Ctrl-C or SIGTERM, raised by the learner where it can stop safely (not inside JAX's tracing or a callback)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


signals_received = []  # by on_signal, the handler of SIGINT and SIGTERM when a script runs
STOP_SECONDS = 8  # how long a first signal waits for a run stuck in XLA (compiling) that has nothing trained to lose


def on_signal(signum, frame):
    signals_received.append(signum)


def next_signal(reader: socket.socket, timeout: float | None) -> int | None:
    """The next SIGINT or SIGTERM that their handler wrote to `reader`'s pair within `timeout` seconds, or None."""
    while select.select([reader], [], [], timeout)[0]:
        received = [s for s in reader.recv(64) if s in (signal.SIGINT, signal.SIGTERM)]
        if received:
            return received[0]
    return None


def watch_signals(reader: socket.socket):
    """The thread that sees each SIGINT and SIGTERM at once, also while Python's handler cannot run (inside XLA,
    compiling; an envpool reset). A second signal exits at once; so does a first one after STOP_SECONDS if the run
    has not ended and has made no update since it started or wrote its last checkpoint."""
    first = next_signal(reader, None)
    run = open_runs[-1] if open_runs else None
    if next_signal(reader, STOP_SECONDS) is None and run and run.num_updates > run.saved_updates:
        print("still inside XLA: the run stops once it returns; a second signal stops it at once", flush=True)
        next_signal(reader, None)
    print(f"{signal.Signals(first).name}: stopped at once; {continue_line(run)}", file=sys.stderr, flush=True)
    os._exit(128 + first)


def check_signals():
    """Raises Interrupted once a signal has been received (the learner calls it between updates and while it waits)."""
    if signals_received:
        raise Interrupted(signals_received[0])


class Stopped(Exception):
    """The other thread has ended: stop waiting on the queue."""


def wait_on(queue_op, other_alive: Callable[[], bool], interruptible: bool = False):
    """A queue's get, or put with its item (functools.partial), retried until it succeeds; gives up with Stopped once
    `other_alive()` is False (a get still takes what is left). An `interruptible` wait (the learner's) raises
    Interrupted once a signal has come."""
    while True:
        try:
            return queue_op(timeout=0.5)
        except (queue.Empty, queue.Full):
            if interruptible:
                check_signals()
            if not other_alive():
                raise Stopped


thread_errors = []  # the errors that ended a thread (threading.ExceptHookArgs), recorded by on_thread_error


def on_thread_error(error):
    """threading.excepthook of a run: a thread's error is printed as usual, and end_iteration raises it."""
    thread_errors.append(error)
    threading.__excepthook__(error)


# ---------------------------------------------------------------------------------------------
# The run: its directory, TensorBoard writer and W&B run
# ---------------------------------------------------------------------------------------------
CHECKPOINT_FILE = "checkpoint.pkl"
FINISHED_FILE = "finished.json"  # written when the run has ended and its model is saved: --resume refuses the run
# flags that do not change what a run computes: a resumed run may set them differently
RESUME_FREE_FLAGS = set(
    "resume track wandb_project_name wandb_entity capture_video save_model log_interval checkpoint_interval "
    "coordinator_address save_checkpoint_models".split()
)
# tensorboardX writes events from a thread of its own, which a full disk stops: its queue holds an iteration's events,
# so that the learner reaches end_iteration, which raises that thread's error, rather than wait on the queue forever
EVENTS_QUEUE = 1000
open_runs = []  # the runs open_run opened in this process, for the signal watcher and the failure message (cli)


@dataclasses.dataclass
class Run:
    """An open run of a script in this process."""

    script: str  # the script's name, e.g. muzero_minatar
    args: Any  # its flags (the script's Args)
    dir: str  # runs/{run_name} for process 0, runs/{run_name}/process_{i} for process i
    writer: SummaryWriter  # TensorBoard events; a checkpoint starts a new events file (save_checkpoint)
    wandb: Any = None  # the W&B run (process 0 with --track)
    num_updates: int = 0  # made so far, as of the learner's last whole iteration (end_iteration)
    saved_updates: int = 0  # in the last checkpoint written or resumed from
    checkpoint_step: int = -1  # the environment steps of that checkpoint (-1: none)


def process_dir(run_dir: str, args) -> str:
    """Where a process writes its events and checkpoint: the run's directory for process 0, `process_{i}` in it else."""
    return run_dir if args.process_id == 0 else os.path.join(run_dir, f"process_{args.process_id}")


def open_run(script: str, args, checkpoint: dict | None, steps_per_iteration: int, num_iterations: int) -> Run:
    """This process's run directory and TensorBoard writer, and the W&B run (process 0 tracks). A resumed run goes on
    in its directory and stream: events logged after its checkpoint are dropped (purge_step)."""
    if checkpoint is None:
        started = int(time.time())
        if args.num_processes > 1:  # one run name in every process: process 0's clock
            started = int(multihost_utils.broadcast_one_to_all(np.int32(started)))
        run_dir = process_dir(f"runs/{args.env_id}__{args.exp_name}__{args.seed}__{started}", args)
    else:
        run_dir = process_dir(os.path.normpath(args.resume), args)
    wandb_run = None
    if args.track and args.process_id == 0:
        import wandb

        wandb_run = wandb.init(
            project=args.wandb_project_name,
            entity=args.wandb_entity,
            sync_tensorboard=True,
            config=vars(args),
            name=os.path.basename(run_dir),
            save_code=True,
            id=checkpoint["progress"].wandb_id if checkpoint else None,  # a resumed run continues the same W&B run
            resume="allow",
        )
    resumed_at = checkpoint["progress"].iteration * steps_per_iteration if checkpoint else 0  # environment steps
    os.makedirs(run_dir, exist_ok=True)  # not by SummaryWriter, whose check-then-makedirs races with process_1's
    thread_errors.clear()
    threading.excepthook = on_thread_error
    writer = SummaryWriter(run_dir, max_queue=EVENTS_QUEUE, purge_step=resumed_at + 1 if checkpoint else None)
    if checkpoint is None:
        rows = "\n".join(f"|{key}|{value}|" for key, value in vars(args).items())
        writer.add_text("hyperparameters", f"|param|value|\n|-|-|\n{rows}")
    print(
        f"run: {run_dir}{f' (resumed at step {resumed_at})' if checkpoint else ''}\nwatch it: tensorboard --logdir runs\n"
        f"compiling the acting and update functions (about a minute on a 2-core CPU); then "
        f"{args.replay_ratio * steps_per_iteration / args.batch_size:g} updates per actor iteration of "
        f"{steps_per_iteration} steps, {num_iterations} iterations, a progress line every {args.log_interval:g} s",
        flush=True,
    )
    updates = checkpoint["progress"].num_updates if checkpoint else 0
    open_runs.append(Run(script, args, run_dir, writer, wandb_run, updates, updates, resumed_at if checkpoint else -1))
    return open_runs[-1]


def end_iteration(run: Run, num_updates: int):
    """The learner has ended an iteration, `num_updates` updates made so far: raises the error that ended a thread of
    the run (tensorboardX's writer thread, on a full disk), if one has."""
    run.num_updates = num_updates
    if thread_errors:
        raise RuntimeError(f"thread {thread_errors[0].thread.name} stopped") from thread_errors[0].exc_value


# ---------------------------------------------------------------------------------------------
# Checkpoints: a script's payload (everything its run needs to continue exactly) in a checked envelope
# ---------------------------------------------------------------------------------------------
CHECKSUM = b"sha256:"


def atomic_write(path: str, write):
    """write(file) into a temporary file, synced, then renamed to `path`: a kill or a full disk leaves the old file whole."""
    try:
        with open(path + ".tmp", "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".tmp", path)
    except BaseException as e:  # an error, Ctrl-C or SIGTERM: no temporary file left behind
        if os.path.exists(path + ".tmp"):
            os.remove(path + ".tmp")
        if not isinstance(e, OSError):
            raise
        kept = f"the previous {path} is whole" if os.path.exists(path) else "nothing was written"
        raise OSError(e.errno, f"{path} could not be written ({e.strerror}); {kept}") from e


def write_checkpoint(file, script: str, payload: dict):
    """A checkpoint file: the script's name on a line, the pickled payload, CHECKSUM and the pickle's sha256 in hex."""
    data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    file.write(f"{script}\n".encode())
    file.write(data)
    file.write(CHECKSUM + hashlib.sha256(data).hexdigest().encode())


class CheckpointUnpickler(pickle.Unpickler):
    """Classes of the script are found whether it ran as a script (`__main__`) or was imported."""

    def __init__(self, file, script: str):
        super().__init__(file)
        self.script = script

    def find_class(self, module, name):
        if module in ("__main__", self.script):
            main = sys.modules["__main__"]
            ran = os.path.basename(getattr(main, "__file__", "") or "") == f"{self.script}.py"
            return getattr(main if ran else importlib.import_module(self.script), name)
        return super().find_class(module, name)


def load_checkpoint(path: str, script: str) -> dict:
    """A checkpoint's payload; ValueError if another script wrote it or its sha256 does not match (a changed file)."""
    with open(path, "rb") as f:
        written_by = f.readline()[:-1].decode(errors="replace")
        data = f.read()
    if written_by != script:
        writer = f"{written_by}.py" if written_by.startswith("muzero_") else "a version before checksums or another program"
        raise ValueError(f"the checkpoint was written by {writer}, not by {script}.py")
    body = data[: -len(CHECKSUM) - 64]
    if data[len(body) :] != CHECKSUM + hashlib.sha256(body).hexdigest().encode():
        raise ValueError("its sha256 does not match its contents (truncated or changed since it was written)")
    return CheckpointUnpickler(io.BytesIO(body), script).load()


def read_checkpoint(script: str, args) -> dict:
    """This process's checkpoint of `--resume`, refused with fail() if it is missing, broken or of other flags.
    (A checkpoint is a pickle: load only your own.)"""
    path = os.path.join(process_dir(args.resume, args), CHECKPOINT_FILE)
    if os.path.isfile(os.path.join(os.path.dirname(path), FINISHED_FILE)):
        fail(f"--resume {args.resume}: the run has finished (see its {FINISHED_FILE}): there is nothing to continue")
    if not os.path.isfile(path):
        fail(f"--resume {args.resume}: no checkpoint there ({path}; runs write them with --checkpoint-interval N)")
    try:
        checkpoint = load_checkpoint(path, script)
        saved = checkpoint["args"]
    except Exception as e:
        fail(f"--resume {args.resume}: {path} is not a whole checkpoint of {script}.py ({type(e).__name__}: {e})")
    given = dataclasses.asdict(args)
    saved = {**dataclasses.asdict(type(args)()), **saved}  # a flag added since the checkpoint: its default, as before it
    differ = [  # a flag the script has no more is None in `given`
        f"--{k.replace('_', '-')} {saved.get(k)!r} (now {given.get(k)!r})"
        for k in dict.fromkeys([*given, *saved])
        if k not in RESUME_FREE_FLAGS and saved.get(k) != given.get(k)
    ]
    if differ:
        fail(f"--resume {args.resume}: the checkpoint was written with other flags: {', '.join(differ)}")
    return checkpoint


def save_checkpoint(run: Run, payload: dict, iteration: int, step: int):
    """The script's `payload` (its flags under "args" and whatever its run needs to continue), written atomically once
    every event up to now is on disk: tensorboardX's flush() does not wait for its queue, close() does. The run goes
    on in a new events file, named to sort in step order. With --save-checkpoint-models the parameters of the
    payload's "train_state" are saved first as models/step_{step}.muzero_model: a checkpoint never lacks its model."""
    start = time.time()
    run.writer.close()
    run.writer = SummaryWriter(run.dir, max_queue=EVENTS_QUEUE, filename_suffix=f".{iteration:09d}")
    if run.args.save_checkpoint_models:
        save_step_model(run, payload["train_state"].params, step)
    atomic_write(os.path.join(run.dir, CHECKPOINT_FILE), lambda f: write_checkpoint(f, run.script, payload))
    run.writer.add_scalar("stats/checkpoint_time", time.time() - start, step)
    run.saved_updates = run.num_updates
    run.checkpoint_step = step
    if run.args.process_id == 0:  # (the other processes' checkpoints are in process_{i} of the run's directory)
        print(f"checkpoint at step {step}: --resume {run.dir} continues from it", flush=True)


# ---------------------------------------------------------------------------------------------
# Saved models and the end of a run
# ---------------------------------------------------------------------------------------------
MODEL_FORMAT = 2  # in a model's JSON; 2: a Breakthrough model sees the board from its mover's side (muzero_tools)


def flags_sha256(flags: dict) -> str:
    """The sha256 of a model's flags as its JSON holds them (keys sorted)."""
    return hashlib.sha256(json.dumps(flags, sort_keys=True).encode()).hexdigest()


def save_model(path: str, script: str, args, params, global_step: int):
    """The parameters (flax bytes) and then, beside them, the script, flags, the sha256 of the parameters and of the
    flags, and the environment steps they were trained on (`step`) as JSON: muzero_tools.load_model reads both. The
    JSON is written last: a model whose save failed has none."""
    data = flax.serialization.to_bytes(params)
    atomic_write(path, lambda f: f.write(data))
    flags = dataclasses.asdict(args)
    checksums = dict(sha256=hashlib.sha256(data).hexdigest(), flags_sha256=flags_sha256(flags))
    saved = dict(script=script, format=MODEL_FORMAT, **checksums, step=global_step, **flags)
    atomic_write(path + ".json", lambda f: f.write(json.dumps(saved, indent=2).encode()))


def save_step_model(run: Run, params, step: int):
    """A model of the run's stage at `step` in models/ of its directory (muzero_tools' ladder plays them)."""
    os.makedirs(os.path.join(run.dir, "models"), exist_ok=True)
    save_model(os.path.join(run.dir, "models", f"step_{step}.muzero_model"), run.script, run.args, params, step)


def close_run(run: Run, final_params: Callable, num_updates: int, steps_played: int):
    """After the actor threads are joined, also after an error: with --save-model the parameters `final_params()`
    are saved (saying where), then the events are closed."""
    try:
        if run.args.save_model:  # every process its own copy: a host's run directory is complete
            path = os.path.join(run.dir, f"{run.args.exp_name}.muzero_model")
            if not num_updates:
                print("no update was made: there are no trained parameters to save", flush=True)
                return
            try:
                save_model(path, run.script, run.args, final_params(), steps_played)
            except OSError as e:  # (cli's last line says how the run can still give them)
                raise OSError(e.errno, f"the parameters after {num_updates} updates are not saved: {e.strerror}") from e
            print(f"the parameters after {num_updates} updates are saved to {path}", flush=True)
    finally:
        run.writer.close()


def finish_run(run: Run, final_params: Callable, steps: int, num_updates: int):
    """The run has ended and its model is saved: the last model of --save-checkpoint-models (`final_params()`), the
    finished marker (--resume refuses the run), W&B's end, and every process through jax.distributed's shutdown
    barrier, its work done, not at interpreter exit (process 0 hosts the coordination service the others report to)."""
    if run.args.save_checkpoint_models and run.args.checkpoint_interval:
        save_step_model(run, final_params(), steps)
    finished = dict(step=steps, updates=num_updates)
    atomic_write(os.path.join(run.dir, FINISHED_FILE), lambda f: f.write(json.dumps(finished).encode()))
    if run.wandb:
        run.wandb.finish()
    if run.args.num_processes > 1:
        jax.distributed.shutdown()


def continue_line(run: Run | None) -> str:
    """How a stopped or failed run goes on: the last line it prints."""
    if run is None or run.checkpoint_step < 0:
        return "there is no checkpoint to continue from (--checkpoint-interval N writes them)"
    run_dir = run.dir if run.args.process_id == 0 else os.path.dirname(run.dir)
    command = sys.argv if run.args.resume else [*sys.argv, "--resume", run_dir]
    return f"--resume {run_dir} continues from its checkpoint at step {run.checkpoint_step}: python {shlex.join(command)}"


def cli(main: Callable, args_class: type):
    """A script's command line: SIGINT (Ctrl-C) and SIGTERM (`timeout`, a job scheduler) stop the learner where it can
    save (--save-model), then the process exits 130 or 143 (watch_signals: at once where it cannot). A run that fails
    ends with what failed and what is kept (exit 1), no other error after it."""
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)  # the handler writes each signal's number there
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    threading.Thread(target=watch_signals, args=(reader,), name="signals", daemon=True).start()
    try:
        main(tyro.cli(args_class))
    except Interrupted as e:  # (the model is saved: close_run)
        print(f"{e}: stopped; {continue_line(open_runs[-1] if open_runs else None)}", file=sys.stderr, flush=True)
        sys.exit(128 + e.signum)
    except Exception as e:
        if not open_runs:
            raise
        traceback.print_exc()
        run = open_runs[-1]
        print(f"\nthe run {run.dir} failed: {type(e).__name__}: {e}", file=sys.stderr)
        print(continue_line(run), file=sys.stderr, flush=True)
        os._exit(1)  # not through atexit, whose handlers (the writer's, W&B's) would fail again on a full disk


# ---------------------------------------------------------------------------------------------
# GIFs of an evaluation episode (--capture-video; muzero_tools' episode adds the search's numbers)
# ---------------------------------------------------------------------------------------------
FRAME_SIZE = 320  # pixels a side of a GIF's frame (a board of 5 squares: 64 pixels a square)


def frame_image(frame: np.ndarray):
    """An observation as a FRAME_SIZE x FRAME_SIZE RGB image: pixels (1 grey or 3 colour channels, Atari) as they
    are, 0/1 planes (MinAtar; Breakthrough's black and white pieces) in one colour each, as minatar's display draws
    them."""
    import matplotlib
    from PIL import Image

    if frame.shape[-1] in (1, 3):
        image = Image.fromarray(frame[..., 0] if frame.shape[-1] == 1 else frame).convert("RGB")
    else:
        c = frame.shape[-1]
        palette = np.vstack([[0, 0, 0], np.asarray(matplotlib.colormaps["cubehelix"](np.linspace(0.2, 0.9, c)))[:, :3]])
        index = np.max(frame * (np.arange(c) + 1), axis=-1).astype(int)
        image = Image.fromarray((palette[index] * 255).astype(np.uint8))
    return image.resize((FRAME_SIZE, FRAME_SIZE), Image.NEAREST)


def save_gif(frames: list, path: str, annotate: Callable | None = None, duration: int = 50):
    """Observations (a Recording's frames) as an animated GIF of `duration` ms a frame (frame_image); `annotate(image,
    t)`, if given, returns step t's image with what it adds beside it (muzero_tools' annotated episodes)."""
    images = [frame_image(frame) for frame in frames]
    if annotate is not None:
        images = [annotate(image, t) for t, image in enumerate(images)]
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    images[0].save(path, save_all=True, append_images=images[1:], duration=duration, loop=0)
