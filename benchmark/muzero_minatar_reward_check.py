"""Can muzero_minatar.py's (or muzero_atari_multigpu.py's) network learn a game's rewards at all, and how many
updates does it need?

    python benchmark/muzero_minatar_reward_check.py --env-id Asterix     # ~6 min on 2 cores
    python benchmark/muzero_minatar_reward_check.py --script muzero_atari_multigpu --env-id Breakout-v5 \
      --batch-size 64 --updates 3000 --out docs/benchmark/muzero_atari_multigpu/probes

A supervised check, outside the RL loop: --num-envs copies of the game play --steps uniformly random
actions (Atari: a lost life ends an episode, as in training); the first 80% of each copy's steps are training
data, the rest held out. The script's default network
(`make_network`, `init_params`) learns r_{c+1} from the history at c and the action a_c (h, then one
step of g, the reward cross-entropy of the training loss, Adam at the default learning rate), with
batches drawn two ways:

  * uniform: every position equally likely, as the default replay draws them;
  * balanced: a quarter of each batch drawn from the positions whose next step rewards.

Every --eval-every updates it reports, on the held-out positions, the mean |predicted - observed|
reward on rewarding and on other steps, and the share of rewarding steps predicted above 0.5 (and of
other steps, false positives); and the error on the rewarding training positions (whether the network
fits the steps it trains on at all). `--network dqn` trains a plain DQN-style network on the same data instead, as a
control. Writes {out}/reward_check_{env_id}.csv and prints a table.
"""

import argparse
import importlib
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
import pandas as pd  # noqa: E402

from muzero_tools import git_commit, machine_line  # noqa: E402


def play_randomly(m, args, num_envs: int, steps: int, seed: int) -> dict:
    if hasattr(m, "AtariVecEnv"):
        envs = m.AtariVecEnv(args, num_envs, seed, episodic_life=True)
    else:
        envs = m.MinAtarVecEnv(args.env_id, num_envs, seed, 0.0)
    rng = np.random.default_rng(seed)
    fields = {k: [] for k in ("obs", "reward", "is_first", "is_last", "action")}
    step = envs.step(np.zeros(num_envs, np.int32))
    for _ in range(steps):
        action = np.where(step.is_last, 0, rng.integers(1, envs.num_actions, num_envs)).astype(np.int32)
        for k, v in (
            ("obs", step.obs),
            ("reward", step.reward),
            ("is_first", step.is_first),
            ("is_last", step.is_last),
            ("action", action),
        ):
            fields[k].append(v)
        step = envs.step(action)
    data = {k: np.stack(v, 1) for k, v in fields.items()}
    data["policy"] = np.zeros((num_envs, steps, envs.num_actions), np.float32)  # only its shape is read
    return data


class DQNReward(nn.Module):
    """A control for --network dqn: DQN's three convolutions (Mnih et al. 2015; 'SAME' padding) on the same stacked
    input, the one-hot action beside their features, a 256-unit layer, reward logits over the script's support.
    No normalisation, no hidden-state scaling, no dynamics function."""

    num_actions: int
    support_size: int

    @nn.compact
    def __call__(self, stacked, action):
        planes, actions = stacked  # of the script's stack_history: frame planes (B, H, W, L*C), actions (B, L)
        b, h, w, _ = planes.shape
        one_hot = jax.nn.one_hot(actions, self.num_actions).reshape(b, 1, 1, -1)  # tiled over the board, undivided
        x = jnp.concatenate([planes, jnp.broadcast_to(one_hot, (b, h, w, one_hot.shape[-1]))], -1)
        x = nn.relu(nn.Conv(32, (8, 8), strides=4)(x))
        x = nn.relu(nn.Conv(64, (4, 4), strides=2)(x))
        x = nn.relu(nn.Conv(64, (3, 3))(x)).reshape(b, -1)
        x = nn.relu(nn.Dense(256)(jnp.concatenate([x, jax.nn.one_hot(action, self.num_actions)], -1)))
        return nn.Dense(2 * self.support_size + 1)(x)


def main(a):
    commit = git_commit(a.out)  # at the start: the code that runs, not what HEAD is when it ends
    m = importlib.import_module(a.script)
    args = m.Args(env_id=a.env_id)
    L, S = args.history_length, args.support_size
    data = play_randomly(m, args, a.num_envs, a.steps, a.seed)
    num_actions = data["policy"].shape[-1]
    if a.network == "script":  # h, then one step of g
        net = m.make_network(args, num_actions)

        def init(key):
            return m.init_params(net, args, key)

        def reward_logits(params, stacked, action):
            x = net.apply(params, stacked, method=m.MuZeroNet.represent)
            return net.apply(params, x, action, method=m.MuZeroNet.dynamics)[1]

    else:
        net = DQNReward(num_actions, S)

        def init(key):
            stacked = jax.tree.map(lambda x: x[None], m.history_at({k: v[0, : L + 2] for k, v in data.items()}, L, L))
            return net.init(key, stacked, data["action"][:1, 0])

        reward_logits = net.apply
    optimizer = optax.adam(args.learning_rate)

    def windows(env: np.ndarray, c: np.ndarray) -> dict:  # steps c-L .. c+1 of each copy
        t = c[:, None] + np.arange(-L, 2)[None]
        return {k: v[env[:, None], t] for k, v in data.items()}

    def predict(params, window):
        stacked = jax.vmap(lambda w: m.history_at(w, L, L))(window)
        logits = reward_logits(params, stacked, window["action"][:, L])
        reward = window["reward"][:, L + 1] * ~window["is_last"][:, L]  # no step follows the last one
        return logits, reward

    def loss_fn(params, window):
        logits, reward = predict(params, window)
        return optax.losses.softmax_cross_entropy(logits, m.scalar_to_categorical(reward, S)).mean()

    @jax.jit
    def update(params, opt_state, window):
        grads = jax.grad(loss_fn)(params, window)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    @jax.jit
    def predicted_reward(params, window):
        logits, reward = predict(params, window)
        return m.categorical_to_scalar(jax.nn.softmax(logits), S), reward

    split = int(a.steps * 0.8)
    test_c = np.arange(split, a.steps - 1)
    test = windows(np.repeat(np.arange(a.num_envs), len(test_c)), np.tile(test_c, a.num_envs))
    train_rewarding = np.nonzero(data["reward"][:, L + 1 : split] != 0)  # reward r_{c+1} for c = L + column
    seen = windows(train_rewarding[0], train_rewarding[1] + L)  # the rewarding training positions themselves
    rows = []
    for sampling, num_updates in (("uniform", a.updates), ("balanced", a.balanced_updates)):
        rng = np.random.default_rng(a.seed)
        params = init(jax.random.PRNGKey(a.seed))
        opt_state = optimizer.init(params)
        start = time.time()
        for i in range(num_updates + 1):
            if i % a.eval_every == 0:
                pred, reward = map(np.asarray, predicted_reward(params, test))
                rewarding, error = reward != 0, np.abs(pred - reward)
                seen_pred, seen_reward = map(np.asarray, predicted_reward(params, seen))
                rows.append(
                    {
                        "env_id": a.env_id,
                        "sampling": sampling,
                        "updates": i,
                        "error_rewarding": error[rewarding].mean(),
                        "error_other": error[~rewarding].mean(),
                        "detected": (pred[rewarding] > 0.5).mean(),
                        "false_positive": (pred[~rewarding] > 0.5).mean(),
                        "error_rewarding_train": np.abs(seen_pred - seen_reward).mean(),
                        "held_out_rewarding": int(rewarding.sum()),
                        "held_out_steps": len(reward),
                    }
                )
                print(
                    f"{sampling} {i}: error on rewarding steps {rows[-1]['error_rewarding']:.3f}, other "
                    f"{rows[-1]['error_other']:.3f}, detected {rows[-1]['detected']:.2f}, false positives "
                    f"{rows[-1]['false_positive']:.3f}; on the rewarding training steps "
                    f"{rows[-1]['error_rewarding_train']:.3f} ({time.time() - start:.0f} s)",
                    flush=True,
                )
            if i == num_updates:
                break
            env, c = rng.integers(0, a.num_envs, a.batch_size), rng.integers(L, split - 1, a.batch_size)
            if sampling == "balanced":
                pick = rng.integers(0, len(train_rewarding[0]), a.batch_size // 4)
                env[: len(pick)], c[: len(pick)] = train_rewarding[0][pick], train_rewarding[1][pick] + L
            params, opt_state = update(params, opt_state, windows(env, c))
    out = pd.DataFrame(rows)
    share = (data["reward"] != 0).mean()
    out["rewarding_share"], out["batch_size"], out["network"] = share, a.batch_size, a.network
    out["commit"], out["machine"] = commit, machine_line()
    os.makedirs(a.out, exist_ok=True)
    out.to_csv(os.path.join(a.out, f"reward_check_{a.env_id}.csv"), index=False)
    print(f"\n{a.env_id}: {share:.2%} of random-play steps reward; {len(train_rewarding[0])} rewarding training positions")
    print(
        out[
            ["sampling", "updates", "error_rewarding", "error_other", "detected", "false_positive", "error_rewarding_train"]
        ].to_string(index=False, float_format="%.3f")
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--script", default="muzero_minatar", choices=["muzero_minatar", "muzero_atari_multigpu"])
    parser.add_argument("--env-id", default="Asterix", help="a MinAtar game, or an envpool Atari id for the Atari script")
    parser.add_argument("--num-envs", type=int, default=32)
    parser.add_argument("--steps", type=int, default=1500, help="random steps per copy")
    parser.add_argument("--updates", type=int, default=3000, help="updates with uniform batches")
    parser.add_argument("--balanced-updates", type=int, default=1000, help="updates with balanced batches")
    parser.add_argument("--network", default="script", choices=["script", "dqn"], help="the script's h and g, or DQNReward")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="docs/benchmark/muzero_minatar/ablation")
    main(parser.parse_args())
