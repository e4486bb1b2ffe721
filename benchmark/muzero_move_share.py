"""How much does the dynamics function g see the move at initialisation, with the one-hot move divided by |A^a|
(thesis 4.3.4) and unscaled? For each game: the mean change of g's next state when the move changes, over its
change when the hidden state changes (64 random pairs of each, the default network of the game's script).

    python benchmark/muzero_move_share.py     # seconds

The other column is the same network with the move rows of g's stem kernel scaled by |A^a| or 1/|A^a|.
muzero_breakthrough.py and muzero_atari_multigpu.py read the move unscaled (Atari: its 6 x 6 board after the
front); the MinAtar scripts divide it by |A^a|.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jax  # noqa: E402
import numpy as np  # noqa: E402

import muzero_atari_multigpu  # noqa: E402
import muzero_breakthrough  # noqa: E402
import muzero_minatar  # noqa: E402

DIVIDING = (muzero_minatar,)  # the scripts whose g reads the one-hot move divided by |A^a|


def move_share(script, args, num_actions: int, board: int, divided: bool) -> float:
    """The move's effect on g's next state over the hidden state's, with the one-hot move divided by |A^a| or not."""
    net = script.make_network(args, num_actions)
    params = script.init_params(net, args, jax.random.PRNGKey(0))
    kernel = np.array(params["params"]["dyn_stem"]["kernel"])
    scale = (1 / num_actions if divided else 1.0) / (1 / num_actions if script in DIVIDING else 1.0)
    kernel[0, 0, -num_actions:] *= scale  # the stem computes one_hot @ rows: scaling the rows scales the move
    params["params"]["dyn_stem"]["kernel"] = kernel
    keys = jax.random.split(jax.random.PRNGKey(1), 4)
    x1, x2 = (script.scale_hidden(jax.random.uniform(k, (64, board, board, args.channels))) for k in keys[:2])
    a1, a2 = (jax.random.randint(k, (64,), 1, num_actions) for k in keys[2:])

    def g(x, a):
        return net.apply(params, x, a, method=script.MuZeroNet.dynamics)[0]

    return float(np.abs(g(x1, a1) - g(x1, a2)).mean() / np.abs(g(x1, a1) - g(x2, a1)).mean())


if __name__ == "__main__":
    games = [(muzero_breakthrough, muzero_breakthrough.Args(), 301, 5)]
    for env_id in ("Asterix", "Breakout", "Freeway", "SpaceInvaders"):
        actions = muzero_minatar.MinAtarVecEnv(env_id, 1, 0, 0.0).num_actions
        games.append((muzero_minatar, muzero_minatar.Args(env_id=env_id), actions, 10))
    for env_id in ("Breakout-v5", "Pong-v5"):
        args = muzero_atari_multigpu.Args(env_id=env_id)
        _, actions = muzero_atari_multigpu.env_shapes(args)
        games.append((muzero_atari_multigpu, args, actions, args.resolution // 16))
    print("| game | actions (with the dummy) | one-hot divided by the actions | unscaled |\n|---|---|---|---|")
    for script, args, actions, board in games:
        shares = [move_share(script, args, actions, board, divided) for divided in (True, False)]
        print(f"| {args.env_id} | {actions} | {shares[0]:.3f} | {shares[1]:.3f} |")
