#!/usr/bin/env bash
# What each setting of the Atari screen (benchmark/muzero_atari_screen.sh) costs on this machine, measured A B A B:
# the same short run (MsPacman-v5, no sticky actions, 8,192 agent steps, no evaluation) at each setting in turn,
# twice, with nothing else running. Writes docs/benchmark/muzero_atari_multigpu/screen/cost.csv: per run its
# whole-process wall and CPU seconds (/usr/bin/time) and its training rate after the first update (agent steps per
# second between the first progress line after it and the last, from the run's events), which leaves out compiling.
#
#   bash benchmark/muzero_atari_screen_cost.sh        # ~12 min on 2 cores
set -euo pipefail
cd "$(dirname "$0")/.."
out=docs/benchmark/muzero_atari_multigpu/screen/cost.csv
work=$(mktemp -d)
common=(--env-id MsPacman-v5 --sticky-action-prob 0 --total-timesteps 8192 --eval-episodes 0)
declare -A FLAGS=(
  [defaults]=""
  [gumbel_lean]="--planner gumbel --num-simulations 4 --replay-ratio 1"
)
echo "setting,round,wall_s,cpu_s,train_steps_per_s,commit,machine" > "$work/cost.csv"
for round in 1 2; do
  for setting in gumbel_lean defaults; do
    # shellcheck disable=SC2086  # the setting's flags are words
    /usr/bin/time -f "%e %U %S" -o "$work/time" python muzero_atari_multigpu.py "${common[@]}" \
      --exp-name "cost_${setting}_$round" ${FLAGS[$setting]} > "$work/log" 2>&1
    read -r wall user sys < "$work/time"
    run_dir=$(sed -n 's/^run: \(runs\/[^ ]*\).*/\1/p' "$work/log" | head -n 1)
    python - "$setting" "$round" "$wall" "$user" "$sys" "$run_dir" >> "$work/cost.csv" <<'EOF'
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import muzero_tools

setting, round_, wall, user, sys_, run_dir = sys.argv[1:]
events = EventAccumulator(run_dir, size_guidance={"scalars": 0})
events.Reload()
first_update = events.Scalars("losses/total_loss")[0].wall_time
lines = [e for e in events.Scalars("charts/SPS") if e.wall_time >= first_update]
rate = (lines[-1].step - lines[0].step) / (lines[-1].wall_time - lines[0].wall_time)
cpu = float(user) + float(sys_)
print(f'{setting},{round_},{wall},{cpu:.1f},{rate:.1f},{muzero_tools.git_commit(".")},"{muzero_tools.machine_line()}"')
EOF
  done
done
mv "$work/cost.csv" "$out"
cat "$out"
