"""The model-free baseline of the MinAtar page: PPO on gymnax's MinAtar with the whole training loop compiled (PureJaxRL's
design), at gymnax-blines' MinAtar settings (64 environments x 128 steps, 8 minibatches, 4 epochs, separate actor and
critic MLPs of 2 x 256 ReLU units, Adam 5e-4 after a 5% linear warmup, gamma 0.999, GAE lambda 0.95, clip 0.2,
entropy 0.01, value 0.5, gradient norm 0.5). It runs on the CPU beside muzero_minatar.py's runs, so the page compares
the two in frames and in minutes on the same machine:

    pip install -c constraints.txt -e ".[ppo]"
    python benchmark/ppo_minatar_gymnax.py --env-id Breakout --seed 1 --total-timesteps 10000000

Every --eval-interval updates (and at the end) the stochastic policy plays --eval-episodes fresh episodes, each
cut at gymnax's step limit (Freeway 2,500, the others 1,000: muzero_minatar.py's evaluation cuts them there too).
Each evaluation is a row of {out}/ppo.csv (env_id, seed, frames, eval_return, minutes: training wall time to that
point with compilation, without the evaluations; commit, machine); a rerun of a game and seed replaces its rows.
"""

import dataclasses
import os
import sys
import time

import flax.linen as nn
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pandas as pd
import tyro

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from muzero_tools import git_commit, machine_line, replace_rows  # noqa: E402


@dataclasses.dataclass
class Args:
    env_id: str = "Breakout"
    """the MinAtar game: Asterix, Breakout, Freeway or SpaceInvaders (gymnax's `{env_id}-MinAtar`)"""
    seed: int = 1
    """seed of the parameters, the environments and the action samples"""
    total_timesteps: int = 10_000_000
    """environment steps (frames) of training"""
    num_envs: int = 64
    """parallel environments"""
    num_steps: int = 128
    """steps per environment per update (the rollout and GAE horizon)"""
    num_minibatches: int = 8
    """minibatches per epoch"""
    update_epochs: int = 4
    """passes over each rollout"""
    learning_rate: float = 5e-4
    """Adam's learning rate after the warmup"""
    warmup_fraction: float = 0.05
    """share of the updates over which the learning rate rises linearly from 0"""
    gamma: float = 0.999
    """discount"""
    gae_lambda: float = 0.95
    """GAE's lambda"""
    clip_coef: float = 0.2
    """PPO's ratio clip (also the value clip)"""
    ent_coef: float = 0.01
    """entropy bonus weight"""
    vf_coef: float = 0.5
    """value loss weight"""
    max_grad_norm: float = 0.5
    """global gradient norm clip"""
    hidden_units: int = 256
    """units of each of the 2 hidden layers of the actor and of the critic"""
    eval_interval: int = 12
    """updates between evaluations (12 x 8,192 = 98,304 frames)"""
    eval_episodes: int = 32
    """episodes per evaluation"""
    out: str = "docs/benchmark/muzero_minatar/ppo"
    """folder of ppo.csv"""


class ActorCritic(nn.Module):
    """Separate actor and critic MLPs over the flattened observation (gymnax-blines' Categorical-MLP)."""

    num_actions: int
    hidden_units: int

    @nn.compact
    def __call__(self, obs):  # obs [..., 10, 10, C] -> logits [..., A], value [...]
        x = obs.reshape(*obs.shape[:-3], -1).astype(jnp.float32)
        actor, critic = x, x
        for _ in range(2):
            actor = nn.relu(nn.Dense(self.hidden_units)(actor))
            critic = nn.relu(nn.Dense(self.hidden_units)(critic))
        return nn.Dense(self.num_actions)(actor), nn.Dense(1)(critic)[..., 0]


def gae(rewards, values, dones, last_value, gamma: float, gae_lambda: float):
    """Generalised advantage estimates over a rollout. rewards, values, dones: [T, N] (dones[t]: the episode ended
    at step t, so step t+1 starts a new one); last_value [N]: the value after the last step. Returns advantages and
    returns, [T, N]."""

    def backward(carry, step):
        advantage, next_value = carry
        reward, value, done = step
        not_done = 1.0 - done
        delta = reward + gamma * next_value * not_done - value
        advantage = delta + gamma * gae_lambda * not_done * advantage
        return (advantage, value), advantage

    _, advantages = jax.lax.scan(backward, (jnp.zeros_like(last_value), last_value), (rewards, values, dones), reverse=True)
    return advantages, advantages + values


def make_train(args: Args, env, env_params):
    """Returns (init(key) -> state, train_chunk(state, num_updates) -> state, evaluate(params, key) -> returns)."""
    network = ActorCritic(env.num_actions, args.hidden_units)
    num_updates = args.total_timesteps // (args.num_envs * args.num_steps)
    optimizer_steps = num_updates * args.update_epochs * args.num_minibatches
    warmup = max(1, int(args.warmup_fraction * optimizer_steps))
    schedule = optax.join_schedules(
        [optax.linear_schedule(0.0, args.learning_rate, warmup), optax.constant_schedule(args.learning_rate)], [warmup]
    )
    optimizer = optax.chain(optax.clip_by_global_norm(args.max_grad_norm), optax.adam(schedule, eps=1e-5))
    reset = jax.vmap(env.reset, in_axes=(0, None))
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))  # gymnax's step resets an ended episode itself

    def init(key):
        key, params_key, env_key = jax.random.split(key, 3)
        obs, env_state = reset(jax.random.split(env_key, args.num_envs), env_params)
        params = network.init(params_key, obs)
        return params, optimizer.init(params), env_state, obs, key

    def loss_fn(params, batch):
        obs, actions, old_log_probs, old_values, advantages, returns = batch
        logits, values = network.apply(params, obs)
        log_probs = jax.nn.log_softmax(logits)
        log_prob = jnp.take_along_axis(log_probs, actions[:, None], axis=-1)[:, 0]
        entropy = -(jnp.exp(log_probs) * log_probs).sum(-1).mean()
        clipped_values = old_values + jnp.clip(values - old_values, -args.clip_coef, args.clip_coef)
        value_loss = 0.5 * jnp.maximum((values - returns) ** 2, (clipped_values - returns) ** 2).mean()
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        ratio = jnp.exp(log_prob - old_log_probs)
        clipped_ratio = jnp.clip(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
        policy_loss = -jnp.minimum(ratio * advantages, clipped_ratio * advantages).mean()
        return policy_loss + args.vf_coef * value_loss - args.ent_coef * entropy

    def update(state, _):
        params, opt_state, env_state, obs, key = state

        def env_step(carry, _):
            env_state, obs, key = carry
            key, action_key, step_key = jax.random.split(key, 3)
            logits, value = network.apply(params, obs)
            action = jax.random.categorical(action_key, logits)
            log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], axis=-1)[:, 0]
            next_obs, env_state, reward, terminated, truncated, _ = step(
                jax.random.split(step_key, args.num_envs), env_state, action, env_params
            )
            done = terminated | truncated  # a cut episode ends its advantages as a finished one (gymnax-blines)
            return (env_state, next_obs, key), (obs, action, log_prob, value, reward, done.astype(jnp.float32))

        (env_state, obs, key), rollout = jax.lax.scan(env_step, (env_state, obs, key), None, args.num_steps)
        rollout_obs, actions, log_probs, values, rewards, dones = rollout  # [T, N, ...]
        advantages, returns = gae(rewards, values, dones, network.apply(params, obs)[1], args.gamma, args.gae_lambda)
        data = jax.tree.map(
            lambda x: x.reshape(-1, *x.shape[2:]), (rollout_obs, actions, log_probs, values, advantages, returns)
        )

        def epoch(carry, _):
            params, opt_state, key = carry
            key, perm_key = jax.random.split(key)
            order = jax.random.permutation(perm_key, args.num_envs * args.num_steps).reshape(args.num_minibatches, -1)

            def minibatch(carry, indices):
                params, opt_state = carry
                grads = jax.grad(loss_fn)(params, jax.tree.map(lambda x: x[indices], data))
                updates, opt_state = optimizer.update(grads, opt_state)
                return (optax.apply_updates(params, updates), opt_state), None

            (params, opt_state), _ = jax.lax.scan(minibatch, (params, opt_state), order)
            return (params, opt_state, key), None

        (params, opt_state, key), _ = jax.lax.scan(epoch, (params, opt_state, key), None, args.update_epochs)
        return (params, opt_state, env_state, obs, key), None

    @jax.jit
    def evaluate(params, key):
        """Returns of args.eval_episodes fresh episodes of the sampled policy, [E]; each counts its first episode."""
        key, reset_key = jax.random.split(key)
        obs, env_state = reset(jax.random.split(reset_key, args.eval_episodes), env_params)

        def env_step(carry, _):
            env_state, obs, key, returns, running = carry
            key, action_key, step_key = jax.random.split(key, 3)
            action = jax.random.categorical(action_key, network.apply(params, obs)[0])
            obs, env_state, reward, terminated, truncated, _ = step(
                jax.random.split(step_key, args.eval_episodes), env_state, action, env_params
            )
            return (env_state, obs, key, returns + reward * running, running & ~(terminated | truncated)), None

        carry = (env_state, obs, key, jnp.zeros(args.eval_episodes), jnp.ones(args.eval_episodes, bool))
        carry, _ = jax.lax.scan(env_step, carry, None, env_params.max_steps_in_episode)
        return carry[3]

    train_chunk = jax.jit(lambda state, n: jax.lax.scan(update, state, None, n)[0], static_argnums=1)
    return init, train_chunk, evaluate, num_updates


def main(args: Args):
    games = ("Asterix", "Breakout", "Freeway", "SpaceInvaders")
    if args.env_id not in games:
        sys.exit(f"error: --env-id {args.env_id}: one of {', '.join(games)}")
    batch = args.num_envs * args.num_steps
    if args.total_timesteps < batch or (batch // args.num_minibatches) * args.num_minibatches != batch:
        sys.exit(f"error: --total-timesteps >= {batch} and --num-minibatches dividing {batch} are needed")
    env, env_params = gymnax.make(f"{args.env_id}-MinAtar")
    init, train_chunk, evaluate, num_updates = make_train(args, env, env_params)
    commit, machine = git_commit(args.out), machine_line()
    print(f"PPO on {args.env_id}-MinAtar, seed {args.seed}: {num_updates} updates of {batch} frames")
    key = jax.random.key(args.seed)
    key, eval_key = jax.random.split(key)
    start, eval_seconds, done, rows = time.time(), 0.0, 0, []
    state = init(key)
    while done < num_updates:
        n = min(args.eval_interval, num_updates - done)
        state = jax.block_until_ready(train_chunk(state, n))
        done += n
        eval_start = time.time()
        returns = np.asarray(evaluate(state[0], jax.random.fold_in(eval_key, done)))
        eval_seconds += time.time() - eval_start
        minutes = (time.time() - start - eval_seconds) / 60
        rows.append({"env_id": args.env_id, "seed": args.seed, "frames": done * batch, "eval_return": returns.mean()})
        rows[-1].update({"eval_episodes": len(returns), "minutes": round(minutes, 3), "commit": commit, "machine": machine})
        print(f"frames={done * batch} eval_return={returns.mean():.2f} minutes={minutes:.2f}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    replace_rows(os.path.join(args.out, "ppo.csv"), pd.DataFrame(rows), args.env_id, args.seed)
    print(f"{len(rows)} evaluations written to {os.path.join(args.out, 'ppo.csv')}")


if __name__ == "__main__":
    main(tyro.cli(Args))
