"""MuZero for Atari (envpool) in one file: muzero_minatar.py with envpool's games and a down-sampling front (96 x 96 to 6 x 6).

Read top to bottom: Args (every flag, thesis value in its docstring), the environment bridge with the
dummy action (MooZi thesis 4.3.1-4.3.3), history stacking and the categorical value transform
(4.3.4, 2.8.6), the flax networks h, g, f and the projection (4.3.5), the MCTX planner (4.3.6),
training targets (4.3.7), segment replay with prioritized sampling (4.3.14), loss and update
(4.3.8-4.3.9), the actor threads and the learner loop (Cleanba: actor iteration k acts with the parameters
the learner handed over after its iteration k-2, so a run's data is fixed by its seed; the update is pmapped
over --learner-device-ids, and several processes under jax.distributed form one data-parallel learner).
What a run needs that is not MuZero (checkpoints, signals, the run directory, hosts) is in muzero_run.py.
"""

import copy
import math
import os
import queue
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from typing import Literal, NamedTuple

# XLA's CPU backend, set before jax starts (a user's own XLA_FLAGS come after ours and win): YNNPACK fusions off
# (slower for these small convolutions), and code and math that give a seed the same numbers on every x86-64 CPU
# with the same cache sizes (docs: Speed, Reproducibility).
os.environ["XLA_FLAGS"] = (
    "--xla_cpu_experimental_ynn_fusion_type= --xla_cpu_max_isa=AVX2 --xla_cpu_use_xnnpack=false "
    "--xla_cpu_enable_platform_dependent_math=false " + os.environ.get("XLA_FLAGS", "")
)
os.environ.setdefault("TENSORFLOW_USE_CUSTOM_CONTRACTION_KERNEL", "false")

import flax.linen as nn
import jax
import jax.numpy as jnp
import mctx
import numpy as np
import optax

import muzero_run

try:
    import ale_py
    import envpool
except ModuleNotFoundError as e:  # an optional dependency of the package
    raise SystemExit(f"{e.name} is not installed: pip install -e '.[atari]' (in the repository)") from e

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
    save_checkpoint_models: bool = False
    """with --checkpoint-interval, a model is also saved at every checkpoint and at the end, in `runs/{run_name}/models/`"""
    resume: str | None = None
    """a run directory `runs/{run_name}` to continue from its checkpoint, with the run's own flags"""

    # Environment (4.3.1-4.3.2)
    env_id: str = "Breakout-v5"
    """an envpool Atari id (`envpool.list_all_envs()`; ROMs come with envpool)"""
    total_timesteps: int = 100_000
    """agent steps (of --frame-skip frames) taken by all actor threads of all processes (Atari 100k: 100k)"""
    sticky_action_prob: float = 0.0
    """probability that the emulator repeats the previous action (Atari 100k's references, MuZero: 0; Machado et al.: 0.25)"""
    frame_skip: int = 4
    """emulator frames per agent step, the max of the last two observed (MuZero: 4)"""
    noop_max: int = 30
    """up to this many no-op actions at the start of each game (MuZero: 30)"""
    resolution: int = 96
    """observations are resized to resolution x resolution (MuZero: 96)"""
    gray_scale: bool = True
    """grey observations, 1 channel (MuZero: colour, 3 channels; `--no-gray-scale`)"""
    episodic_life: bool = True
    """a lost life ends an episode for the targets while the game goes on (MuZero: off); evaluation plays whole games"""
    fire_steps: int = 2
    """in games with FIRE, the first this many agent steps of every life allow only FIRE, to serve (0: off)"""
    num_envs: int = 16
    """copies of the environment per actor thread, stepped as one batch"""
    num_steps: int = 32
    """steps per environment per actor iteration; also the length of one replay segment"""
    max_episode_steps: int = 27_000
    """games are cut after this many agent steps (108k frames: the usual Atari cap); values bootstrap across the cut"""

    # Inputs and network (4.3.3-4.3.5, 5.1.2)
    history_length: int = 4
    """L: frames and actions stacked as the representation input (MuZero Atari: 32)"""
    channels: int = 32
    """channels of the residual towers on the down-sampled board (MuZero: 256)"""
    repr_blocks: int = 2
    """residual blocks in the representation function after down-sampling (MuZero: 16)"""
    dyn_blocks: int = 1
    """residual blocks in the dynamics function (MuZero: 16)"""
    pred_blocks: int = 1
    """residual blocks in the prediction function (MuZero: 16)"""
    head_hidden: int = 64
    """hidden width of the value, reward and policy heads (thesis: 128)"""
    support_size: int = 300
    """value and reward are categorical over [-support_size, support_size] after phi: |x| up to 58,700 (MuZero: 300)"""

    # Planner (4.3.6, Table 5.1)
    planner: Literal["muzero", "gumbel"] = "muzero"
    """`muzero`: mctx.muzero_policy (PUCT with Dirichlet noise, the thesis'); `gumbel`: mctx.gumbel_muzero_policy"""
    num_simulations: int = 8
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
    q_min_range: float = 0.01
    """least range the Q-values of a node are min-max normalised by (muzero planner; mctx: 1e-8; EfficientZero: 0.01)"""
    gumbel_scale: float = 1.0
    """scale of the Gumbel noise in training (gumbel planner)"""
    eval_gumbel_scale: float = 0.0
    """scale of the Gumbel noise in evaluation (gumbel planner; 0: greedy, as mctx advises for perfect-information games)"""
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
    buffer_size: int = 50_000
    """replay capacity in agent steps over all actor threads (50k grey 96 x 96 steps, with segment overlap: ~0.73 GB)"""
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


def global_threads(args: Args) -> int:
    return args.num_actor_threads * args.num_processes


def flag_rules(args: Args) -> list:
    """What each flag must be, (flags, test, what): validate_args refuses a run by it and muzero_tools.load_model a saved
    model's flags (muzero_run.check_rules adds that every float is finite)."""
    return [
        (
            "total_timesteps num_envs num_steps history_length channels repr_blocks head_hidden support_size "
            "num_simulations eval_num_simulations max_num_considered_actions unroll_steps td_steps buffer_size "
            "batch_size target_update_interval eval_interval num_actor_threads num_processes learning_rate "
            "replay_ratio max_grad_norm temperature eval_temperature dirichlet_alpha eval_dirichlet_alpha log_interval "
            "pb_c_base priority_epsilon q_min_range distributed_timeout",
            lambda v: v > 0,
            "positive",
        ),
        ("frame_skip resolution", lambda v: v > 0, "positive"),
        ("noop_max fire_steps", lambda v: v >= 0, "non-negative"),
        (
            "dyn_blocks pred_blocks eval_episodes learning_starts checkpoint_interval pb_c_init eval_pb_c_init "
            "gumbel_scale eval_gumbel_scale priority_exponent value_coef reward_coef consistency_coef l2_coef",
            lambda v: v >= 0,
            "non-negative",
        ),
        ("resolution", lambda v: v % 16 == 0, "a multiple of 16: down-sampling divides it by 16"),
        (
            "env_id",
            lambda v: v in envpool.list_all_envs() and "AtariEnvSpec" in str(type(envpool.make_spec(v))),
            "one of envpool's Atari games (e.g. Breakout-v5, Pong-v5)",
        ),
        ("sticky_action_prob dirichlet_fraction importance_exponent", lambda v: 0 <= v <= 1, "in [0, 1]"),
        ("gamma", lambda v: 0 < v <= 1, "in (0, 1]"),
        ("seed", lambda v: 0 <= v < 2**32, "in [0, 2**32 - 1], as JAX's 32-bit keys"),
        ("max_episode_steps", lambda v: v > 0, "positive"),
        ("process_id", lambda v: 0 <= v < args.num_processes, "in [0, --num-processes)"),
        ("unroll_steps td_steps noop_max", lambda v: v < args.max_episode_steps, "below --max-episode-steps"),
    ]


def validate_args(args: Args):
    """What tyro cannot check, each refused with muzero_run.fail()."""
    muzero_run.check_rules(args, flag_rules(args))
    steps = args.num_envs * args.num_steps * global_threads(args)
    iteration = f"one actor iteration, --num-envs x --num-steps x --num-actor-threads x --num-processes = {steps}"
    if args.total_timesteps < steps or args.buffer_size < steps:
        muzero_run.fail(
            f"--total-timesteps ({args.total_timesteps}) and --buffer-size ({args.buffer_size}) must hold {iteration}"
        )
    if args.batch_size % global_threads(args) or args.batch_size > args.buffer_size:
        muzero_run.fail(
            f"--batch-size ({args.batch_size}) must split evenly over the {global_threads(args)} actor threads' replays "
            f"(--num-actor-threads x --num-processes) and fit in --buffer-size ({args.buffer_size})"
        )
    muzero_run.check_run_flags(args)


# ---------------------------------------------------------------------------------------------
# Environment (4.3.1-4.3.3). Agent actions are env actions + 1: index 0 is the dummy action, taken
# before the first step and at (and after) the last step of an episode.
# ---------------------------------------------------------------------------------------------
class Step(NamedTuple):
    obs: np.ndarray  # (B, H, W, C) uint8 pixels
    reward: np.ndarray  # (B,) reward that arrived with this observation
    is_first: np.ndarray  # (B,) bool
    is_last: np.ndarray  # (B,) bool; the policy still runs here, its action is the dummy one
    game_over: np.ndarray  # (B,) bool: is_last and the game ended (not only a life, with --episodic-life)
    truncated: np.ndarray  # (B,) bool: is_last because the game was cut at --max-episode-steps (not a terminal state)


def fire_action(env_id: str) -> int | None:
    """FIRE's agent action in the game's action set (the emulator's minimal one, read from envpool's ROM), or None."""
    config = envpool.make_spec(env_id).config
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    ale = ale_py.ALEInterface()
    ale.loadROM(os.path.join(config.base_path, "atari", "roms", f"{config.task}.bin"))
    action_set = list(ale.getMinimalActionSet())
    return action_set.index(ale_py.Action.FIRE) + 1 if ale_py.Action.FIRE in action_set else None


def env_seeds(seed: int | tuple[int, ...], num_envs: int) -> np.ndarray:
    """One 32-bit seed per environment copy, hashed from `seed` (an int or a tuple of ints) by numpy's
    SeedSequence: runs with different seeds share no environment stream, nor do training and each evaluation
    (seeded `(seed, 1, iteration)`)."""
    return np.random.SeedSequence(seed).generate_state(num_envs)


class AtariVecEnv:
    """`num_envs` Atari games of envpool stepped as one batch. envpool resets a game at the step after
    its last (the thesis' unified main loop: that step's action is ignored, its reward is 0), so the
    stream never stops. With `episodic_life` a lost life is an episode's last step and the game goes on
    after it (envpool's reset then only continues it). A game cut at --max-episode-steps is `truncated`."""

    def __init__(self, args: Args, num_envs: int, seed, episodic_life: bool):
        self.envs = envpool.make(
            args.env_id,
            env_type="gymnasium",
            num_envs=num_envs,
            seed=(env_seeds(seed, num_envs) % 2**31).tolist(),
            episodic_life=episodic_life,
            repeat_action_probability=args.sticky_action_prob,
            frame_skip=args.frame_skip,
            noop_max=args.noop_max,
            img_height=args.resolution,
            img_width=args.resolution,
            gray_scale=args.gray_scale,
            stack_num=1,
            reward_clip=False,
            max_episode_steps=args.max_episode_steps,
        )
        self.obs_shape, self.num_actions = env_shapes(args)
        self.fire = fire_action(args.env_id)
        self.fire_steps = args.fire_steps if self.fire else 0
        self.last = self.truncated = None
        self.lives = np.zeros(num_envs, np.int64)
        self.to_fire = np.zeros(num_envs, np.int64)  # steps left in which only FIRE is legal

    def step(self, actions: np.ndarray) -> Step:
        n = len(actions)
        if self.last is None:  # the first call starts every game
            obs, info = self.envs.reset()
            reward, (last, game_over, truncated) = np.zeros(n, np.float32), np.zeros((3, n), bool)
            new_life = np.ones(n, bool)
        else:
            obs, reward, terminated, truncated, info = self.envs.step(np.maximum(actions - 1, 0))
            last = terminated | truncated
            game_over = last & ((info["terminated"] == 1) | truncated | (info["lives"] == 0))
            self.to_fire = np.where(self.last, self.to_fire, np.maximum(self.to_fire - 1, 0))  # a real step was taken
            new_life = (info["lives"] < self.lives) | game_over
        self.lives = info["lives"].copy()
        self.to_fire = np.where(new_life, self.fire_steps, self.to_fire)
        first = np.ones(n, bool) if self.last is None else self.last
        self.last, self.truncated = last, truncated
        obs = np.moveaxis(obs, 1, -1)  # envpool's (C, H, W) -> (H, W, C)
        return Step(obs, reward.astype(np.float32), first, last.copy(), game_over, truncated)

    def legal_actions(self, is_last: np.ndarray) -> np.ndarray:
        """Mask over agent actions: env actions before the end and at a cut game's last step (its search's value is the
        one the returns bootstrap from), only the dummy action at a real end, only FIRE in a life's first --fire-steps."""
        serve = ~is_last & (self.to_fire > 0)
        is_last = is_last & ~self.truncated  # a cut game's last step is searched like any other
        legal = np.ones((len(is_last), self.num_actions), bool)
        legal[:, 0] = is_last
        legal[:, 1:] = ~is_last[:, None]
        legal[serve, 1:] = False
        legal[serve, self.fire] = True
        return legal


def env_shapes(args: Args) -> tuple[tuple, int]:
    """The shape (H, W, C) of an observation of --env-id and the number of agent actions |A^a| = |A^e| + dummy, read
    without starting a game (before check_memory: envpool allocates its frames at --resolution)."""
    num_actions = envpool.make_spec(args.env_id).action_space.n + 1
    return (args.resolution, args.resolution, 1 if args.gray_scale else 3), num_actions


class EpisodeTracker:
    """Running return and length (env actions taken) of each copy; hands back finished episodes."""

    def __init__(self, num_envs: int):
        self.returns = np.zeros(num_envs)
        self.lengths = np.zeros(num_envs, np.int64)

    def update(self, step: Step):
        self.returns += step.reward
        self.lengths += ~step.is_last
        done = np.flatnonzero(step.game_over)  # whole games, over all their lives
        finished = (done, self.returns[done].copy(), self.lengths[done].copy())
        self.returns[done] = 0.0
        self.lengths[done] = 0
        return finished


# ---------------------------------------------------------------------------------------------
# Inputs (4.3.4) and the scalar <-> categorical transform (2.8.6, 4.3.5)
# ---------------------------------------------------------------------------------------------
def stack_history(frames, actions):
    """frames (B, L, H, W, C) = o_{t-L+1..t} in pixel values 0-255, actions (B, L) = a_{t-L..t-1}
    -> the input of the representation function: the frames as planes (B, H, W, L*C) scaled to [0, 1] and the
    actions (B, L), which its first convolution reads as L one-hot planes of |A^a| after the frame planes (ActionConv)."""
    b, L, h, w, c = frames.shape
    return jnp.moveaxis(frames / 255.0, 1, 3).reshape(b, h, w, L * c), actions


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


class ActionConv(nn.Module):
    """A convolution (SAME padding) over [planes, one-hot action planes, undivided, tiled over the board] (4.3.4),
    computed without tiling them (on 96 x 96 pixels they would be most of the network's work): a plane of ones adds
    to an output square its kernel summed over the window's squares inside the board, the same for every sample.
    Same parameters (kernel (k, k, C + L|A^a|, F), bias) and initialisation as nn.Conv over the concatenated planes."""

    features: int
    num_actions: int
    kernel_size: int
    stride: int

    @nn.compact
    def __call__(self, planes, actions):
        """planes (B, H, W, C), actions (B, L) -> (B, H/stride, W/stride, features)."""
        d, L, k = planes.shape[-1], actions.shape[-1], self.kernel_size
        kernel = self.param("kernel", nn.initializers.lecun_normal(), (k, k, d + L * self.num_actions, self.features))
        bias = self.param("bias", nn.initializers.zeros_init(), (self.features,))

        def conv(x, w):  # as nn.Conv's
            return jax.lax.conv_general_dilated(x, w, (self.stride,) * 2, "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

        board_of_ones = jnp.ones((1, *planes.shape[1:3], 1))
        share = conv(board_of_ones, kernel[:, :, d:].reshape(k, k, 1, -1))[0]  # (H', W', L|A^a| * F)
        share = share.reshape(*share.shape[:2], L * self.num_actions, self.features)
        one_hot = jax.nn.one_hot(actions, self.num_actions).reshape(-1, L * self.num_actions)
        return conv(planes, kernel[:, :, :d]) + jnp.einsum("bk,hwkf->bhwf", one_hot, share) + bias


class Downsample(nn.Module):
    """The representation's front, 96 x 96 pixels to a 6 x 6 board: the Nature DQN's three convolutions (8x8 stride 4
    to 32 channels, 4x4 stride 2 to 64, 3x3 stride 2 to `channels`), each followed by a ReLU; the first reads the frame
    planes and the actions (ActionConv). MuZero's appendix uses stride-2 3x3 convolutions, residual blocks and average
    pools instead (the docs page says why we do not)."""

    channels: int
    num_actions: int

    @nn.compact
    def __call__(self, planes, actions):
        x = nn.relu(ActionConv(32, self.num_actions, 8, 4, name="Conv_0")(planes, actions))  # nn.Conv's names: models load
        x = nn.relu(nn.Conv(64, (4, 4), strides=2, name="Conv_1")(x))
        return nn.relu(nn.Conv(self.channels, (3, 3), strides=2, name="Conv_2")(x))


def scale_hidden(x):
    lo = x.min(axis=(1, 2, 3), keepdims=True)
    hi = x.max(axis=(1, 2, 3), keepdims=True)
    return (x - lo) / (hi - lo + 1e-5)


class ActionStem(nn.Module):
    """A 1x1 convolution over [planes, one-hot action planes, undivided, tiled over the board] (4.3.4), computed
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
        one_hot = jax.nn.one_hot(actions, self.num_actions).reshape(-1, L * self.num_actions)
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
        self.repr_stem = Downsample(self.channels, self.num_actions)
        self.repr_tower = [ResidualBlock(self.channels) for _ in range(self.repr_blocks)]
        self.dyn_stem = ActionStem(self.channels, self.num_actions)
        self.dyn_tower = [ResidualBlock(self.channels) for _ in range(self.dyn_blocks)]
        self.reward_head = Head(self.head_hidden, z)
        self.pred_tower = [ResidualBlock(self.channels) for _ in range(self.pred_blocks)]
        self.value_head = Head(self.head_hidden, z)
        self.policy_head = Head(self.head_hidden, self.num_actions)
        self.projection = ResidualBlock(self.channels)

    def represent(self, stacked):
        """h: stacked history (frame planes, actions) of stack_history -> hidden state (B, H/16, W/16, channels)."""
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
def planner_configs(args: Args) -> tuple[partial, partial]:
    """The mctx policy with its options, in training and in evaluation (Table 5.1)."""
    if args.planner == "gumbel":
        policy = mctx.gumbel_muzero_policy
        qtransform = partial(mctx.qtransform_completed_by_mix_value, rescale_values=args.gumbel_rescale_q)
        shared = dict(max_num_considered_actions=args.max_num_considered_actions, qtransform=qtransform)
        train_options = dict(gumbel_scale=args.gumbel_scale)
        test_options = dict(gumbel_scale=args.eval_gumbel_scale)
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
    return train, test


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
    def act(params, actor_state: ActorState, obs, is_first, legal, rng):
        keep = ~is_first
        frames = actor_state.frames * keep[:, None, None, None, None]
        actions = actor_state.actions * keep[:, None]  # zero frames and dummy actions before the first step
        frames = jnp.concatenate([frames[:, 1:], obs[:, None].astype(jnp.float32)], axis=1)
        x = net.apply(params, stack_history(frames, actions), method=MuZeroNet.represent)
        prior_logits, value_logits = net.apply(params, x, method=MuZeroNet.predict)
        root = mctx.RootFnOutput(
            prior_logits=prior_logits, value=categorical_to_scalar(jax.nn.softmax(value_logits), support_size), embedding=x
        )
        out = search(params, rng, root, recurrent_fn, invalid_actions=~legal)  # legal (B, |A^a|): at the root only
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


def value_targets(window: dict, c: int, unroll_steps: int, td_steps: int, gamma: float):
    """The value side of position c's targets: the mask of c's episode in the window (False after its last step), its
    rewards (0 elsewhere), v* (0 at and after its last step) and the returns G^N_c .. G^N_{c+K}. Reads only the
    window's PRIORITY_FIELDS."""
    K, N = unroll_steps, td_steps
    episode = jnp.cumsum(window["is_first"])
    same = episode == episode[c]  # steps of c's episode; everything after its last step is False
    rewards = jnp.where(same, window["reward"], 0.0)
    alive = same & (~window["is_last"] | window["truncated"])  # v* = 0 at and after the end; a cut game keeps its v*
    values = jnp.where(alive, window["value"], 0.0)
    end = jnp.max(jnp.where(same, jnp.arange(len(values)), 0))  # the episode's last step in the window
    positions = jnp.arange(c, c + K + 1)
    n = jnp.minimum(N, end - positions)  # steps to the bootstrap, N or fewer: a cut game's is its cut
    bootstrap_values = jnp.where(n >= 0, gamma ** (n - N) * values[positions + n], 0.0)
    discount = gamma  # per step
    discounts = discount ** jnp.arange(N)
    # G^N_j = sum_{n<N} gamma^n r_{j+n+1} + gamma^n_j v_{j+n_j} (0 after the end), for j = c .. c+K
    returns = jnp.stack(
        [jnp.sum(discounts * rewards[j + 1 : j + N + 1]) + discount**N * bootstrap_values[j - c] for j in range(c, c + K + 1)]
    )
    return same, rewards, values, returns


def compute_targets(window: dict, history_length: int, unroll_steps: int, td_steps: int, gamma: float) -> Targets:
    """window: one environment's steps c-L .. c+K+N (the fields of empty_segments, no batch axis)."""
    L, K, N = history_length, unroll_steps, td_steps
    c = L
    num_actions = window["policy"].shape[-1]
    same, rewards, values, returns = value_targets(window, c, K, N, gamma)
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
        "truncated": np.zeros((num_envs, span), bool),
        "action": np.zeros((num_envs, span), np.int32),
        "value": np.zeros((num_envs, span), np.float32),
        "policy": np.zeros((num_envs, span, num_actions), np.float32),
        "valid": np.zeros((num_envs, span), bool),
    }


def gather_windows(segments: dict, seg: np.ndarray, pos: np.ndarray, window_length: int) -> dict:
    """Windows of steps pos .. pos+window_length-1 of segments seg, i.e. c-L .. c+K+N for c = pos+L."""
    idx = pos[:, None] + np.arange(window_length)[None]
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
        self.window_length = self.L + args.unroll_steps + args.td_steps + 1  # steps c-L .. c+K+N of a position c
        self.storage = empty_segments(capacity, self.window_length - 1 + self.S, obs_shape, num_actions)
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
            self.priorities[self.next] = priorities[i]
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

    def sample(self, batch_size: int):
        """A batch of windows (the fields of empty_segments, (B, L+K+N+1, ...)) and their importance weights (B,)."""
        args = self.args
        if self.probs is None:
            valid = self.trainable().ravel()
            self.probs = sampling_probabilities(
                self.priorities.ravel(), valid, args.sampling, args.priority_exponent, args.priority_epsilon
            )
            self.num_valid = int(valid.sum())
        flat = self.rng.choice(self.probs.size, size=batch_size, p=self.probs)
        segment, position = np.divmod(flat, self.S)
        batch = gather_windows(self.storage, segment, position, self.window_length)
        return batch, importance_weights(self.probs[flat], self.num_valid, args.importance_exponent).astype(np.float32)


def batched_targets(args: Args):
    """compute_targets over a batch of windows: (B, L+K+N+1, ...) -> Targets with a leading B axis."""
    kw = dict(history_length=args.history_length, unroll_steps=args.unroll_steps, td_steps=args.td_steps)
    return jax.vmap(partial(compute_targets, **kw, gamma=args.gamma))


PRIORITY_FIELDS = ("reward", "value", "is_first", "is_last", "truncated")  # all that value_targets reads


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
    priority_data = {k: segments[k] for k in PRIORITY_FIELDS}
    windows = gather_windows(priority_data, *np.divmod(np.arange(n * S), S), replay.window_length)  # (segment, position) pairs
    replay.add(segments, np.asarray(priority_fn(windows)).reshape(n, S))


def sample_batch(replays: list, batch_size: int):
    """This process's share of a batch: an equal part from each actor thread's replay, in thread order."""
    shares = [replay.sample(batch_size // len(replays)) for replay in replays]
    return {k: np.concatenate([b[k] for b, _ in shares]) for k in shares[0][0]}, np.concatenate([w for _, w in shares])


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
    process's share of the batch, (B/P, ...)."""
    K = args.unroll_steps
    support_size = args.support_size
    targets_fn = batched_targets(args)

    def scalar(logits):
        return categorical_to_scalar(jax.nn.softmax(logits), support_size)

    def categorical(x):
        return scalar_to_categorical(x, support_size)

    def loss_fn(params, target_params, window, weights):
        t = targets_fn(window)
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
        return loss, {
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

    devices = [jax.local_devices(process_index=p)[i] for p in range(args.num_processes) for i in args.learner_device_ids]

    @partial(jax.pmap, axis_name="batch", devices=devices)  # the learner devices of every process, process by process
    def update(train_state: TrainState, window, weights):
        grads, metrics = jax.grad(loss_fn, has_aux=True)(train_state.params, train_state.target_params, window, weights)
        grads, metrics = jax.lax.pmean((grads, metrics), "batch")  # the whole batch's mean
        metrics["losses/grad_norm"] = optax.tree.norm(grads)
        updates, opt_state = optimizer.update(grads, train_state.opt_state, train_state.params)
        params = optax.apply_updates(train_state.params, updates)
        step = train_state.step + 1
        target_params = optax.periodic_update(params, train_state.target_params, step, args.target_update_interval)
        return TrainState(params, target_params, opt_state, step), metrics

    def split_update(train_state: TrainState, window: dict, weights: np.ndarray):
        n = len(args.learner_device_ids)
        return update(train_state, *jax.tree.map(lambda x: x.reshape(n, -1, *x.shape[1:]), (window, weights)))

    return split_update


def replicate(tree, args: Args):
    """A copy of `tree` for each of this process's learner devices (the pmapped update's state)."""
    return jax.tree.map(lambda x: np.stack([np.asarray(x)] * len(args.learner_device_ids)), tree)


def unreplicate(tree):
    """The first learner device's copy (all are equal), on the host."""
    return jax.tree.map(lambda x: np.asarray(x[0]), tree)


# ---------------------------------------------------------------------------------------------
# Actor threads (Cleanba): actor iteration k acts with the parameters of the learner's iteration k-2
# ---------------------------------------------------------------------------------------------
class ActorSnapshot(NamedTuple):
    """An actor thread's whole state after an iteration, kept in checkpoints."""

    actions_given: list  # to AtariVecEnv.step since its first call: replayed, they restore the games
    segments: dict  # the fields of empty_segments, (num_envs, L + S + K + N, ...)
    actor_state: ActorState  # on the host
    step: Step  # the last environment step, to act on next
    episodes: EpisodeTracker
    key: jax.Array


class Rollout(NamedTuple):
    segments: dict  # the fields of empty_segments, (num_envs, L + S + K + N, ...)
    episode_returns: list  # of the episodes that ended in this iteration
    episode_lengths: list
    scalars: dict  # charts/root_value, charts/policy_entropy (means) and the thread's stats/actor_* (seconds)
    snapshot: ActorSnapshot | None  # the actor's state after this iteration, when a checkpoint is due


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
    args: Args, act_fn, *, thread: int, queues: ActorQueues, pending_params: list, learner_alive, iterations, key, snapshot
):
    """Actor thread `thread` of this process, for `iterations` (a range). Iteration k acts with the parameters the
    learner put after its iteration k-2 (the initial ones for k <= 2): those in `pending_params`, then those of the
    params queue. `snapshot` (an ActorSnapshot from a checkpoint) restores environments, history, segments and key."""
    device = jax.local_devices()[args.actor_device_ids[thread % len(args.actor_device_ids)]]
    global_thread = args.process_id * args.num_actor_threads + thread  # the thread's index among all processes' threads
    num_envs = args.num_envs
    S = args.num_steps
    span = args.history_length + S + args.unroll_steps + args.td_steps
    try:
        with jax.default_device(device):  # environment inputs go straight to the actor's device
            envs = AtariVecEnv(args, num_envs, (args.seed, global_thread), args.episodic_life)
            if snapshot is None:
                actions_given = []  # to envs.step, after its first call (which starts the games)
                segments = empty_segments(num_envs, span, envs.obs_shape, envs.num_actions)
                actor_state = initial_actor_state(num_envs, args.history_length, envs.obs_shape)
                step = envs.step(np.zeros(num_envs, np.int32))
                episodes = EpisodeTracker(num_envs)
            else:
                actions_given, segments, actor_state, step, episodes, key = snapshot
                for action in [np.zeros(num_envs, np.int32), *actions_given]:  # envpool cannot save an emulator: the
                    envs.step(action)  # games are replayed from their seeds with every action played since
                actor_state = jax.tree.map(jnp.asarray, actor_state)
            put_wait = 0.0
            for iteration in iterations:
                start = time.time()
                params = pending_params.pop(0) if pending_params else muzero_run.wait_on(queues.params.get, learner_alive)
                params = jax.device_put(params, device)
                params_wait = time.time() - start
                segments = {k: np.roll(v, -S, axis=1) for k, v in segments.items()}
                returns, lengths, root_values, entropies = [], [], [], []
                for t in range(span - S, span):
                    if not learner_alive():  # the learner has stopped: end within a step
                        raise muzero_run.Stopped
                    key, sub = jax.random.split(key)
                    actor_state, action, root_value, policy, _ = act_fn(
                        params, actor_state, step.obs, step.is_first, envs.legal_actions(step.is_last), sub
                    )
                    action = np.asarray(action)
                    root_value = np.asarray(root_value)
                    policy = np.asarray(policy)
                    played = dict(obs=step.obs, reward=step.reward, is_first=step.is_first, is_last=step.is_last)
                    played.update(action=action, value=root_value, policy=policy, valid=True)
                    played["truncated"] = step.truncated
                    for k, v in played.items():  # the fields of empty_segments that acting fills, by name
                        segments[k][:, t] = v
                    _, finished_returns, finished_lengths = episodes.update(step)
                    returns += finished_returns.tolist()
                    lengths += finished_lengths.tolist()
                    root_values.append(root_value.mean())
                    entropies.append(-np.sum(policy * np.log(policy + 1e-12), -1).mean())
                    step = envs.step(action)
                    actions_given.append(action)
                scalars = {
                    "charts/root_value": float(np.mean(root_values)),
                    "charts/policy_entropy": float(np.mean(entropies)),
                    "stats/actor_params_queue_wait": params_wait,
                    "stats/actor_rollout_queue_put_wait": put_wait,
                    "stats/actor_time": time.time() - start,
                }
                snapshot = None
                if checkpoint_due(args, iteration, iterations.stop - 1):
                    snapshot = ActorSnapshot(actions_given, segments, jax.device_get(actor_state), step, episodes, key)
                    snapshot = copy.deepcopy(snapshot)
                rollout = Rollout({k: v.copy() for k, v in segments.items()}, returns, lengths, scalars, snapshot)
                put_start = time.time()
                muzero_run.wait_on(partial(queues.rollouts.put, rollout), learner_alive)
                put_wait = time.time() - put_start  # reported with the next rollout
    except muzero_run.Stopped:  # the learner has ended; it reports its own error
        pass
    except BaseException as e:  # anything, even KeyboardInterrupt or SystemExit: hand it to the learner
        try:
            muzero_run.wait_on(partial(queues.rollouts.put, e), learner_alive)
        except muzero_run.Stopped:
            pass


def start_actors(args: Args, act_fn, acting_params: list, iterations: range, keys: list, snapshots: list, learner_done):
    """This process's actor threads (`keys`: one for each of all processes' threads), started, and their queues. Each
    thread stops waiting on its queues once the `learner_done` event is set."""

    def learner_alive():
        return not learner_done.is_set()

    queues = []
    actors = []
    for thread in range(args.num_actor_threads):
        queues.append(ActorQueues(params=queue.Queue(maxsize=1), rollouts=queue.Queue(maxsize=1)))
        given = dict(thread=thread, queues=queues[thread], pending_params=list(acting_params), learner_alive=learner_alive)
        given.update(iterations=iterations, key=keys[args.process_id * args.num_actor_threads + thread])
        actor = threading.Thread(target=actor_loop, args=(args, act_fn), kwargs=dict(given, snapshot=snapshots[thread]))
        actor.daemon = True
        actor.start()
        actors.append(actor)
    return queues, actors


def collect(queues: list, actors: list) -> list:
    """One rollout from each actor thread, in thread order (the data a run sees does not depend on which thread
    is first); an actor's error is raised here, and Interrupted once a signal has come."""
    rollouts = []
    for thread, (actor_queues, actor) in enumerate(zip(queues, actors)):
        try:
            rollouts.append(muzero_run.wait_on(actor_queues.rollouts.get, actor.is_alive, interruptible=True))
        except muzero_run.Stopped:
            raise RuntimeError(f"actor thread {thread} ended without handing over a rollout or an error")
        if isinstance(rollouts[thread], BaseException):
            raise RuntimeError(f"actor thread {thread} failed") from rollouts[thread]
    return rollouts


def hand_over(queues: list, actors: list, params):
    """Puts the parameters in every actor thread's params queue (an ended thread is skipped: collect() says why)."""
    for actor_queues, actor in zip(queues, actors):
        try:
            muzero_run.wait_on(partial(actor_queues.params.put, params), actor.is_alive)
        except muzero_run.Stopped:
            pass


# ---------------------------------------------------------------------------------------------
# Evaluation (loading a saved model and search trees: muzero_tools.py)
# ---------------------------------------------------------------------------------------------
class Recording(NamedTuple):
    """One evaluation episode step by step, as muzero_tools' annotated video shows it (thesis 4.5)."""

    frames: list  # the observation at each step
    trees: list  # the search made at that step (mctx.Tree of this game alone, root embedding only), if act_fn keeps it
    actions: list  # the action taken
    action_names: list  # a name for each agent action


def evaluate_policy(act_fn, params, args: Args, num_episodes: int, seed, record: bool = False):
    """Plays `num_episodes` episodes as one batch with `act_fn`, each cut at --max-episode-steps; `seed` (an int or a
    tuple of ints) fixes environments and search noise. Returns (returns, lengths, a Recording of episode 0 if
    `record`, with its trees if act_fn keeps them)."""
    envs = AtariVecEnv(args, num_episodes, seed, episodic_life=False)  # an episode is a whole game, all its lives
    actor_state = initial_actor_state(num_episodes, args.history_length, envs.obs_shape)
    step = envs.step(np.zeros(num_episodes, np.int32))
    episodes = EpisodeTracker(num_episodes)
    returns, lengths = np.zeros(num_episodes), np.zeros(num_episodes, np.int64)
    done = np.zeros(num_episodes, bool)
    recording = Recording([], [], [], ["(end)"] + [f"action {a}" for a in range(envs.num_actions - 1)])
    key = jax.random.PRNGKey(env_seeds(seed, num_episodes + 1)[-1])  # a stream no environment uses
    while not done.all():
        muzero_run.check_signals()
        key, sub = jax.random.split(key)
        legal = envs.legal_actions(step.is_last)
        # only the games still playing are searched (a game may play on to 27,000 steps), padded to a power of two
        playing = np.flatnonzero(~done)
        width = min(num_episodes, 1 << (len(playing) - 1).bit_length())
        games = np.resize(playing, width)  # (width,) their indices, the first repeated to fill the batch
        state = jax.tree.map(lambda x: x[games], actor_state)
        state, searched, _, _, tree = act_fn(params, state, step.obs[games], step.is_first[games], legal[games], sub)
        actor_state = jax.tree.map(lambda whole, part: whole.at[games].set(part), actor_state, state)
        action = np.zeros(num_episodes, np.int32)  # (a game that has ended plays on with action 0, unseen)
        action[games] = searched
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


def log_evaluation(run: muzero_run.Run, eval_act_fn, params, iteration: int, global_step: int) -> str:
    """Plays --eval-episodes episodes (seeded by the iteration), logs charts/eval_*, saves the first as a
    GIF with --capture-video; returns the result for the console."""
    args = run.args
    params = jax.device_put(params, jax.local_devices()[args.actor_device_ids[0]])  # on the first of --actor-device-ids
    seed = (args.seed, 1, iteration)
    returns, lengths, recording = evaluate_policy(eval_act_fn, params, args, args.eval_episodes, seed, args.capture_video)
    run.writer.add_scalar("charts/eval_episodic_return", float(np.mean(returns)), global_step)
    run.writer.add_scalar("charts/eval_episodic_length", float(np.mean(lengths)), global_step)
    run.writer.add_scalar("charts/eval_standard_error", float(np.std(returns) / np.sqrt(len(returns))), global_step)
    if args.capture_video:
        muzero_run.save_gif(recording.frames, f"videos/{os.path.basename(run.dir)}/eval_{global_step}.gif")
    return f"eval_return={np.mean(returns):.2f}"


# ---------------------------------------------------------------------------------------------
# Learner (main thread)
# ---------------------------------------------------------------------------------------------
@dataclass
class Progress:
    """The learner's counters, kept in checkpoints."""

    next_eval: int
    iteration: int = 0
    sample_credit: float = 0.0  # samples owed to the learner by the steps played so far
    num_updates: int = 0
    eval_summary: str = "(no evaluation yet)"  # the last evaluation, for the console
    train_returns: list = field(default_factory=list)  # the last 20 training episodes' returns
    metrics: dict = field(default_factory=dict)  # the last update's losses/*
    wandb_id: str | None = None  # the W&B run, which a resumed run with --track continues


CHECKPOINT_PARTS = ("progress", "train_state", "replays", "acting_params", "actor")  # beside "args"


def new_learner(args: Args, params, optimizer, obs_shape, num_actions: int) -> dict:
    """The CHECKPOINT_PARTS of a new run: the learner's counters and state, a replay for each of this process's actor
    threads (seeded by the thread's index among all processes'), the actors' parameters for their first two
    iterations, and no actor snapshot (the actors start their environments)."""
    threads = range(args.process_id * args.num_actor_threads, (args.process_id + 1) * args.num_actor_threads)
    capacity = args.buffer_size // global_threads(args) // args.num_steps  # segments per replay
    return dict(
        progress=Progress(args.eval_interval),
        train_state=TrainState(params, params, optimizer.init(params), jnp.zeros((), jnp.int32)),
        replays=[Replay(args, capacity, obs_shape, num_actions, (args.seed, thread)) for thread in threads],
        acting_params=[params, params],
        actor=[None] * args.num_actor_threads,
    )


def checkpoint_payload(run: muzero_run.Run, progress: Progress, train_state, replays: list, acting_params, rollouts: list):
    """Everything the run needs to continue exactly as if it had not stopped (muzero_run.save_checkpoint writes it):
    its flags and CHECKPOINT_PARTS, on the host; the actor threads' snapshots came with this iteration's rollouts."""
    wandb_id = run.wandb.id if run.wandb else progress.wandb_id  # the W&B run a resumed run continues
    return dict(
        args=asdict(run.args),
        progress=replace(progress, metrics=jax.device_get(progress.metrics), wandb_id=wandb_id),
        train_state=unreplicate(train_state),
        replays=replays,
        acting_params=jax.device_get(acting_params),
        actor=[rollout.snapshot for rollout in rollouts],
    )


def evaluation_due(args: Args, progress: Progress, global_step: int, last: bool) -> bool:
    """On process 0, once --eval-interval more steps are played since the last evaluation, and at the run's end."""
    return args.process_id == 0 and args.eval_episodes > 0 and (global_step >= progress.next_eval or last)


def check_memory(args: Args, net, obs_shape, num_actions: int):
    """Refuses sizes whose arrays cannot fit in this machine's memory, before anything is compiled or written or an
    environment is built: each entry of `needs` is the bytes of what the flags it names size, in this process."""
    params = jax.eval_shape(partial(init_params, net, args), jax.random.PRNGKey(0))
    step_bytes = sum(v.itemsize * math.prod(v.shape[2:]) for v in empty_segments(0, 1, obs_shape, num_actions).values())
    span = args.history_length + args.num_steps + args.unroll_steps + args.td_steps
    node_bytes = (args.resolution // 16) ** 2 * args.channels * 4 + (6 * num_actions + 5) * 4  # mctx.Tree per node
    # a sample's arrays in the update: about 6 hidden states a block (and heads, projection) at each of K+2 inferences
    activations = 12 * (args.unroll_steps + 2) * (args.repr_blocks + args.dyn_blocks + args.pred_blocks + 2) * node_bytes
    needs = {  # bytes in this process, by the flags that set them
        "--buffer-size": args.buffer_size // args.num_processes // args.num_steps * span * step_bytes,
        "--channels/--head-hidden/--support-size": 6 * sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(params)),
        "--num-envs/--num-simulations": args.num_envs * args.num_actor_threads * (args.num_simulations + 1) * node_bytes,
        "--eval-episodes/--eval-num-simulations": args.eval_episodes * (args.eval_num_simulations + 1) * node_bytes,
        "--batch-size/--unroll-steps": args.batch_size * (span * step_bytes + activations),  # windows, the update's arrays
        "--resolution/--num-envs": 2 * (args.num_envs * args.num_actor_threads + args.eval_episodes) * np.prod(obs_shape),
    }
    muzero_run.check_memory(needs)


class IterationTimes(NamedTuple):
    """When (time.time()) the parts of the learner's iteration began and ended, for log_iteration's stats/."""

    run_start: float  # when the run started or resumed
    run_start_step: int  # the environment step it started or resumed at
    collect_start: float  # the learner starts waiting for the actors' rollouts
    collected: float  # it has them; it stores them and trains
    hand_over_start: float  # it has trained, and puts the parameters in the actors' queues
    handed_over: float  # done (the evaluation and logging come after)


def log_iteration(
    run: muzero_run.Run, progress: Progress, rollouts: list, replays: list, global_step: int, times: IterationTimes, console
):
    """The iteration's charts/, losses/ and stats/ (the docs page lists them) and, if `console`, a progress line."""
    muzero_run.end_iteration(run, progress.num_updates)
    sps = int((global_step - times.run_start_step) / (time.time() - times.run_start))
    waits = {
        "learner_rollout_queue_wait": times.collected - times.collect_start,
        "learner_params_queue_put_wait": times.handed_over - times.hand_over_start,
        "learner_time": times.handed_over - times.collected,
    }
    for rollout in rollouts:
        for episode_return, length in zip(rollout.episode_returns, rollout.episode_lengths):
            run.writer.add_scalar("charts/episodic_return", episode_return, global_step)
            run.writer.add_scalar("charts/episodic_length", length, global_step)
    scalars = {k: float(v[0]) for k, v in progress.metrics.items()}  # pmean'd: the same on every learner device
    scalars.update({f"stats/{k}": v for k, v in waits.items()})
    scalars.update({"charts/SPS": sps, "charts/num_updates": progress.num_updates})
    scalars["stats/replay_size"] = sum(replay.num_trainable for replay in replays)
    for k in rollouts[0].scalars:  # charts/ the mean over the actor threads, stats/ each thread's (thread 0 unsuffixed)
        if k.startswith("charts/"):
            scalars[k] = np.mean([rollout.scalars[k] for rollout in rollouts])
        else:
            scalars.update({k + (f"_thread{t}" if t else ""): rollout.scalars[k] for t, rollout in enumerate(rollouts)})
    for k, v in scalars.items():
        run.writer.add_scalar(k, v, global_step)
    if console:
        mean_return = np.mean(progress.train_returns) if progress.train_returns else float("nan")
        print(
            f"step={global_step} SPS={sps} updates={progress.num_updates} train_return="
            f"{mean_return:.2f} {progress.eval_summary} loss={scalars.get('losses/total_loss', np.nan):.3f} waits: "
            f"learner={waits['learner_rollout_queue_wait']:.2f}s actor={scalars['stats/actor_params_queue_wait']:.2f}s",
            flush=True,
        )


def main(args: Args):
    # 1. the flags, the hosts, the checkpoint to resume from and the run's directory
    validate_args(args)
    muzero_run.join_processes(args)  # before anything touches a device
    muzero_run.check_devices(args)
    checkpoint = muzero_run.read_checkpoint(SCRIPT, args) if args.resume else None
    obs_shape, num_actions = env_shapes(args)
    net = make_network(args, num_actions)
    check_memory(args, net, obs_shape, num_actions)
    num_threads = global_threads(args)  # the actor threads of all processes
    steps_per_iteration = args.num_envs * args.num_steps * num_threads
    num_iterations = args.total_timesteps // steps_per_iteration
    run = muzero_run.open_run(SCRIPT, args, checkpoint, steps_per_iteration, num_iterations)
    _, net_key, *actor_keys = jax.random.split(jax.random.PRNGKey(args.seed), 2 + num_threads)

    # 2. the agent: network, planners, update
    params = init_params(net, args, net_key)  # the same in every process: one seed
    optimizer = make_optimizer(args)
    train_planner, test_planner = planner_configs(args)
    act_fn = make_act_fn(net, train_planner, args.gamma)
    eval_act_fn = make_act_fn(net, test_planner, args.gamma)
    update_fn = make_update_fn(net, args, optimizer)
    priority_fn = make_priority_fn(args)

    # 3. the learner's state, the replays and the actors' parameters and state, new or resumed; the actor threads start
    learner = checkpoint or new_learner(args, params, optimizer, obs_shape, num_actions)  # (a resumed run builds no replay)
    progress, train_state, replays, acting_params, snapshots = (learner[part] for part in CHECKPOINT_PARTS)
    train_state = replicate(train_state, args)
    learner_done = threading.Event()  # set when main returns or raises: the actors then stop waiting
    iterations = range(progress.iteration + 1, num_iterations + 1)
    queues, actors = start_actors(args, act_fn, acting_params, iterations, actor_keys, snapshots, learner_done)

    # 4. the learner's loop
    run_start = last_log = time.time()
    run_start_step = progress.iteration * steps_per_iteration
    try:
        for iteration in iterations:
            global_step = iteration * steps_per_iteration
            # 4.1 collect: a rollout from every actor thread, into its replay
            collect_start = time.time()
            rollouts = collect(queues, actors)
            collected = time.time()
            for replay, rollout in zip(replays, rollouts):
                add_with_priorities(replay, rollout.segments, priority_fn)
                progress.train_returns = (progress.train_returns + rollout.episode_returns)[-20:]
            # 4.2 train: --replay-ratio samples per step played (the replays fill alike in every process: all update together)
            if replays[0].num_trainable * num_threads >= args.learning_starts:
                progress.sample_credit += args.replay_ratio * steps_per_iteration
                while progress.sample_credit >= args.batch_size:
                    muzero_run.check_signals()
                    progress.sample_credit -= args.batch_size
                    batch, weights = sample_batch(replays, args.batch_size // args.num_processes)
                    train_state, progress.metrics = update_fn(train_state, batch, weights)
                    progress.num_updates += 1
            jax.block_until_ready(train_state)  # so that the timings below measure the work, not its dispatch
            # 4.3 hand the parameters to the actors: their iteration + 2 acts with them
            hand_over_start = time.time()
            params = unreplicate(train_state.params)
            if iteration <= num_iterations - 2:
                hand_over(queues, actors, params)
            acting_params = [acting_params[1], params]
            times = IterationTimes(run_start, run_start_step, collect_start, collected, hand_over_start, time.time())
            # 4.4 evaluate (process 0), 4.5 log, 4.6 checkpoint (the actors sent their state with this rollout)
            progress.iteration = iteration
            if evaluation_due(args, progress, global_step, last=iteration == num_iterations):
                progress.next_eval += args.eval_interval
                progress.eval_summary = log_evaluation(run, eval_act_fn, params, iteration, global_step)
            console = time.time() - last_log >= args.log_interval or iteration == num_iterations
            last_log = time.time() if console else last_log
            log_iteration(run, progress, rollouts, replays, global_step, times, console)
            if rollouts[0].snapshot is not None:
                payload = checkpoint_payload(run, progress, train_state, replays, acting_params, rollouts)
                muzero_run.save_checkpoint(run, payload, iteration, global_step)
    finally:  # threads joined first (no thread inside XLA at exit); with --save-model nothing trained is lost
        learner_done.set()
        for actor in actors:
            actor.join()
        steps_played = progress.iteration * steps_per_iteration  # in the whole iterations the learner finished
        muzero_run.close_run(run, partial(unreplicate, train_state.params), progress.num_updates, steps_played)
    steps = num_iterations * steps_per_iteration
    muzero_run.finish_run(run, partial(unreplicate, train_state.params), steps, progress.num_updates)
    return unreplicate(train_state)


if __name__ == "__main__":
    muzero_run.cli(main, Args)
