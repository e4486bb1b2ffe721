"""Does a player that never chooses FIRE get its Breakout games to end? Counts stalled games (cut at the step
cap) of a NOOP player under muzero_atari_multigpu.py's environment bridge, for --fire-steps 0, 1, 2, with and
without episodic life, sticky actions 0.25. Writes docs/benchmark/muzero_atari_multigpu/serve.json.

    python benchmark/muzero_atari_serve.py     # ~2 min
"""

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import muzero_atari_multigpu as ma  # noqa: E402

COPIES, CAP, STEPS = 64, 2000, 2100


def stalls(fire_steps: int, episodic_life: bool) -> dict:
    args = ma.Args(fire_steps=fire_steps, max_episode_steps=CAP, sticky_action_prob=0.25)
    envs = ma.AtariVecEnv(args, COPIES, (100, 0), episodic_life)
    step, tracker, lengths = envs.step(np.zeros(COPIES, np.int32)), ma.EpisodeTracker(COPIES), []
    for _ in range(STEPS):
        legal = envs.legal_actions(step.is_last)
        step = envs.step(np.where(legal[:, 1], 1, np.argmax(legal, 1)))  # NOOP whenever it is legal
        lengths += tracker.update(step)[2].tolist()  # env actions per game: a cut game has CAP - 1
    lengths = np.array(lengths)
    return dict(
        fire_steps=fire_steps,
        episodic_life=episodic_life,
        games=len(lengths),
        stalled=int((lengths >= CAP - 1).sum()),
        median_length=float(np.median(lengths)),
    )


if __name__ == "__main__":
    rows = [stalls(k, e) for e in (True, False) for k in (0, 1, 2)]
    for r in rows:
        print(r)
    out = os.path.join(os.path.dirname(__file__), "..", "docs", "benchmark", "muzero_atari_multigpu", "serve.json")
    with open(out, "w") as f:
        json.dump(dict(copies=COPIES, cap=CAP, steps=STEPS, rows=rows), f, indent=1)
