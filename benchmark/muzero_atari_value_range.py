"""Do the values of Atari games fit muzero_atari_multigpu.py's categorical support? The value and reward heads
are categorical over [-S, S] after MuZero's transform phi, so they cannot say more than phi^-1(S) (905 at S = 30,
58,700 at S = 300, MuZero's). A uniformly random player gives a floor on the values a learning agent meets: each
game is played by --num-envs copies for --steps agent steps each under the script's bridge (sticky actions 0.25, FIRE
rule, a lost life ends an episode as in training), and every position's value target at N = infinity, the
discounted return to its episode's end (episodes still running at the end count what they have: a lower bound),
is compared with the two caps.

    python benchmark/muzero_atari_value_range.py     # ~2 min on 2 cores

Writes {out}/value_range.csv and prints a table.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import muzero_atari_multigpu as atari  # noqa: E402


def returns_to_go(rewards: np.ndarray, is_last: np.ndarray, gamma: float) -> np.ndarray:
    """rewards (T, n) with rewards[t] the reward of the step into t, is_last (T, n) -> (T, n): at t the discounted
    sum of the rewards after t up to the end of t's episode (0 at an episode's last step)."""
    values = np.zeros_like(rewards)
    following = np.zeros(rewards.shape[1])
    for t in range(len(rewards) - 1, -1, -1):
        following = np.where(is_last[t], 0.0, following)
        values[t] = following
        following = rewards[t] + gamma * following
    return values


def random_play(env_id: str, num_envs: int, steps: int, seed: int) -> dict:
    """Rewards and values of uniformly random legal actions, with the script's defaults for everything else."""
    args = atari.Args(env_id=env_id, sticky_action_prob=0.25)
    envs = atari.AtariVecEnv(args, num_envs, seed, args.episodic_life)
    rng = np.random.default_rng(seed)
    rewards, is_last = [], []
    step = envs.step(np.zeros(num_envs, np.int64))
    for _ in range(steps):
        legal = envs.legal_actions(step.is_last)
        actions = np.array([rng.choice(np.flatnonzero(row)) for row in legal])
        step = envs.step(actions)
        rewards.append(step.reward)
        is_last.append(step.is_last)
    rewards = np.array(rewards, np.float64)
    values = returns_to_go(rewards, np.array(is_last), args.gamma)
    caps = {size: float(atari.phi_inverse(jnp.float32(size))) for size in (30, 300)}
    return {
        "env_id": env_id,
        "positions": values.size,
        "largest_reward": float(np.abs(rewards).max()),
        "value_p99": float(np.quantile(values, 0.99)),
        "largest_value": float(values.max()),
        "above_cap_30": float((values > caps[30]).mean()),
        "above_cap_300": float((values > caps[300]).mean()),
        "cap_30": caps[30],
        "cap_300": caps[300],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--env-ids", nargs="+", default=["Breakout-v5", "Pong-v5", "Qbert-v5", "RoadRunner-v5", "Krull-v5", "CrazyClimber-v5"]
    )
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=3000, help="agent steps per copy")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="docs/benchmark/muzero_atari_multigpu")
    cfg = parser.parse_args()
    table = pd.DataFrame([random_play(env_id, cfg.num_envs, cfg.steps, cfg.seed) for env_id in cfg.env_ids])
    table.to_csv(os.path.join(cfg.out, "value_range.csv"), index=False)
    print(
        f"| game | largest reward of a step | values: 99th percentile / largest | share above {table.cap_30[0]:.0f} "
        f"(S = 30) | share above {table.cap_300[0]:,.0f} (S = 300) |\n|---|---|---|---|---|"
    )
    for row in table.itertuples():
        print(
            f"| {row.env_id} | {row.largest_reward:g} | {row.value_p99:,.0f} / {row.largest_value:,.0f} | "
            f"{row.above_cap_30:.1%} | {row.above_cap_300:.1%} |"
        )
