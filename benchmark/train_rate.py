"""Agent steps per second of a run once updates start, from its events: between the first progress line at or after
the first update and the last one (compiling and the replay's fill left out).

    python benchmark/train_rate.py runs/<run name>
"""

import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

events = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
events.Reload()
first_update = events.Scalars("losses/total_loss")[0].wall_time
lines = [e for e in events.Scalars("charts/SPS") if e.wall_time >= first_update]
print(f"{(lines[-1].step - lines[0].step) / (lines[-1].wall_time - lines[0].wall_time):.1f}")
