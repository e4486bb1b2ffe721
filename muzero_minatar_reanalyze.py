"""MuZero Reanalyze for MinAtar in one file: muzero_minatar.py plus reanalyze (MooZi thesis 2.7.1,
4.3.10, 4.3.13, 5.5); `diff muzero_minatar.py muzero_minatar_reanalyze.py` shows all it adds.

Read top to bottom: Args (every flag, thesis value in its docstring), the environment bridge with the
dummy action (MooZi thesis 4.3.1-4.3.3), history stacking and the categorical value transform
(4.3.4, 2.8.6), the flax networks h, g, f and the projection (4.3.5), the MCTX planner (4.3.6),
training targets (4.3.7), segment replay with prioritized sampling (4.3.14), loss and update
(4.3.8-4.3.9), the actor threads and the learner loop (Cleanba: each actor thread acts with parameters
exactly one version behind the learner, so a run's data is fixed by its seed; the update is pmapped over
--learner-device-ids, and several processes under jax.distributed form one data-parallel learner).
"""

import copy
import hashlib
import io
import json
import math
import os
import pickle
import queue
import signal
import socket
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, fields, replace
from functools import partial
from typing import Literal, NamedTuple, get_args

# XLA's CPU backend, set before jax starts (a user's own XLA_FLAGS come after ours and win). YNNPACK fusions off:
# for this network's small convolutions they make the learner's update about 1.3x slower (docs: Speed). The
# other three make a seed give the same numbers on every x86-64 CPU with the same cache sizes (docs:
# Reproducibility): code for AVX2 at most, no XNNPACK kernels (XNNPACK picks its own by the host's features), no
# math that may differ by CPU; and matrix products in Eigen's own kernel instead of oneDNN's, which picks AVX-512
# code where the host has it.
os.environ["XLA_FLAGS"] = (
    "--xla_cpu_experimental_ynn_fusion_type= --xla_cpu_max_isa=AVX2 --xla_cpu_use_xnnpack=false "
    "--xla_cpu_enable_platform_dependent_math=false " + os.environ.get("XLA_FLAGS", "")
)
os.environ.setdefault("TENSORFLOW_USE_CUSTOM_CONTRACTION_KERNEL", "false")

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import mctx
import minatar
import numpy as np
import optax
import tyro
from jax.experimental import multihost_utils
from tensorboardX import SummaryWriter

GAMES = Literal["Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders"]
MINATAR_NAMES = dict(zip(get_args(GAMES), ("asterix", "breakout", "freeway", "seaquest", "space_invaders")))
MINATAR_ACTIONS = ("noop", "left", "up", "right", "down", "fire")  # minatar's action indices
GYMNAX_STEP_LIMITS = {"Freeway": 2500}  # gymnax's max_steps_in_episode: 2500 for Freeway, 1000 for the others
MAX_REPLAY_RATIO = 256  # samples per environment step: EfficientZero's (batch 256, an update per step)
SCRIPT = os.path.basename(__file__)[: -len(".py")]


@dataclass
class Args:
    exp_name: str = SCRIPT
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment: environments, network initialisation, search noise and replay sampling"""
    track: bool = False
    """if toggled, this experiment will be tracked with Weights and Biases"""
    wandb_project_name: str = "muzero-jax"
    """the wandb's project name"""
    wandb_entity: str | None = None
    """the entity (team) of wandb's project"""
    capture_video: bool = False
    """if toggled, each evaluation's first episode is saved as a GIF annotated with its searches, in `videos/`"""
    save_model: bool = False
    """if toggled, the parameters are saved to `runs/{run_name}/` at the end (and when an error stops the run)"""
    checkpoint_interval: int = 0
    """environment steps between checkpoints, from which --resume continues exactly (0: none)"""
    resume: str | None = None
    """a run directory `runs/{run_name}` to continue from its checkpoint, with the run's own flags"""

    # Environment (4.3.1-4.3.2)
    env_id: GAMES = "Breakout"
    """the MinAtar game"""
    total_timesteps: int = 300_000
    """environment steps taken by all actor threads of all processes"""
    sticky_action_prob: float = 0.0
    """probability that MinAtar repeats the previous action (thesis: 0; MinAtar's default: 0.1)"""
    num_envs: int = 32
    """copies of the environment per actor thread, stepped as one batch"""
    num_steps: int = 32
    """steps per environment per actor iteration; also the length of one replay segment"""
    max_episode_steps: int | None = None
    """evaluation episodes are cut after this many steps (default: gymnax's limit, Freeway 2500, others 1000)"""

    # Inputs and network (4.3.3-4.3.5, 5.1.2)
    history_length: int = 4
    """L: frames and actions stacked as the representation input (thesis: 4)"""
    channels: int = 16
    """channels of the residual towers (thesis: 32)"""
    repr_blocks: int = 2
    """residual blocks in the representation function (thesis: 6)"""
    dyn_blocks: int = 1
    """residual blocks in the dynamics function (thesis: 2)"""
    pred_blocks: int = 1
    """residual blocks in the prediction function (thesis: 1)"""
    head_hidden: int = 64
    """hidden width of the value, reward and policy heads (thesis: 128)"""
    support_size: int = 30
    """value and reward are categorical over the integers [-support_size, support_size] (thesis: 30)"""

    # Planner (4.3.6, Table 5.1)
    planner: Literal["muzero", "gumbel"] = "muzero"
    """`muzero`: mctx.muzero_policy (PUCT with Dirichlet noise, the thesis'); `gumbel`: mctx.gumbel_muzero_policy"""
    num_simulations: int = 16
    """simulations per acting step in training (thesis: 25)"""
    eval_num_simulations: int = 16
    """simulations per acting step in evaluation (thesis: 40)"""
    pb_c_init: float = 2.25
    """c1 of PUCT in training (muzero planner; thesis: 2.25)"""
    eval_pb_c_init: float = 1.75
    """c1 of PUCT in evaluation (muzero planner; thesis: 1.75)"""
    pb_c_base: float = 19652.0
    """c2 of PUCT (muzero planner; thesis: 19652)"""
    temperature: float = 1.0
    """visit-count temperature of the action in training (muzero planner; thesis: 1.0)"""
    eval_temperature: float = 0.25
    """visit-count temperature of the action in evaluation (muzero planner; thesis: 0.25)"""
    dirichlet_alpha: float = 0.2
    """Dirichlet noise concentration at the root in training (muzero planner; thesis: 0.2)"""
    eval_dirichlet_alpha: float = 0.1
    """Dirichlet noise concentration at the root in evaluation (muzero planner; thesis: 0.1)"""
    dirichlet_fraction: float = 0.25
    """weight of the Dirichlet noise in the root prior (muzero planner)"""
    q_min_range: float = 1e-8
    """least range the Q-values of a node are min-max normalised by (muzero planner; mctx: 1e-8; EfficientZero: 0.01)"""
    gumbel_scale: float = 1.0
    """scale of the Gumbel noise in training (gumbel planner; evaluation uses 0)"""
    max_num_considered_actions: int = 16
    """actions considered by Sequential Halving at the root (gumbel planner)"""
    gumbel_rescale_q: bool = True
    """min-max rescale the completed Q-values over a node's actions (gumbel planner; mctx's default: on)"""

    # Targets and replay (4.3.7, 4.3.14)
    unroll_steps: int = 5
    """K: steps the dynamics function is unrolled in training (thesis: 5)"""
    td_steps: int = 10
    """N: steps of reward before bootstrapping from the search value (thesis: 10; MuZero's board games: to the end)"""
    gamma: float = 0.997
    """discount (thesis: 0.997; MuZero's board games: 1)"""
    buffer_size: int = 100_000
    """replay capacity in environment steps over all actor threads; the oldest segments are evicted first"""
    sampling: Literal["uniform", "proportional", "rank"] = "proportional"
    """how replay positions are drawn; priorities are |v* - G^N| (4.3.14)"""
    priority_exponent: float = 1.0
    """alpha: P(i) is proportional to p_i^alpha (proportional) or (1/rank_i)^alpha (rank)"""
    priority_epsilon: float = 0.01
    """added to the priorities so that no position has probability zero (proportional sampling)"""
    importance_exponent: float = 0.0
    """beta: samples weigh (1 / (N P(i)))^beta over the sample's largest (MuZero: 1, undoing the bias; here 0 keeps it)"""
    learning_starts: int = 2_000
    """environment steps stored in replay before the first update"""

    # Loss and optimiser (4.3.8-4.3.9, 5.1.2)
    batch_size: int = 64
    """training targets per update over all learner devices and processes (thesis: 1024)"""
    replay_ratio: float = 2.0
    """samples trained per environment step (thesis: 4)"""
    learning_rate: float = 3e-3
    """Adam step size (thesis: 1e-2 at batch 1024; MuZero's pseudocode: SGD with momentum 0.9)"""
    max_grad_norm: float = 5.0
    """global-norm gradient clipping (thesis: 5.0)"""
    value_coef: float = 0.25
    """c_v, weight of the value loss (thesis: 0.25)"""
    reward_coef: float = 1.0
    """weight of the reward loss, which sums its K steps while policy and value average theirs (MuZero: all by 1/K)"""
    consistency_coef: float = 2.0
    """c_s, weight of the self-consistency loss (thesis: 2.0)"""
    l2_coef: float = 1e-4
    """c_L2, weight of the squared parameter norm (thesis: 1e-4)"""
    target_update_interval: int = 100
    """updates between copies of the online parameters into the target network"""

    # Logging and evaluation
    eval_interval: int = 100_000
    """environment steps between evaluations (one more at the end)"""
    eval_episodes: int = 32
    """episodes per evaluation, played as one batch with the evaluation planner (0: no evaluation)"""
    log_interval: float = 30.0
    """seconds between progress lines on the console"""

    # Reanalyze (2.7.1, 4.3.10, 4.3.13; planner: Table 5.1)
    reanalyze_ratio: float = 0.0
    """stored segments searched again, as a share of all entering replay (5.5); sample: of each batch (EfficientZero: 0.99)"""
    reanalyze_mode: Literal["push", "sample"] = "push"
    """copies of stored segments enter replay (push: 4.3.13) or each batch is searched again when drawn (sample)"""
    reanalyze_num_simulations: int = 16
    """simulations per reanalysed position (thesis: 50)"""
    reanalyze_pb_c_init: float = 1.75
    """c1 of PUCT in reanalyze (muzero planner; thesis: 1.75)"""
    reanalyze_dirichlet_alpha: float = 0.2
    """Dirichlet noise concentration at the root in reanalyze (muzero planner; thesis: 0.2)"""
    value_bootstrap: Literal["search", "target_network"] = "search"
    """N-step value targets bootstrap from the stored v* (4.3.7) or the target network's value when sampled"""
    td_age_updates: int = 0
    """updates of a position's age that shorten its N by one, down to 1 (0: never; EfficientZero: 30,000 with N = 5)"""
    importance_exponent_final: float | None = None
    """beta at the run's end, reached linearly from --importance-exponent (None: constant; EfficientZero: 0.4 to 1)"""
    learner_priorities: bool = True
    """sample: each update's positions take the learner's |value - target| as priority (EfficientZero); off: insertion's"""
    new_data_max_priority: bool = False
    """sample: new positions enter at replay's largest priority, as in EfficientZero and LightZero (off: |v* - G^N|)"""

    # Devices and hosts (Cleanba / Sebulba split)
    num_actor_threads: int = 1
    """actor threads per process, each with its own environments and replay"""
    actor_device_ids: tuple[int, ...] = (0,)
    """indices in jax.local_devices() the actor threads search on (thread i the (i mod n)-th; evaluation the first)"""
    learner_device_ids: tuple[int, ...] = (0,)
    """indices in jax.local_devices() the update is pmapped over in each process (gradients averaged over all)"""
    coordinator_address: str | None = None
    """host:port of process 0 (jax.distributed's coordinator), needed when --num-processes > 1"""
    num_processes: int = 1
    """processes (hosts) in the run; each runs its own actor threads, and all learner devices form one learner"""
    process_id: int = 0
    """this process's index in [0, --num-processes); process 0 evaluates and logs to W&B"""
    distributed_timeout: int = 300
    """seconds a process waits for all --num-processes to join before it stops"""


def fail(message: str):
    """Stops before anything is compiled or written, with a message naming the flag and exit status 2 (as argparse)."""
    print(f"{os.path.basename(sys.argv[0])}: error: {message}", file=sys.stderr)
    sys.exit(2)


def check_folder(name: str, path: str):
    """Refuses with fail() a folder to write in that is a file, or that this process cannot create or write in."""
    folder = os.path.abspath(path)
    while not os.path.exists(folder):  # the nearest existing folder is where it would be created
        folder = os.path.dirname(folder)
    if not (os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK)):
        fail(f"{name}: {folder} is not a folder this process can write in")


def global_threads(args: Args) -> int:
    return args.num_actor_threads * args.num_processes


def validate_args(args: Args):
    """What tyro cannot check, each refused with fail()."""
    rules = [  # (flags, test, what they must be)
        (" ".join(f.name for f in fields(args) if f.type is float), math.isfinite, "a finite number"),
        (
            "total_timesteps num_envs num_steps history_length channels repr_blocks head_hidden support_size "
            "num_simulations eval_num_simulations max_num_considered_actions unroll_steps td_steps buffer_size "
            "batch_size target_update_interval eval_interval num_actor_threads num_processes learning_rate "
            "replay_ratio max_grad_norm temperature eval_temperature dirichlet_alpha eval_dirichlet_alpha log_interval "
            "pb_c_base priority_epsilon q_min_range distributed_timeout",
            lambda v: v > 0,
            "positive",
        ),
        (
            "dyn_blocks pred_blocks eval_episodes learning_starts checkpoint_interval pb_c_init eval_pb_c_init "
            "gumbel_scale priority_exponent value_coef reward_coef consistency_coef l2_coef",
            lambda v: v >= 0,
            "non-negative",
        ),
        ("sticky_action_prob dirichlet_fraction importance_exponent", lambda v: 0 <= v <= 1, "in [0, 1]"),
        ("gamma", lambda v: 0 < v <= 1, "in (0, 1]"),
        ("seed", lambda v: 0 <= v < 2**32, "in [0, 2**32 - 1], as JAX's 32-bit keys"),
        ("max_episode_steps", lambda v: v is None or v > 0, "positive"),
        ("process_id", lambda v: 0 <= v < args.num_processes, "in [0, --num-processes)"),
        ("reanalyze_num_simulations reanalyze_dirichlet_alpha", lambda v: v > 0, "positive"),
        ("reanalyze_pb_c_init td_age_updates", lambda v: v >= 0, "non-negative"),
        ("reanalyze_ratio", lambda v: 0 <= v < 1 or args.reanalyze_mode == "sample" and v == 1, "in [0, 1) (sample: [0, 1])"),
        ("importance_exponent_final", lambda v: v is None or 0 <= v <= 1, "in [0, 1]"),
        ("new_data_max_priority", lambda v: not v or args.reanalyze_mode == "sample", "off in push mode"),
        ("learner_priorities", lambda v: v or not args.new_data_max_priority, "on with --new-data-max-priority"),
    ]
    for names, ok, what in rules:
        for name in names.split():
            if not ok(getattr(args, name)):
                fail(f"--{name.replace('_', '-')} must be {what} (got {getattr(args, name)})")
    name_ok = all(c.isalnum() or c in "-_." for c in args.exp_name) and args.exp_name not in ("", ".", "..")
    if not name_ok or len(args.exp_name) > 100:
        fail(f"--exp-name must be at most 100 letters, digits, '-', '_' and '.' (got {args.exp_name!r}): it names files")
    check_folder(f"--resume {args.resume}" if args.resume else "runs/ (runs are written in ./runs)", args.resume or "runs")
    steps = args.num_envs * args.num_steps * global_threads(args)
    iteration = f"one actor iteration, --num-envs x --num-steps x --num-actor-threads x --num-processes = {steps}"
    if args.total_timesteps < steps or args.buffer_size < steps:
        fail(f"--total-timesteps ({args.total_timesteps}) and --buffer-size ({args.buffer_size}) must hold {iteration}")
    if args.batch_size % global_threads(args) or args.batch_size > args.buffer_size:
        fail(
            f"--batch-size ({args.batch_size}) must split evenly over the {global_threads(args)} actor threads' replays "
            f"(--num-actor-threads x --num-processes) and fit in --buffer-size ({args.buffer_size})"
        )
    if args.learning_starts > args.total_timesteps or args.replay_ratio * args.total_timesteps < args.batch_size:
        fail(f"--learning-starts ({args.learning_starts}) and --replay-ratio ({args.replay_ratio}) leave no update to run")
    if args.replay_ratio > MAX_REPLAY_RATIO:
        fail(
            f"--replay-ratio {args.replay_ratio:g} is above {MAX_REPLAY_RATIO} samples per environment step "
            f"(EfficientZero's ratio; the thesis used 4)"
        )
    host, _, port = (args.coordinator_address or "").rpartition(":")
    if args.num_processes > 1 and not (host and port.isdigit()):
        fail(f"--num-processes {args.num_processes} needs --coordinator-address host:port of process 0")


def join_processes(args: Args):
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


def validate_devices(args: Args):
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


# ---------------------------------------------------------------------------------------------
# Environment (4.3.1-4.3.3). Agent actions are env actions + 1: index 0 is the dummy action, taken
# before the first step and at (and after) the last step of an episode.
# ---------------------------------------------------------------------------------------------
class Step(NamedTuple):
    obs: np.ndarray  # (B, H, W, C) uint8 (MinAtar's boolean planes)
    reward: np.ndarray  # (B,) reward that arrived with this observation
    is_first: np.ndarray  # (B,) bool
    is_last: np.ndarray  # (B,) bool; the policy still runs here, its action is the dummy one


def env_seeds(seed: int | tuple[int, ...], num_envs: int) -> np.ndarray:
    """One 32-bit seed per environment copy, hashed from `seed` (an int or a tuple of ints) by numpy's
    SeedSequence: runs with different seeds share no environment stream, nor do training and each evaluation
    (seeded `(seed, 1, iteration)`)."""
    return np.random.SeedSequence(seed).generate_state(num_envs)


class MinAtarVecEnv:
    """`num_envs` MinAtar games stepped as one batch. A step on an env whose last output was
    `is_last` resets it instead (the thesis' unified main loop), so the stream never stops."""

    def __init__(self, env_id: str, num_envs: int, seed: int, sticky_action_prob: float, max_episode_steps: int | None = None):
        self.envs = []
        for env_seed in env_seeds(seed, num_envs):
            env = minatar.Environment(MINATAR_NAMES[env_id], sticky_action_prob=sticky_action_prob)
            env.seed(int(env_seed))
            self.envs.append(env)
        self.action_set = np.asarray(self.envs[0].minimal_action_set())
        self.num_actions = len(self.action_set) + 1  # |A^a| = |A^e| + dummy
        self.obs_shape = self.envs[0].state_shape()
        self.max_episode_steps = max_episode_steps
        self.episode_steps = np.zeros(num_envs, np.int64)
        self.last = np.ones(num_envs, bool)

    def step(self, actions: np.ndarray) -> Step:
        n = len(self.envs)
        obs = np.zeros((n, *self.obs_shape), np.uint8)
        reward = np.zeros(n, np.float32)
        first = self.last.copy()
        for i, env in enumerate(self.envs):
            if self.last[i]:
                env.reset()
                self.episode_steps[i] = 0
                self.last[i] = False
            else:
                reward[i], self.last[i] = env.act(self.action_set[actions[i] - 1])
                self.episode_steps[i] += 1
            obs[i] = env.state()
        if self.max_episode_steps is not None:
            self.last |= self.episode_steps >= self.max_episode_steps
        return Step(obs, reward, first, self.last.copy())

    def legal_actions(self, is_last: np.ndarray) -> np.ndarray:
        """Mask over agent actions: the legal env actions before the end, only the dummy action at the end."""
        legal = np.ones((len(is_last), self.num_actions), bool)
        legal[:, 0] = is_last
        legal[:, 1:] = ~is_last[:, None]
        return legal


def env_shapes(args: Args) -> tuple[tuple, int]:
    """The shape (H, W, C) of an observation of --env-id and the number of agent actions |A^a|."""
    env = MinAtarVecEnv(args.env_id, 1, 0, 0.0)
    return env.obs_shape, env.num_actions


class EpisodeTracker:
    """Running return and length (env actions taken) of each copy; hands back finished episodes."""

    def __init__(self, num_envs: int):
        self.returns = np.zeros(num_envs)
        self.lengths = np.zeros(num_envs, np.int64)

    def update(self, step: Step):
        self.returns += step.reward
        self.lengths += ~step.is_last
        done = np.flatnonzero(step.is_last)
        finished = (done, self.returns[done].copy(), self.lengths[done].copy())
        self.returns[done] = 0.0
        self.lengths[done] = 0
        return finished


# ---------------------------------------------------------------------------------------------
# Inputs (4.3.4) and the scalar <-> categorical transform (2.8.6, 4.3.5)
# ---------------------------------------------------------------------------------------------
def stack_history(frames, actions):
    """frames (B, L, H, W, C) = o_{t-L+1..t}, actions (B, L) = a_{t-L..t-1}
    -> the input of the representation function: the frames as planes (B, H, W, L*C) and the actions
    (B, L), which its stem reads as L one-hot planes of |A^a| after the frame planes (ActionStem)."""
    b, L, h, w, c = frames.shape
    return jnp.moveaxis(frames, 1, 3).reshape(b, h, w, L * c), actions


EPS_PHI = 1e-3


def phi(x):
    return jnp.sign(x) * (jnp.sqrt(jnp.abs(x) + 1) - 1) + EPS_PHI * x


def phi_inverse(h):
    # sign(h) * (((sqrt(1 + 4e(|h| + 1 + e)) - 1) / 2e)^2 - 1), rewritten without the cancellation
    # in sqrt(1 + y) - 1 so that float32 keeps ~1e-6 relative accuracy.
    a = jnp.abs(h) + 1 + EPS_PHI
    root = 2 * a / (1 + jnp.sqrt(1 + 4 * EPS_PHI * a))
    return jnp.sign(h) * (root**2 - 1)


def scalar_to_categorical(x, support_size: int):
    """Phi: phi(x) as weights on its two nearest integers in [-support_size, support_size]; shape (..., 2 support_size + 1)."""
    h = jnp.clip(phi(x), -support_size, support_size)
    low = jnp.floor(h)
    frac = h - low
    idx = (low + support_size).astype(jnp.int32)
    size = 2 * support_size + 1
    return jax.nn.one_hot(idx, size) * (1 - frac)[..., None] + jax.nn.one_hot(idx + 1, size) * frac[..., None]


def categorical_to_scalar(probs, support_size: int):
    support = jnp.arange(-support_size, support_size + 1, dtype=probs.dtype)
    return phi_inverse(jnp.sum(probs * support, axis=-1))


# ---------------------------------------------------------------------------------------------
# Networks (4.3.5, 5.1.2). LayerNorm stands in for the thesis' BatchNorm: acting and learning then
# use one pure function with no running statistics. Hidden states are min-max scaled to [0, 1]
# after h and g (MuZero appendix G) so the unrolled dynamics stay bounded.
# ---------------------------------------------------------------------------------------------
class ResidualBlock(nn.Module):
    channels: int

    @nn.compact
    def __call__(self, x):
        y = nn.Conv(self.channels, (3, 3))(x)
        y = nn.Conv(self.channels, (3, 3))(nn.relu(nn.LayerNorm()(y)))
        return nn.relu(x + nn.LayerNorm()(y))


class Head(nn.Module):
    """Dense -> LayerNorm -> ReLU -> Dense on the flattened board. The last layer starts at zero, so
    an untrained network predicts a uniform prior, value 0 and reward 0."""

    hidden: int
    out: int

    @nn.compact
    def __call__(self, x):
        x = x.reshape(x.shape[0], -1)
        x = nn.relu(nn.LayerNorm()(nn.Dense(self.hidden)(x)))
        return nn.Dense(self.out, kernel_init=nn.initializers.zeros)(x)


def scale_hidden(x):
    lo = x.min(axis=(1, 2, 3), keepdims=True)
    hi = x.max(axis=(1, 2, 3), keepdims=True)
    return (x - lo) / (hi - lo + 1e-5)


class ActionStem(nn.Module):
    """A 1x1 convolution over [planes, one-hot action planes / |A^a| tiled over the board] (4.3.4), computed
    without tiling the one-hot planes: their share of the product is the same on every square, so it is
    computed once per sample. Same parameters (kernel (1, 1, C + L|A^a|, F), bias) and initialisation as
    nn.Conv over the concatenated planes."""

    features: int
    num_actions: int

    @nn.compact
    def __call__(self, planes, actions):
        """planes (B, H, W, C), actions (B, L) -> (B, H, W, features)."""
        d, L = planes.shape[-1], actions.shape[-1]
        kernel = self.param("kernel", nn.initializers.lecun_normal(), (1, 1, d + L * self.num_actions, self.features))
        bias = self.param("bias", nn.initializers.zeros_init(), (self.features,))
        one_hot = jax.nn.one_hot(actions, self.num_actions).reshape(-1, L * self.num_actions) / self.num_actions
        return planes @ kernel[0, 0, :d] + (one_hot @ kernel[0, 0, d:])[:, None, None, :] + bias


class MuZeroNet(nn.Module):
    num_actions: int
    channels: int
    repr_blocks: int
    dyn_blocks: int
    pred_blocks: int
    head_hidden: int
    support_size: int

    def setup(self):
        z = 2 * self.support_size + 1
        self.repr_stem = ActionStem(self.channels, self.num_actions)
        self.repr_tower = [ResidualBlock(self.channels) for _ in range(self.repr_blocks)]
        self.dyn_stem = ActionStem(self.channels, self.num_actions)
        self.dyn_tower = [ResidualBlock(self.channels) for _ in range(self.dyn_blocks)]
        self.reward_head = Head(self.head_hidden, z)
        self.pred_tower = [ResidualBlock(self.channels) for _ in range(self.pred_blocks)]
        self.value_head = Head(self.head_hidden, z)
        self.policy_head = Head(self.head_hidden, self.num_actions)
        self.projection = ResidualBlock(self.channels)

    def represent(self, stacked):
        """h: stacked history (frame planes, actions) of stack_history -> hidden state (B, H, W, channels)."""
        x = self.repr_stem(*stacked)
        for block in self.repr_tower:
            x = block(x)
        return scale_hidden(x)

    def dynamics(self, x, action):
        """g: hidden state, action -> next hidden state, reward logits."""
        x = self.dyn_stem(x, action[:, None])
        for block in self.dyn_tower:
            x = block(x)
        return scale_hidden(x), self.reward_head(x)

    def predict(self, x):
        """f: hidden state -> policy logits, value logits."""
        for block in self.pred_tower:
            x = block(x)
        return self.policy_head(x), self.value_head(x)

    def project(self, x):
        """rho: the projection used by the self-consistency loss (4.3.8)."""
        return self.projection(x)

    def __call__(self, stacked, action):  # only used by init, to create every parameter
        x = self.represent(stacked)
        x, _ = self.dynamics(x, action)
        return self.predict(x), self.project(x)


def make_network(args: Args, num_actions: int) -> MuZeroNet:
    blocks = (args.repr_blocks, args.dyn_blocks, args.pred_blocks)
    return MuZeroNet(num_actions, args.channels, *blocks, args.head_hidden, args.support_size)


def init_params(net: MuZeroNet, args: Args, key):
    obs_shape, _ = env_shapes(args)
    stacked = (
        jnp.zeros((1, *obs_shape[:2], args.history_length * obs_shape[-1])),
        jnp.zeros((1, args.history_length), jnp.int32),
    )
    return net.init(key, stacked, jnp.zeros((1,), jnp.int32))


# ---------------------------------------------------------------------------------------------
# Planner (4.3.6): MCTX search over the learned model. The legal-action mask applies at the root
# only (MCTX's `invalid_actions`); inside the tree every action, the dummy one included, is open.
# ---------------------------------------------------------------------------------------------
def planner_configs(args: Args) -> tuple[partial, partial, partial]:
    """The mctx policy with its options, in training, in evaluation and in reanalyze (Table 5.1)."""
    if args.planner == "gumbel":  # evaluation without Gumbel noise: the greedy choice
        policy = mctx.gumbel_muzero_policy
        qtransform = partial(mctx.qtransform_completed_by_mix_value, rescale_values=args.gumbel_rescale_q)
        shared = dict(max_num_considered_actions=args.max_num_considered_actions, qtransform=qtransform)
        train_options = dict(gumbel_scale=args.gumbel_scale)
        test_options = dict(gumbel_scale=0.0)
    else:
        policy = mctx.muzero_policy
        # Q-values are min-max normalised over the node and its children: a range of 1e-4, noise on a near-flat early
        # model, would become the whole [0, 1] but for the floor (EfficientZero's value_delta_max)
        qtransform = partial(mctx.qtransform_by_parent_and_siblings, epsilon=args.q_min_range)
        shared = dict(dirichlet_fraction=args.dirichlet_fraction, pb_c_base=args.pb_c_base, qtransform=qtransform)
        train_options = dict(pb_c_init=args.pb_c_init, temperature=args.temperature, dirichlet_alpha=args.dirichlet_alpha)
        test_options = dict(
            pb_c_init=args.eval_pb_c_init, temperature=args.eval_temperature, dirichlet_alpha=args.eval_dirichlet_alpha
        )
    train = partial(policy, **shared, **train_options, num_simulations=args.num_simulations)
    test = partial(policy, **shared, **test_options, num_simulations=args.eval_num_simulations)
    reanalyze = partial(train, num_simulations=args.reanalyze_num_simulations)
    if args.planner == "muzero":
        reanalyze = partial(reanalyze, pb_c_init=args.reanalyze_pb_c_init, dirichlet_alpha=args.reanalyze_dirichlet_alpha)
    return train, test, reanalyze


def run_search(search: partial, params, rng, root: mctx.RootFnOutput, recurrent_fn, legal):
    """A batch of searches with `search`, a planner of planner_configs; legal (B, |A^a|) applies at the root only."""
    return search(params, rng, root, recurrent_fn, invalid_actions=~legal)


class ActorState(NamedTuple):
    frames: jax.Array  # (B, L, H, W, C): o_{t-L..t-1} before the step, o_{t-L+1..t} after
    actions: jax.Array  # (B, L): a_{t-L..t-1}


def make_recurrent_fn(net: MuZeroNet, gamma: float):
    """MCTX's recurrent function: one step of the learned model (dynamics, then prediction)."""
    support_size = net.support_size

    def recurrent_fn(params, rng, action, x):
        x, reward_logits = net.apply(params, x, action, method=MuZeroNet.dynamics)
        policy_logits, value_logits = net.apply(params, x, method=MuZeroNet.predict)
        out = mctx.RecurrentFnOutput(
            reward=categorical_to_scalar(jax.nn.softmax(reward_logits), support_size),
            discount=jnp.full(action.shape, gamma, jnp.float32),
            prior_logits=policy_logits,
            value=categorical_to_scalar(jax.nn.softmax(value_logits), support_size),
        )
        return out, x

    return recurrent_fn


def make_act_fn(net: MuZeroNet, search: partial, gamma: float, keep_tree: bool = False):
    """One jitted function per acting step: history stacking, initial inference, search, action. Its last
    output is the search tree (mctx.Tree, with the root's embedding only) if `keep_tree`, else None: the
    evaluation keeps it for annotated videos and the analysis tools, the actors do not need it."""
    support_size = net.support_size
    recurrent_fn = make_recurrent_fn(net, gamma)

    @jax.jit
    def act(params, state: ActorState, obs, is_first, legal, rng):
        keep = ~is_first
        frames = state.frames * keep[:, None, None, None, None]
        actions = state.actions * keep[:, None]  # zero frames and dummy actions before the first step
        frames = jnp.concatenate([frames[:, 1:], obs[:, None].astype(jnp.float32)], axis=1)
        x = net.apply(params, stack_history(frames, actions), method=MuZeroNet.represent)
        prior_logits, value_logits = net.apply(params, x, method=MuZeroNet.predict)
        root = mctx.RootFnOutput(
            prior_logits=prior_logits, value=categorical_to_scalar(jax.nn.softmax(value_logits), support_size), embedding=x
        )
        out = run_search(search, params, rng, root, recurrent_fn, legal)
        root_value = out.search_tree.summary().value
        actions = jnp.concatenate([actions[:, 1:], out.action[:, None]], axis=1)
        tree = out.search_tree.replace(embeddings=x[:, None]) if keep_tree else None
        return ActorState(frames, actions), out.action, root_value, out.action_weights, tree

    return act


def initial_actor_state(num_envs: int, history_length: int, obs_shape) -> ActorState:
    frames = jnp.zeros((num_envs, history_length, *obs_shape), jnp.float32)
    return ActorState(frames, jnp.zeros((num_envs, history_length), jnp.int32))


# ---------------------------------------------------------------------------------------------
# Training targets (4.3.7). A window holds steps c-L .. c+K+N of one environment's stream around
# the position c = L being trained. Steps of another episode are masked: zero frames and dummy
# actions before it; dummy actions, zero rewards, zero values and a dummy policy after it (4.3.3).
# ---------------------------------------------------------------------------------------------


class Targets(NamedTuple):
    stacked: tuple  # input of h at c: frame planes (H, W, L*C), actions (L,)
    next_stacked: tuple  # input of h at c+1 (self-consistency target)
    actions: jax.Array  # (K,) a_c .. a_{c+K-1}
    rewards: jax.Array  # (K,) r_{c+1} .. r_{c+K}
    values: jax.Array  # (K+1,) G^N_c .. G^N_{c+K}
    policies: jax.Array  # (K+1, |A^a|) p*_c .. p*_{c+K}
    consistency_mask: jax.Array  # () 1 unless c is the episode's last step


def history_at(window: dict, center: int, history_length: int):
    """The input of h at step `center` of a window: its L frames and the L actions before them, with
    frames and actions of an earlier episode replaced by zeros and the dummy action (4.3.4)."""
    L = history_length
    episode = jnp.cumsum(window["is_first"])
    same = episode[center - L + 1 : center + 1] == episode[center]
    frames = window["obs"][center - L + 1 : center + 1].astype(jnp.float32) * same[:, None, None, None]
    acts = window["action"][center - L : center] * (episode[center - L : center] == episode[center])
    return jax.tree.map(lambda a: a[0], stack_history(frames[None], acts[None]))


def td_horizon(made_at, num_updates, args: Args):
    """n <= N of each position (B,), the steps of reward before its value target bootstraps: N shortened by one for
    every --td-age-updates updates since the position's p* and v* were made (EfficientZero's off-policy correction)."""
    return jnp.clip(args.td_steps - (num_updates - made_at) // args.td_age_updates, 1, args.td_steps)


def bootstrap_histories(window: dict, args: Args, horizon=None):
    """(K+1, ...): inputs of h at c+n .. c+K+n (n: horizon, N if None), whose values --value-bootstrap target_network
    bootstraps from."""
    c = L = args.history_length
    N = args.td_steps
    if horizon is not None:  # steps moved N - n later in the window, so that step c+N+k of it is step c+n+k
        window = jax.tree.map(lambda a: jnp.roll(a, N - horizon, axis=0), window)
    histories = [history_at(window, j + N, L) for j in range(c, c + args.unroll_steps + 1)]
    return jax.tree.map(lambda *a: jnp.stack(a), *histories)


def value_targets(window: dict, c: int, unroll_steps: int, td_steps: int, gamma: float, bootstrap_values=None, horizon=None):
    """The value side of position c's targets: the mask of c's episode in the window (False after its last step), its
    rewards (0 elsewhere), v* (0 at and after its last step) and the returns G^n_c .. G^n_{c+K} (n: horizon, N if None).
    Reads only the window's PRIORITY_FIELDS; bootstrap_values (K+1,): values of the steps c+n .. c+K+n instead of v*."""
    K, N = unroll_steps, td_steps
    n = N if horizon is None else horizon
    episode = jnp.cumsum(window["is_first"])
    same = episode == episode[c]  # steps of c's episode; everything after its last step is False
    rewards = jnp.where(same, window["reward"], 0.0)
    alive = same & ~window["is_last"]  # v* = 0 at and after the end
    values = jnp.where(alive, window["value"], 0.0)
    given = jax.lax.dynamic_slice_in_dim(values, c + n, K + 1) if bootstrap_values is None else bootstrap_values
    bootstrap_values = jnp.where(jax.lax.dynamic_slice_in_dim(alive, c + n, K + 1), given, 0.0)  # 0 after the end
    discount = gamma  # per step
    discounts = jnp.where(jnp.arange(N) < n, discount ** jnp.arange(N), 0.0)
    # G^n_j = sum_{i<n} gamma^i r_{j+i+1} + gamma^n v_{j+n}, for j = c .. c+K
    returns = jnp.stack(
        [jnp.sum(discounts * rewards[j + 1 : j + N + 1]) + discount**n * bootstrap_values[j - c] for j in range(c, c + K + 1)]
    )
    return same, rewards, values, returns


def compute_targets(
    window: dict, history_length: int, unroll_steps: int, td_steps: int, gamma: float, bootstrap_values=None, horizon=None
):
    """window: one environment's steps c-L .. c+K+N (the fields of empty_segments, no batch axis)."""
    L, K, N = history_length, unroll_steps, td_steps
    c = L
    num_actions = window["policy"].shape[-1]
    same, rewards, values, returns = value_targets(window, c, K, N, gamma, bootstrap_values, horizon)
    actions = jnp.where(same, window["action"], 0)
    dummy = jax.nn.one_hot(0, num_actions)
    policies = jnp.where(same[:, None], window["policy"], dummy)
    return Targets(
        stacked=history_at(window, c, L),
        next_stacked=history_at(window, c + 1, L),
        actions=actions[c : c + K],
        rewards=rewards[c + 1 : c + K + 1],
        values=returns,
        policies=policies[c : c + K + 1],
        consistency_mask=(~window["is_last"][c]).astype(jnp.float32),
    )


# ---------------------------------------------------------------------------------------------
# Replay (4.3.14): fixed-length segments in FIFO order, so long episodes (Freeway: 2500 steps)
# reach the learner as they are played. A segment holds num_steps trainable positions plus the L
# steps before and K+N after them that their targets need.
# ---------------------------------------------------------------------------------------------
def empty_segments(num_envs: int, span: int, obs_shape, num_actions: int) -> dict:
    """Steps not played yet: padding that starts a new episode and is never trained on."""
    return {
        "obs": np.zeros((num_envs, span, *obs_shape), np.uint8),
        "reward": np.zeros((num_envs, span), np.float32),
        "is_first": np.ones((num_envs, span), bool),
        "is_last": np.zeros((num_envs, span), bool),
        "action": np.zeros((num_envs, span), np.int32),
        "value": np.zeros((num_envs, span), np.float32),
        "policy": np.zeros((num_envs, span, num_actions), np.float32),
        "valid": np.zeros((num_envs, span), bool),
        "made_at": np.zeros((num_envs, span), np.int32),  # learner updates when p* and v* were made (reanalyze)
    }


def gather_windows(segments: dict, seg: np.ndarray, pos: np.ndarray, window: int) -> dict:
    """Windows of steps pos .. pos+window-1 of segments seg, i.e. c-L .. c+K+N for c = pos+L."""
    idx = pos[:, None] + np.arange(window)[None]
    return {k: v[seg[:, None], idx] for k, v in segments.items()}


def sampling_probabilities(priorities: np.ndarray, valid: np.ndarray, mode: str, alpha: float, eps: float):
    """P(i) over all positions; invalid positions get 0. uniform: 1/N; proportional:
    (p_i + eps)^alpha / sum; rank: (1/rank_i)^alpha / sum, rank 1 = largest priority."""
    p = np.zeros(priorities.shape, np.float64)
    if mode == "uniform":
        p[valid] = 1.0
    elif mode == "proportional":
        p[valid] = (priorities[valid].astype(np.float64) + eps) ** alpha
    else:
        order = np.argsort(-priorities[valid], kind="stable")
        ranks = np.empty(len(order), np.float64)
        ranks[order] = np.arange(1, len(order) + 1)
        p[valid] = ranks ** (-alpha)
    return p / p.sum()


def importance_weights(probs: np.ndarray, num_valid: int, beta: float = 1.0):
    """rho_i = (1 / (N * P(i)))^beta over the largest of the sample, as prioritized replay does (at most 1)."""
    weights = (1.0 / (num_valid * probs)) ** beta
    return weights / weights.max()


class Replay:
    """`capacity` segments in FIFO order, each trainable position with its priority |v* - G^N| (4.3.14)."""

    def __init__(self, args: Args, capacity: int, obs_shape, num_actions: int, seed):
        self.args = args
        self.L = args.history_length
        self.S = args.num_steps
        self.window = self.L + args.unroll_steps + args.td_steps + 1  # steps c-L .. c+K+N of a position c
        self.storage = empty_segments(capacity, self.window - 1 + self.S, obs_shape, num_actions)
        self.priorities = np.zeros((capacity, self.S), np.float32)
        self.capacity = capacity
        self.next = 0  # the segment the next add() overwrites
        self.size = 0
        self.rng = np.random.default_rng(seed)
        self.probs = None  # P(i) of every position, computed at the first sample() after an add()

    def add(self, segments: dict, priorities: np.ndarray):
        for i in range(len(priorities)):
            for k, v in segments.items():
                self.storage[k][self.next] = v[i]
            self.priorities[self.next] = (self.priorities.max() or 1.0) if self.args.new_data_max_priority else priorities[i]
            self.next = (self.next + 1) % self.capacity
            self.size = min(self.size + 1, self.capacity)
        self.probs = None  # recomputed lazily, once per batch of new segments

    def trainable(self) -> np.ndarray:
        """(capacity, S) mask of positions whose step was really played."""
        mask = self.storage["valid"][:, self.L : self.L + self.S].copy()
        mask[self.size :] = False
        return mask

    @property
    def num_trainable(self) -> int:
        return int(self.trainable().sum())

    def sample(self, batch_size: int, importance_exponent: float):
        """A batch of windows (the fields of empty_segments, (B, L+K+N+1, ...)) and their importance weights (B,)."""
        args = self.args
        if self.probs is None:
            valid = self.trainable().ravel()
            self.probs = sampling_probabilities(
                self.priorities.ravel(), valid, args.sampling, args.priority_exponent, args.priority_epsilon
            )
            self.num_valid = int(valid.sum())
        flat = self.rng.choice(self.probs.size, size=batch_size, p=self.probs)
        self.sampled = flat  # flat indices into priorities, for update_priorities
        segment, position = np.divmod(flat, self.S)
        batch = gather_windows(self.storage, segment, position, self.window)
        return batch, importance_weights(self.probs[flat], self.num_valid, importance_exponent).astype(np.float32)


def batched_targets(args: Args):
    """compute_targets over a batch of windows: (B, L+K+N+1, ...) -> Targets with a leading B axis."""
    kw = dict(history_length=args.history_length, unroll_steps=args.unroll_steps, td_steps=args.td_steps)
    return jax.vmap(partial(compute_targets, **kw, gamma=args.gamma))


PRIORITY_FIELDS = ("reward", "value", "is_first", "is_last")  # all that value_targets reads


def make_priority_fn(args: Args):
    """|v*_c - G^N_c| of each window of a batch (B, L+K+N+1) of PRIORITY_FIELDS (4.3.14)."""

    def priority(window):
        c = args.history_length
        _, _, values, returns = value_targets(window, c, args.unroll_steps, args.td_steps, args.gamma)
        return jnp.abs(values[c] - returns[0])

    return jax.jit(jax.vmap(priority))


def add_with_priorities(replay: Replay, segments: dict, priority_fn):
    """Stores segments (the fields of empty_segments) with the priority of each position from make_priority_fn, which
    is given the PRIORITY_FIELDS of the windows only (no frames)."""
    n = len(segments["valid"])
    S = replay.S
    fields = {k: segments[k] for k in PRIORITY_FIELDS}
    windows = gather_windows(fields, *np.divmod(np.arange(n * S), S), replay.window)  # (segment, position) pairs
    replay.add(segments, np.asarray(priority_fn(windows)).reshape(n, S))


def sample_batch(replays: list, batch_size: int, importance_exponent: float):
    """This process's share of a batch: an equal part from each actor thread's replay, in thread order."""
    shares = [replay.sample(batch_size // len(replays), importance_exponent) for replay in replays]
    return {k: np.concatenate([b[k] for b, _ in shares]) for k in shares[0][0]}, np.concatenate([w for _, w in shares])


def annealed_importance_exponent(args: Args, global_step: int) -> float:
    """beta at this step: --importance-exponent, moved linearly to --importance-exponent-final over the run."""
    if args.importance_exponent_final is None:
        return args.importance_exponent
    fraction = global_step / args.total_timesteps
    return args.importance_exponent + fraction * (args.importance_exponent_final - args.importance_exponent)


def update_priorities(replays: list, value_errors: jax.Array, args: Args):
    """--learner-priorities: the last batch's positions (sample_batch's order) take the learner's |value - target|."""
    if args.reanalyze_mode == "sample" and args.learner_priorities:  # value_errors: [batch] (off: insertion priorities stay)
        for replay, errors in zip(replays, np.split(np.asarray(value_errors).ravel(), len(replays))):
            replay.priorities.flat[replay.sampled] = errors
            replay.probs = None


# ---------------------------------------------------------------------------------------------
# Reanalyze (4.3.10, 4.3.13): stored steps searched again with newer parameters; the played actions, rewards and
# observations stay. push (the thesis' reanalyze workers): copies of stored segments with p* and v* of a new search
# enter replay as new segments. sample (MuZero Reanalyze, EfficientZero): when a batch is drawn, the target network
# searches a share of its positions again for p*, bootstraps every value target, and the learner's errors become the
# priorities; replay keeps each played step once.
# ---------------------------------------------------------------------------------------------
def make_reanalyze_fn(net: MuZeroNet, search: partial, args: Args):
    """Jitted: (params, windows of steps c-L .. c, legal actions at c, rng) -> (p*, v*) of a new search at
    each c, its planner input rebuilt from the stored observations and actions as when acting (4.3.10)."""
    L, s = args.history_length, args.support_size
    recurrent_fn = make_recurrent_fn(net, args.gamma)

    @jax.jit
    def reanalyze(params, windows: dict, legal, rng):
        stacked = jax.vmap(partial(history_at, center=L, history_length=L))(windows)
        x = net.apply(params, stacked, method=MuZeroNet.represent)
        prior_logits, value_logits = net.apply(params, x, method=MuZeroNet.predict)
        root = mctx.RootFnOutput(
            prior_logits=prior_logits, value=categorical_to_scalar(jax.nn.softmax(value_logits), s), embedding=x
        )
        out = run_search(search, params, rng, root, recurrent_fn, legal)
        return out.action_weights, out.search_tree.summary().value

    return reanalyze


def fresh_policies(reanalyze_fn, target_params, window: dict, rng, args: Args) -> dict:
    """--reanalyze-mode sample: the window (B, L+K+N+1, ...) with p* of positions c .. c+K of its first
    round(--reanalyze-ratio x B) samples replaced by a new search with the target network, all in one batch."""
    c = L = args.history_length
    K = args.unroll_steps
    R = round(args.reanalyze_ratio * len(window["valid"]))
    if R == 0:
        return window
    # steps j-L .. j of each position j = c .. c+K of the R samples: (R, K+1, L+1, ...), then (R (K+1), L+1, ...)
    histories = jax.tree.map(lambda a: jnp.stack([a[:R, j - L : j + 1] for j in range(c, c + K + 1)], 1), window)
    histories = jax.tree.map(lambda a: a.reshape(R * (K + 1), *a.shape[2:]), histories)
    num_actions = window["policy"].shape[-1]
    legal = (jnp.arange(num_actions) == 0) == histories["is_last"][:, L, None]  # the dummy action at the end only
    policy, _ = reanalyze_fn(target_params, histories, legal, rng)
    return {**window, "policy": window["policy"].at[:R, c : c + K + 1].set(policy.reshape(R, K + 1, num_actions))}


def segments_to_reanalyse(args: Args) -> int:
    """Segments reanalysed per actor iteration and thread: r of all segments entering replay (thesis 5.5's worker ratio)."""
    if args.reanalyze_mode == "sample":  # (its searches are in the update)
        return 0
    return round(args.num_envs * args.reanalyze_ratio / (1 - args.reanalyze_ratio))


def reanalyze_segments(replay: Replay, reanalyze_fn, params, count: int, legal_fn, rng, version: int):
    """Copies of `count` stored segments drawn uniformly, with p* and v* of every played step that has its
    L-step history in the segment replaced by a new search, and what the new search changed."""
    seg = replay.rng.choice(replay.size, size=min(count, replay.size), replace=False)
    segments = {k: v[seg] for k, v in replay.storage.items()}  # fancy indexing copies
    L, span = replay.L, segments["valid"].shape[1]
    centers = np.arange(L, span)
    windows = gather_windows(segments, np.repeat(np.arange(len(seg)), len(centers)), np.tile(centers - L, len(seg)), L + 1)
    policy, value = reanalyze_fn(params, windows, legal_fn(windows["is_last"][:, L]), rng)
    played = segments["valid"][:, centers]
    old_p, old_v = segments["policy"][:, centers], segments["value"][:, centers]
    new_p = np.where(played[..., None], np.asarray(policy).reshape(old_p.shape), old_p)
    new_v = np.where(played, np.asarray(value).reshape(old_v.shape), old_v)
    stats = {  # over the searched steps; KL(new || old), the old policy floored at 1e-3 (unvisited actions)
        "reanalyze/value_change": np.abs(new_v - old_v)[played].mean(),
        "reanalyze/policy_kl": np.sum(new_p * (np.log(new_p + 1e-12) - np.log(np.maximum(old_p, 1e-3))), -1)[played].mean(),
        "reanalyze/targets_age_updates": version - segments["made_at"][:, 0].mean(),
    }
    segments["policy"][:, centers], segments["value"][:, centers] = new_p, new_v
    segments["made_at"][:] = version
    return segments, int(played.sum()), stats


# ---------------------------------------------------------------------------------------------
# Loss and update (4.3.8-4.3.9), pmapped over the learner devices of every process (Cleanba)
# ---------------------------------------------------------------------------------------------
class TrainState(NamedTuple):
    params: dict
    target_params: dict
    opt_state: optax.OptState
    step: jax.Array


def scale_gradient(x, scale: float):
    return x * scale + jax.lax.stop_gradient(x) * (1 - scale)


def masked_mean(x, mask):
    """Mean of x over mask (0 when the mask is empty)."""
    return jnp.sum(x * mask) / jnp.maximum(jnp.sum(mask), 1)


def make_optimizer(args: Args) -> optax.GradientTransformation:
    """Adam after global-norm clipping (4.3.9)."""
    return optax.chain(optax.clip_by_global_norm(args.max_grad_norm), optax.adam(args.learning_rate))


def make_update_fn(net: MuZeroNet, args: Args, optimizer: optax.GradientTransformation):
    """One update pmapped over the learner devices of all processes: each device trains on its share of the
    batch and lax.pmean averages the gradients, so every device applies the whole batch's gradient. The state
    and the metrics carry a leading axis of this process's learner devices; the window and weights are this
    process's share of the batch, (B/P, ...); also each sample's |value prediction - target| (learner devices, B/P/devices)."""
    K = args.unroll_steps
    support_size = args.support_size
    targets_fn = batched_targets(args)
    histories_fn = jax.vmap(partial(bootstrap_histories, args=args))
    reanalyze_fn = make_reanalyze_fn(net, planner_configs(args)[2], args)
    search_key = jax.random.fold_in(jax.random.PRNGKey(args.seed), 3)  # folded with the update and the device

    def scalar(logits):
        return categorical_to_scalar(jax.nn.softmax(logits), support_size)

    def categorical(x):
        return scalar_to_categorical(x, support_size)

    def loss_fn(params, target_params, window, weights, num_updates):
        horizon = td_horizon(window["made_at"][:, args.history_length], num_updates, args) if args.td_age_updates else None
        bootstrap_values = None
        if args.value_bootstrap == "target_network":  # the value half of MuZero Reanalyze
            stacked = histories_fn(window, horizon=horizon)  # frame planes (B, K+1, H, W, L*C), actions (B, K+1, L)
            flat = jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), stacked)  # (B (K+1), ...)
            x = net.apply(target_params, flat, method=MuZeroNet.represent)
            _, value_logits = net.apply(target_params, x, method=MuZeroNet.predict)
            bootstrap_values = jax.lax.stop_gradient(scalar(value_logits).reshape(stacked[1].shape[:2]))
        t = targets_fn(window, bootstrap_values=bootstrap_values, horizon=horizon)
        x = net.apply(params, t.stacked, method=MuZeroNet.represent)
        policy_logits, value_logits = net.apply(params, x, method=MuZeroNet.predict)
        value_prediction = scalar(value_logits)
        policy_loss = optax.losses.softmax_cross_entropy(policy_logits, t.policies[:, 0])
        value_loss = optax.losses.softmax_cross_entropy(value_logits, categorical(t.values[:, 0]))
        reward_loss, reward_predictions = 0.0, []
        for k in range(1, K + 1):
            x = scale_gradient(x, 0.5)  # halve the gradient entering each dynamics call
            x, reward_logits = net.apply(params, x, t.actions[:, k - 1], method=MuZeroNet.dynamics)
            if k == 1:
                x_one = x
            policy_logits, value_logits = net.apply(params, x, method=MuZeroNet.predict)
            policy_loss += optax.losses.softmax_cross_entropy(policy_logits, t.policies[:, k]) / K
            value_loss += optax.losses.softmax_cross_entropy(value_logits, categorical(t.values[:, k])) / K
            reward_loss += optax.losses.softmax_cross_entropy(reward_logits, categorical(t.rewards[:, k - 1]))
            reward_predictions.append(scalar(reward_logits))
        # self-consistency: projected x^1_t towards the (stop-gradient, target-network) x^0_{t+1}
        projected = net.apply(params, x_one, method=MuZeroNet.project).reshape(x_one.shape[0], -1)
        x_next = net.apply(target_params, t.next_stacked, method=MuZeroNet.represent).reshape(x_one.shape[0], -1)
        consistency_loss = optax.losses.cosine_distance(projected, jax.lax.stop_gradient(x_next), epsilon=1e-8)
        consistency_loss = consistency_loss * t.consistency_mask
        per_sample = (
            policy_loss
            + args.value_coef * value_loss
            + args.reward_coef * reward_loss
            + args.consistency_coef * consistency_loss
        )
        l2 = sum(jnp.sum(p**2) for p in jax.tree.leaves(params))
        loss = jnp.mean(weights * per_sample) + args.l2_coef * l2
        reward_errors = jnp.abs(jnp.stack(reward_predictions, axis=1) - t.rewards)  # (B, K), as t.rewards
        rewarding = t.rewards != 0
        metrics = {
            "losses/total_loss": loss,
            "losses/policy_loss": jnp.mean(policy_loss),
            "losses/value_loss": jnp.mean(value_loss),
            "losses/reward_loss": jnp.mean(reward_loss),
            "losses/consistency_loss": jnp.mean(consistency_loss),
            "losses/l2_loss": l2,
            "losses/value_target": jnp.mean(t.values[:, 0]),
            "losses/value_prediction": jnp.mean(value_prediction),
            "losses/value_error": jnp.mean(jnp.abs(value_prediction - t.values[:, 0])),
            # |predicted - observed reward| over the unrolled steps, apart on steps with and without reward
            "losses/reward_error_rewarding": masked_mean(reward_errors, rewarding),
            "losses/reward_error_other": masked_mean(reward_errors, ~rewarding),
            "losses/rewarding_share": jnp.mean(rewarding),
            "losses/importance_weight": jnp.mean(weights),
        }
        return loss, (metrics, jnp.abs(value_prediction - t.values[:, 0]))

    devices = [jax.local_devices(process_index=p)[i] for p in range(args.num_processes) for i in args.learner_device_ids]

    @partial(jax.pmap, axis_name="batch", devices=devices)  # the learner devices of every process, process by process
    def update(state: TrainState, window, weights):
        if args.reanalyze_mode == "sample":  # the policy half of MuZero Reanalyze: one batched search per update
            rng = jax.random.fold_in(jax.random.fold_in(search_key, state.step), jax.lax.axis_index("batch"))
            window = fresh_policies(reanalyze_fn, state.target_params, window, rng, args)
        gradient_fn = jax.grad(loss_fn, has_aux=True)
        grads, (metrics, value_errors) = gradient_fn(state.params, state.target_params, window, weights, state.step)
        grads, metrics = jax.lax.pmean((grads, metrics), "batch")  # the whole batch's mean
        metrics["losses/grad_norm"] = optax.tree.norm(grads)
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        step = state.step + 1
        target_params = optax.periodic_update(params, state.target_params, step, args.target_update_interval)
        return TrainState(params, target_params, opt_state, step), metrics, value_errors

    def split_update(state: TrainState, window: dict, weights: np.ndarray):
        n = len(args.learner_device_ids)
        return update(state, *jax.tree.map(lambda x: x.reshape(n, -1, *x.shape[1:]), (window, weights)))

    return split_update


def replicate(tree, args: Args):
    """A copy of `tree` for each of this process's learner devices (the pmapped update's state)."""
    return jax.tree.map(lambda x: np.stack([np.asarray(x)] * len(args.learner_device_ids)), tree)


def unreplicate(tree):
    """The first learner device's copy (all are equal), on the host."""
    return jax.tree.map(lambda x: np.asarray(x[0]), tree)


# ---------------------------------------------------------------------------------------------
# Actor threads (Cleanba): each acts with parameters exactly one version behind the learner
# ---------------------------------------------------------------------------------------------
class ActorSnapshot(NamedTuple):
    """An actor thread's whole state after an iteration, kept in checkpoints."""

    envs: MinAtarVecEnv
    segments: dict  # the fields of empty_segments, (num_envs, L + S + K + N, ...)
    state: ActorState  # on the host
    step: Step  # the last environment step, to act on next
    episodes: EpisodeTracker
    key: jax.Array


class Rollout(NamedTuple):
    segments: dict  # the fields of empty_segments, (num_envs, L + S + K + N, ...)
    episode_returns: list  # of the episodes that ended in this iteration
    episode_lengths: list
    scalars: dict  # charts/root_value, charts/policy_entropy (means) and the thread's stats/actor_* (seconds)
    snapshot: ActorSnapshot | None  # the actor's state after this iteration, when a checkpoint is due


class Stopped(Exception):
    """The other thread has ended: stop waiting on the queue."""


class Interrupted(Exception):
    """Ctrl-C or SIGTERM, raised by the learner where it can stop safely (not inside JAX's tracing or a callback)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


signals_received = []  # by on_signal, the handler of SIGINT and SIGTERM when the script runs


def on_signal(signum, frame):
    if signals_received:  # a second Ctrl-C stops at once
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)
    signals_received.append(signum)


def check_signals():
    """Raises Interrupted once a signal has been received (the learner calls it between updates and while it waits)."""
    if signals_received:
        raise Interrupted(signals_received[0])


def wait_on(queue_op, other_alive):
    """A queue's get, or put with its item (functools.partial), retried until it succeeds; gives up with Stopped once
    `other_alive()` is False (a get still takes what is left)."""
    while True:
        try:
            return queue_op(timeout=0.5)
        except (queue.Empty, queue.Full):
            if not other_alive():
                raise Stopped


def checkpoint_due(args: Args, iteration: int, num_iterations: int) -> bool:
    """After the iterations whose steps cross a multiple of --checkpoint-interval, but not after the last one."""
    if not args.checkpoint_interval or iteration >= num_iterations:
        return False
    steps = args.num_envs * args.num_steps * global_threads(args)
    return iteration * steps // args.checkpoint_interval > (iteration - 1) * steps // args.checkpoint_interval


class ActorQueues(NamedTuple):
    params: queue.Queue  # the learner's parameters, to act with
    rollouts: queue.Queue  # the actor's rollouts, or the error that stopped it


def actor_loop(
    args: Args, thread: int, act_fn, pending_params: list, queues: ActorQueues, learner_alive, iterations: range, key, snapshot
):
    """Actor thread `thread` of this process, for `iterations`. Iteration k acts with the parameters the learner put
    after its iteration k-2 (the initial ones for k <= 2): those in `pending_params`, then those of the params queue.
    `snapshot` (an ActorSnapshot from a checkpoint) restores environments, history, segments and key."""
    device = jax.local_devices()[args.actor_device_ids[thread % len(args.actor_device_ids)]]
    global_thread = args.process_id * args.num_actor_threads + thread  # the thread's index among all processes' threads
    num_envs = args.num_envs
    S = args.num_steps
    span = args.history_length + S + args.unroll_steps + args.td_steps
    try:
        with jax.default_device(device):  # environment inputs go straight to the actor's device
            if snapshot is None:
                envs = MinAtarVecEnv(args.env_id, num_envs, (args.seed, global_thread), args.sticky_action_prob)
                segments = empty_segments(num_envs, span, envs.obs_shape, envs.num_actions)
                state = initial_actor_state(num_envs, args.history_length, envs.obs_shape)
                step = envs.step(np.zeros(num_envs, np.int32))
                episodes = EpisodeTracker(num_envs)
            else:
                envs, segments, state, step, episodes, key = snapshot
                state = jax.tree.map(jnp.asarray, state)
            put_wait = 0.0
            for iteration in iterations:
                start = time.time()
                params = pending_params.pop(0) if pending_params else wait_on(queues.params.get, learner_alive)
                params = jax.device_put(params, device)
                params_wait = time.time() - start
                segments = {k: np.roll(v, -S, axis=1) for k, v in segments.items()}
                returns, lengths, root_values, entropies = [], [], [], []
                for t in range(span - S, span):
                    if not learner_alive():  # the learner has stopped: end within a step
                        raise Stopped
                    key, sub = jax.random.split(key)
                    state, action, root_value, policy, _ = act_fn(
                        params, state, step.obs, step.is_first, envs.legal_actions(step.is_last), sub
                    )
                    action = np.asarray(action)
                    root_value = np.asarray(root_value)
                    policy = np.asarray(policy)
                    played = dict(obs=step.obs, reward=step.reward, is_first=step.is_first, is_last=step.is_last)
                    played.update(action=action, value=root_value, policy=policy, valid=True)
                    for k, v in played.items():  # the fields of empty_segments that acting fills, by name
                        segments[k][:, t] = v
                    _, finished_returns, finished_lengths = episodes.update(step)
                    returns += finished_returns.tolist()
                    lengths += finished_lengths.tolist()
                    root_values.append(root_value.mean())
                    entropies.append(-np.sum(policy * np.log(policy + 1e-12), -1).mean())
                    step = envs.step(action)
                scalars = {
                    "charts/root_value": float(np.mean(root_values)),
                    "charts/policy_entropy": float(np.mean(entropies)),
                    "stats/actor_params_queue_wait": params_wait,
                    "stats/actor_rollout_queue_put_wait": put_wait,
                    "stats/actor_time": time.time() - start,
                }
                snapshot = None
                if checkpoint_due(args, iteration, iterations.stop - 1):
                    snapshot = ActorSnapshot(envs, segments, jax.device_get(state), step, episodes, key)
                    snapshot = copy.deepcopy(snapshot)
                rollout = Rollout({k: v.copy() for k, v in segments.items()}, returns, lengths, scalars, snapshot)
                put_start = time.time()
                wait_on(partial(queues.rollouts.put, rollout), learner_alive)
                put_wait = time.time() - put_start  # reported with the next rollout
    except Stopped:  # the learner has ended; it reports its own error
        pass
    except BaseException as e:  # anything, even KeyboardInterrupt or SystemExit: hand it to the learner
        try:
            wait_on(partial(queues.rollouts.put, e), learner_alive)
        except Stopped:
            pass


def actor_alive(actor: threading.Thread) -> bool:
    """Whether the actor thread runs; raises Interrupted once a signal has come (the learner waits on it)."""
    check_signals()
    return actor.is_alive()


def collect(queues: list, actors: list) -> list:
    """One rollout from each actor thread, in thread order (the data a run sees does not depend on which thread
    is first); an actor's error is raised here."""
    rollouts = []
    for thread, (actor_queues, actor) in enumerate(zip(queues, actors)):
        try:
            rollouts.append(wait_on(actor_queues.rollouts.get, partial(actor_alive, actor)))
        except Stopped:
            raise RuntimeError(f"actor thread {thread} ended without handing over a rollout or an error")
        if isinstance(rollouts[thread], BaseException):
            raise RuntimeError(f"actor thread {thread} failed") from rollouts[thread]
    return rollouts


# ---------------------------------------------------------------------------------------------
# Checkpoints: everything a run needs to continue exactly as if it had not stopped
# ---------------------------------------------------------------------------------------------
CHECKPOINT_FILE = "checkpoint.pkl"
FINISHED_FILE = "finished.json"  # written when the run has ended and its model is saved: --resume refuses the run
# flags that do not change what a run computes: a resumed run may set them differently
RESUME_FREE_FLAGS = set(
    "resume track wandb_project_name wandb_entity capture_video save_model log_interval checkpoint_interval "
    "coordinator_address".split()
)


@dataclass
class Progress:
    """The learner's counters, kept in checkpoints."""

    next_eval: int
    iteration: int = 0
    sample_credit: float = 0.0  # samples owed to the learner by the steps played so far
    num_updates: int = 0
    eval_summary: str = "eval_return=nan"  # the last evaluation, for the console
    train_returns: list = field(default_factory=list)  # the last 20 training episodes' returns
    metrics: dict = field(default_factory=dict)  # the last update's losses/*
    wandb_id: str | None = None  # the W&B run, which a resumed run with --track continues
    reanalysed_positions: int = 0  # positions searched again so far


class CheckpointUnpickler(pickle.Unpickler):
    """Classes of this script are found whether it ran as a script (`__main__`) or was imported."""

    def find_class(self, module, name):
        if module in ("__main__", SCRIPT):
            return getattr(sys.modules[__name__], name)
        return super().find_class(module, name)


CHECKSUM = b"sha256:"


def write_checkpoint(file, payload: dict):
    """A checkpoint file: the script's name on a line, the pickled payload, CHECKSUM and the pickle's sha256 in hex."""
    data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    file.write(f"{SCRIPT}\n".encode())
    file.write(data)
    file.write(CHECKSUM + hashlib.sha256(data).hexdigest().encode())


def load_checkpoint(path: str) -> dict:
    """A checkpoint's payload; ValueError if another script wrote it or its sha256 does not match (a changed file)."""
    with open(path, "rb") as f:
        written_by = f.readline()[:-1].decode(errors="replace")
        data = f.read()
    if written_by != SCRIPT:
        script = f"{written_by}.py" if written_by.startswith("muzero_") else "a version before checksums or another program"
        raise ValueError(f"the checkpoint was written by {script}, not by {SCRIPT}.py")
    body = data[: -len(CHECKSUM) - 64]
    if data[len(body) :] != CHECKSUM + hashlib.sha256(body).hexdigest().encode():
        raise ValueError("its sha256 does not match its contents (truncated or changed since it was written)")
    return CheckpointUnpickler(io.BytesIO(body)).load()


def process_dir(run_dir: str, args: Args) -> str:
    """Where a process writes its events and checkpoint: the run's directory for process 0, `process_{i}` in it else."""
    return run_dir if args.process_id == 0 else os.path.join(run_dir, f"process_{args.process_id}")


def read_checkpoint(args: Args) -> dict:
    """This process's checkpoint of `--resume`, refused with fail() if it is missing, broken or of other flags.
    (A checkpoint is a pickle: load only your own.)"""
    path = os.path.join(process_dir(args.resume, args), CHECKPOINT_FILE)
    if os.path.isfile(os.path.join(os.path.dirname(path), FINISHED_FILE)):
        fail(f"--resume {args.resume}: the run has finished (see its {FINISHED_FILE}): there is nothing to continue")
    if not os.path.isfile(path):
        fail(f"--resume {args.resume}: no checkpoint there ({path}; runs write them with --checkpoint-interval N)")
    try:
        checkpoint = load_checkpoint(path)
        saved = checkpoint["args"]
    except Exception as e:
        fail(f"--resume {args.resume}: {path} is not a whole checkpoint of {SCRIPT}.py ({type(e).__name__}: {e})")
    given = asdict(args)
    differ = [  # a flag that only one of them has is None in the other (a checkpoint of another version of the script)
        f"--{k.replace('_', '-')} {saved.get(k)!r} (now {given.get(k)!r})"
        for k in dict.fromkeys([*given, *saved])
        if k not in RESUME_FREE_FLAGS and saved.get(k) != given.get(k)
    ]
    if differ:
        fail(f"--resume {args.resume}: the checkpoint was written with other flags: {', '.join(differ)}")
    return checkpoint


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


def save_checkpoint(writer, args: Args, progress: Progress, state, replays: list, acting_params, rollouts: list, step: int):
    """Everything the run needs to continue, written atomically once every event up to now is on disk: tensorboardX's
    flush() does not wait for its queue, close() does. The run goes on in a new events file (named to sort in step
    order), whose writer is returned."""
    start = time.time()
    run_dir = writer.logdir
    writer.close()
    writer = SummaryWriter(run_dir, max_queue=EVENTS_QUEUE, filename_suffix=f".{progress.iteration:09d}")
    payload = dict(
        args=asdict(args),
        progress=replace(progress, metrics=jax.device_get(progress.metrics)),
        train_state=unreplicate(state),
        replays=replays,
        acting_params=jax.device_get(acting_params),
        actor=[rollout.snapshot for rollout in rollouts],
    )
    atomic_write(os.path.join(run_dir, CHECKPOINT_FILE), partial(write_checkpoint, payload=payload))
    writer.add_scalar("stats/checkpoint_time", time.time() - start, step)
    if args.process_id == 0:  # (the other processes' checkpoints are in process_{i} of the run's directory)
        print(f"checkpoint at step {step}: --resume {run_dir} continues from it", flush=True)
    return writer


# ---------------------------------------------------------------------------------------------
# Evaluation and saving (loading a saved model, GIFs and search trees: muzero_tools.py)
# ---------------------------------------------------------------------------------------------
class Recording(NamedTuple):
    """One evaluation episode step by step, as the annotated video shows it (thesis 4.5)."""

    frames: list  # the observation at each step
    trees: list  # the search made at that step (mctx.Tree of this game alone, root embedding only)
    actions: list  # the action taken
    action_names: list  # a name for each agent action


def evaluate_policy(act_fn, params, args: Args, num_episodes: int, seed, record: bool = False):
    """Plays `num_episodes` episodes as one batch with `act_fn`, each cut at --max-episode-steps; `seed` (an int or a
    tuple of ints) fixes environments and search noise. Returns (returns, lengths, a Recording of episode 0 if
    `record`: act_fn must keep its trees)."""
    step_limit = args.max_episode_steps or GYMNAX_STEP_LIMITS.get(args.env_id, 1000)
    envs = MinAtarVecEnv(args.env_id, num_episodes, seed, args.sticky_action_prob, step_limit)
    state = initial_actor_state(num_episodes, args.history_length, envs.obs_shape)
    step = envs.step(np.zeros(num_episodes, np.int32))
    episodes = EpisodeTracker(num_episodes)
    returns, lengths = np.zeros(num_episodes), np.zeros(num_episodes, np.int64)
    done = np.zeros(num_episodes, bool)
    recording = Recording([], [], [], ["(end)"] + [MINATAR_ACTIONS[a] for a in envs.action_set])
    key = jax.random.PRNGKey(env_seeds(seed, num_episodes + 1)[-1])  # a stream no environment uses
    while not done.all():
        check_signals()
        key, sub = jax.random.split(key)
        state, action, _, _, tree = act_fn(params, state, step.obs, step.is_first, envs.legal_actions(step.is_last), sub)
        if record and not done[0]:
            recording.frames.append(step.obs[0])
            recording.trees.append(jax.tree.map(lambda x: np.asarray(x[:1]), tree))
            recording.actions.append(int(action[0]))
        ended, ended_returns, ended_lengths = episodes.update(step)
        first_time = ~done[ended]  # each copy counts its first episode only
        returns[ended[first_time]], lengths[ended[first_time]] = ended_returns[first_time], ended_lengths[first_time]
        done[ended] = True
        step = envs.step(np.asarray(action))
    return returns, lengths, recording


def evaluation_due(args: Args, progress: Progress, global_step: int, last: bool) -> bool:
    """On process 0, once --eval-interval more steps are played since the last evaluation, and at the run's end."""
    return args.process_id == 0 and args.eval_episodes > 0 and (global_step >= progress.next_eval or last)


def log_evaluation(writer: SummaryWriter, eval_act_fn, params, args: Args, iteration: int, global_step: int) -> str:
    """Plays --eval-episodes episodes (seeded by the iteration), logs charts/eval_*, saves the first as an annotated
    GIF with --capture-video; returns the result for the console."""
    params = jax.device_put(params, jax.local_devices()[args.actor_device_ids[0]])  # on the first of --actor-device-ids
    returns, lengths, recording = evaluate_policy(
        eval_act_fn, params, args, args.eval_episodes, (args.seed, 1, iteration), record=args.capture_video
    )
    writer.add_scalar("charts/eval_episodic_return", float(np.mean(returns)), global_step)
    writer.add_scalar("charts/eval_episodic_length", float(np.mean(lengths)), global_step)
    if args.capture_video:
        from muzero_tools import save_gif

        save_gif(recording, f"videos/{os.path.basename(writer.logdir)}/eval_{global_step}.gif")
    return f"eval_return={np.mean(returns):.2f}"


def save_model(path: str, args: Args, params, global_step: int):
    """The parameters (flax bytes) and then, beside them, the script, flags, the parameters' sha256 and the environment
    steps they were trained on (`step`) as JSON: muzero_tools.load_model reads both. The JSON is written last: a model
    whose save failed has none."""
    data = flax.serialization.to_bytes(params)
    atomic_write(path, lambda f: f.write(data))
    saved = dict(script=SCRIPT, sha256=hashlib.sha256(data).hexdigest(), step=global_step, **asdict(args))
    atomic_write(path + ".json", lambda f: f.write(json.dumps(saved, indent=2).encode()))


def save_final_model(run_dir: str, args: Args, params, num_updates: int, global_step: int):
    """save_model at the end of a run (--save-model), saying where the model is, or how the run can still give it."""
    path = os.path.join(run_dir, f"{args.exp_name}.muzero_model")
    if not num_updates:
        print("no update was made: there are no trained parameters to save", flush=True)
        return
    try:
        save_model(path, args, params, global_step)
    except OSError as e:
        has_checkpoint = os.path.isfile(os.path.join(run_dir, CHECKPOINT_FILE))
        retry = f"--resume {run_dir} --save-model continues from its last checkpoint" if has_checkpoint else "no checkpoint"
        raise OSError(e.errno, f"the parameters after {num_updates} updates are not saved: {e.strerror}; {retry}") from e
    print(f"the parameters after {num_updates} updates are saved to {path}", flush=True)


# ---------------------------------------------------------------------------------------------
# Learner (main thread)
# ---------------------------------------------------------------------------------------------
def check_memory(args: Args, net, obs_shape, num_actions: int):
    """Refuses sizes whose arrays cannot fit in this machine's memory, before anything is compiled or written or an
    environment is built: each entry of `needs` is the bytes of what the flags it names size, in this process."""
    params = jax.eval_shape(partial(init_params, net, args), jax.random.PRNGKey(0))
    step_bytes = sum(v.itemsize * math.prod(v.shape[2:]) for v in empty_segments(0, 1, obs_shape, num_actions).values())
    span = args.history_length + args.num_steps + args.unroll_steps + args.td_steps
    node_bytes = obs_shape[0] * obs_shape[1] * args.channels * 4 + (6 * num_actions + 5) * 4  # mctx.Tree per node
    searched = segments_to_reanalyse(args) * (span - args.history_length)  # positions reanalysed at once
    if args.reanalyze_mode == "sample":  # fresh_policies' searches on a learner device
        per_device = args.batch_size // args.num_processes // len(args.learner_device_ids)
        searched = round(args.reanalyze_ratio * per_device) * (args.unroll_steps + 1)
    needs = {  # bytes in this process, by the flags that set them
        "--buffer-size": args.buffer_size // args.num_processes // args.num_steps * span * step_bytes,
        "--channels/--head-hidden/--support-size": 6 * sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(params)),
        "--num-envs/--num-simulations": args.num_envs * args.num_actor_threads * (args.num_simulations + 1) * node_bytes,
        "--eval-episodes/--eval-num-simulations": args.eval_episodes * (args.eval_num_simulations + 1) * node_bytes,
        "--reanalyze-ratio/--reanalyze-num-simulations": searched * (args.reanalyze_num_simulations + 1) * node_bytes,
    }
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    total = sum(needs.values()) / 2**30
    if total > memory:
        parts = ", ".join(f"{k} ({v / 2**30:.1f} GiB)" for k, v in sorted(needs.items(), key=lambda kv: -kv[1]))
        fail(f"the run needs about {total:.1f} GiB, mostly for {parts}; this machine has {memory:.1f} GiB")


# tensorboardX writes events from a thread of its own, which a full disk stops: its queue holds an iteration's events,
# so that the learner reaches log_iteration, which raises that thread's error, rather than wait on the queue forever
EVENTS_QUEUE = 1000
thread_errors = []  # the errors that ended a thread (threading.ExceptHookArgs), recorded by on_thread_error


def on_thread_error(error):
    """threading.excepthook of a run: a thread's error is printed as usual, and log_iteration raises it."""
    thread_errors.append(error)
    threading.__excepthook__(error)


def open_run(args: Args, checkpoint: dict | None, steps_per_iteration: int, num_iterations: int):
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
    return run_dir, writer, wandb_run


class IterationTimes(NamedTuple):
    """When (time.time()) the parts of the learner's iteration began and ended, for log_iteration's stats/."""

    run_start: float  # when the run started or resumed
    run_start_step: int  # the environment step it started or resumed at
    collect_start: float  # the learner starts waiting for the actors' rollouts
    collected: float  # it has them; it stores them and trains
    hand_over_start: float  # it has trained, and puts the parameters in the actors' queues
    handed_over: float  # done (the evaluation and logging come after)


def log_iteration(writer, progress: Progress, rollouts: list, replays: list, global_step: int, times: IterationTimes, console):
    """The iteration's charts/, losses/ and stats/ (the docs page lists them) and, if `console`, a progress line."""
    if thread_errors:
        raise RuntimeError(f"thread {thread_errors[0].thread.name} stopped") from thread_errors[0].exc_value
    sps = int((global_step - times.run_start_step) / (time.time() - times.run_start))
    waits = {
        "learner_rollout_queue_wait": times.collected - times.collect_start,
        "learner_params_queue_put_wait": times.handed_over - times.hand_over_start,
        "learner_time": times.handed_over - times.collected,
    }
    for rollout in rollouts:
        for episode_return, length in zip(rollout.episode_returns, rollout.episode_lengths):
            writer.add_scalar("charts/episodic_return", episode_return, global_step)
            writer.add_scalar("charts/episodic_length", length, global_step)
    scalars = {k: float(v[0]) for k, v in progress.metrics.items()}  # pmean'd: the same on every learner device
    scalars.update({f"stats/{k}": v for k, v in waits.items()})
    scalars.update({"charts/SPS": sps, "charts/num_updates": progress.num_updates})
    scalars["stats/replay_size"] = sum(replay.num_trainable for replay in replays)
    scalars["charts/reanalysed_positions"] = progress.reanalysed_positions
    for k in rollouts[0].scalars:  # charts/ the mean over the actor threads, stats/ each thread's (thread 0 unsuffixed)
        if k.startswith("charts/"):
            scalars[k] = np.mean([rollout.scalars[k] for rollout in rollouts])
        else:
            scalars.update({k + (f"_thread{t}" if t else ""): rollout.scalars[k] for t, rollout in enumerate(rollouts)})
    for k, v in scalars.items():
        writer.add_scalar(k, v, global_step)
    if console:
        mean_return = np.mean(progress.train_returns) if progress.train_returns else float("nan")
        print(
            f"step={global_step} SPS={sps} updates={progress.num_updates} train_return="
            f"{mean_return:.2f} {progress.eval_summary} loss={scalars.get('losses/total_loss', np.nan):.3f} waits: "
            f"learner={waits['learner_rollout_queue_wait']:.2f}s actor={scalars['stats/actor_params_queue_wait']:.2f}s",
            flush=True,
        )


def start_actors(args: Args, act_fn, acting_params: list, iterations: range, keys: list, snapshots: list, learner_done):
    """This process's actor threads (`keys`: one for each of all processes' threads), started, and their queues. Each
    thread stops waiting on its queues once the `learner_done` event is set."""

    def learner_alive():
        return not learner_done.is_set()

    queues = []
    actors = []
    for thread in range(args.num_actor_threads):
        queues.append(ActorQueues(params=queue.Queue(maxsize=1), rollouts=queue.Queue(maxsize=1)))
        key = keys[args.process_id * args.num_actor_threads + thread]
        thread_args = (args, thread, act_fn, list(acting_params), queues[thread], learner_alive, iterations, key)
        actors.append(threading.Thread(target=actor_loop, args=(*thread_args, snapshots[thread]), daemon=True))
        actors[-1].start()
    return queues, actors


def hand_over(queues: list, actors: list, params):
    """Puts the parameters in every actor thread's params queue (an ended thread is skipped: collect() says why)."""
    for actor_queues, actor in zip(queues, actors):
        try:
            wait_on(partial(actor_queues.params.put, params), actor.is_alive)
        except Stopped:
            pass


def main(args: Args):
    validate_args(args)
    join_processes(args)  # before anything touches a device
    validate_devices(args)
    checkpoint = read_checkpoint(args) if args.resume else None
    obs_shape, num_actions = env_shapes(args)
    net = make_network(args, num_actions)
    check_memory(args, net, obs_shape, num_actions)
    num_threads = global_threads(args)  # the actor threads of all processes
    threads = range(args.process_id * args.num_actor_threads, (args.process_id + 1) * args.num_actor_threads)  # this one's
    steps_per_iteration = args.num_envs * args.num_steps * num_threads
    num_iterations = args.total_timesteps // steps_per_iteration
    run_dir, writer, wandb_run = open_run(args, checkpoint, steps_per_iteration, num_iterations)
    key, net_key, *actor_keys = jax.random.split(jax.random.PRNGKey(args.seed), 2 + num_threads)

    # the agent: network, planners, update
    params = init_params(net, args, net_key)  # the same in every process: one seed
    num_reanalysed = segments_to_reanalyse(args)
    optimizer = make_optimizer(args)
    train_planner, test_planner, reanalyze_planner = planner_configs(args)
    act_fn = make_act_fn(net, train_planner, args.gamma)
    eval_act_fn = make_act_fn(net, test_planner, args.gamma, keep_tree=args.capture_video)
    update_fn = make_update_fn(net, args, optimizer)
    priority_fn = make_priority_fn(args)
    reanalyze_fn = make_reanalyze_fn(net, reanalyze_planner, args)
    legal_actions = MinAtarVecEnv(args.env_id, 1, args.seed, args.sticky_action_prob).legal_actions  # of any position
    reanalyze_key = jax.random.fold_in(key, 2)  # folded with the iteration: fixed by the seed, resumable

    # the learner's state, a replay for each actor thread (seeded by the thread's index), and the actors' parameters
    # for their next two iterations (Cleanba: k acts with those of k-2) and state; from the checkpoint when resuming
    if checkpoint is None:
        progress = Progress(args.eval_interval)
        state = TrainState(params, params, optimizer.init(params), jnp.zeros((), jnp.int32))
        capacity = args.buffer_size // num_threads // args.num_steps  # segments per replay
        replays = [Replay(args, capacity, obs_shape, num_actions, (args.seed, g)) for g in threads]
        acting_params = [params, params]
        snapshots = [None] * args.num_actor_threads
    else:  # (building the replays anew would allocate the whole buffer only to drop it)
        fields = ("progress", "train_state", "replays", "acting_params", "actor")
        progress, state, replays, acting_params, snapshots = (checkpoint[k] for k in fields)
    progress.wandb_id = wandb_run.id if wandb_run else progress.wandb_id
    state = replicate(state, args)
    learner_done = threading.Event()  # set when main returns or raises: the actors then stop waiting
    iterations = range(progress.iteration + 1, num_iterations + 1)
    queues, actors = start_actors(args, act_fn, acting_params, iterations, actor_keys, snapshots, learner_done)

    run_start = last_log = time.time()
    run_start_step = progress.iteration * steps_per_iteration
    try:
        for iteration in iterations:
            global_step = iteration * steps_per_iteration
            # 1. collect: a rollout from every actor thread, into its replay
            collect_start = time.time()
            rollouts = collect(queues, actors)
            collected = time.time()
            for replay, rollout in zip(replays, rollouts):
                rollout.segments["made_at"][:] = progress.num_updates
                add_with_priorities(replay, rollout.segments, priority_fn)
                progress.train_returns = (progress.train_returns + rollout.episode_returns)[-20:]
            # 1b. reanalyse: stored segments searched again with the newest parameters (--reanalyze-ratio, --reanalyze-mode)
            new_steps = steps_per_iteration
            if num_reanalysed and replays[0].num_trainable * num_threads >= args.learning_starts:
                params = unreplicate(state.params)
                for replay, global_thread in zip(replays, threads):
                    rng = jax.random.fold_in(reanalyze_key, iteration * num_threads + global_thread)
                    segments, positions, stats = reanalyze_segments(
                        replay, reanalyze_fn, params, num_reanalysed, legal_actions, rng, progress.num_updates
                    )
                    add_with_priorities(replay, segments, priority_fn)
                    # reanalysed targets count as generated ones (5.5), in every process alike
                    new_steps += len(segments["valid"]) * args.num_steps * args.num_processes
                    progress.reanalysed_positions += positions
                    for k, v in stats.items():
                        writer.add_scalar(k, float(v), global_step)
            # 2. train: --replay-ratio samples per step played or reanalysed (the replays fill alike in every process)
            if replays[0].num_trainable * num_threads >= args.learning_starts:
                progress.sample_credit += args.replay_ratio * new_steps
                while progress.sample_credit >= args.batch_size:
                    check_signals()
                    progress.sample_credit -= args.batch_size
                    beta = annealed_importance_exponent(args, global_step)
                    batch, weights = sample_batch(replays, args.batch_size // args.num_processes, beta)
                    state, progress.metrics, value_errors = update_fn(state, batch, weights)
                    update_priorities(replays, value_errors, args)
                    progress.num_updates += 1
            jax.block_until_ready(state)  # so that the timings below measure the work, not its dispatch
            # 3. hand the parameters to the actors: their iteration + 2 acts with them
            hand_over_start = time.time()
            params = unreplicate(state.params)
            if iteration <= num_iterations - 2:
                hand_over(queues, actors, params)
            acting_params = [acting_params[1], params]
            times = IterationTimes(run_start, run_start_step, collect_start, collected, hand_over_start, time.time())
            # 4. evaluate (process 0), 5. log, 6. checkpoint (the actors sent their state with this rollout)
            progress.iteration = iteration
            if evaluation_due(args, progress, global_step, last=iteration == num_iterations):
                progress.next_eval += args.eval_interval
                progress.eval_summary = log_evaluation(writer, eval_act_fn, params, args, iteration, global_step)
            console = time.time() - last_log >= args.log_interval or iteration == num_iterations
            last_log = time.time() if console else last_log
            log_iteration(writer, progress, rollouts, replays, global_step, times, console)
            if rollouts[0].snapshot is not None:
                writer = save_checkpoint(writer, args, progress, state, replays, acting_params, rollouts, global_step)
    finally:  # threads joined first (no thread inside XLA at exit); with --save-model nothing trained is lost
        learner_done.set()
        for actor in actors:
            actor.join()
        try:
            if args.save_model:  # every process its own copy: a host's run directory is complete
                steps_played = progress.iteration * steps_per_iteration  # in the whole iterations the learner finished
                save_final_model(run_dir, args, unreplicate(state.params), progress.num_updates, steps_played)
        finally:
            writer.close()
    finished = dict(step=num_iterations * steps_per_iteration, updates=progress.num_updates)  # the run ended, its model saved
    atomic_write(os.path.join(run_dir, FINISHED_FILE), lambda f: f.write(json.dumps(finished).encode()))
    if wandb_run:
        wandb_run.finish()
    if args.num_processes > 1:  # every process through the shutdown barrier here, its work done, not at interpreter exit
        jax.distributed.shutdown()  # (process 0 hosts the coordination service the others report to)
    return unreplicate(state)


if __name__ == "__main__":
    for signum in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C, and `timeout` or a job scheduler
        signal.signal(signum, on_signal)
    try:
        main(tyro.cli(Args))
    except Interrupted as e:  # the parameters are saved (--save-model): exit 130 after Ctrl-C, 143 after SIGTERM
        sys.exit(128 + e.signum)
