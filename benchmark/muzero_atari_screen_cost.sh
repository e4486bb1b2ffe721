#!/usr/bin/env bash
# What each setting of the Atari screen (benchmark/muzero_atari_screen.sh) costs on this machine, measured A B A B:
# the same short run (MsPacman-v5, no sticky actions, 8,192 agent steps, no evaluation) at each setting in turn,
# twice, with nothing else running. Writes docs/benchmark/muzero_atari_multigpu/screen/cost.csv: per run its
# whole-process wall and CPU seconds (/usr/bin/time) and its training rate after the first update
# (benchmark/train_rate.py), which leaves out compiling.
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
machine=$(python -c "import muzero_tools; print(muzero_tools.machine_line())")
echo "setting,round,wall_s,cpu_s,train_steps_per_s,commit,machine" > "$work/cost.csv"
for round in 1 2; do
  for setting in gumbel_lean defaults; do
    # shellcheck disable=SC2086  # the setting's flags are words
    /usr/bin/time -f "%e %U %S" -o "$work/time" python muzero_atari_multigpu.py "${common[@]}" \
      --exp-name "cost_${setting}_$round" ${FLAGS[$setting]} > "$work/log" 2>&1
    read -r wall user sys < "$work/time"
    run_dir=$(sed -n 's/^run: \(runs\/[^ ]*\).*/\1/p' "$work/log" | head -n 1)
    rate=$(python benchmark/train_rate.py "$run_dir")
    cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN {printf "%.1f", u + s}')
    echo "$setting,$round,$wall,$cpu,$rate,$(python muzero_tools.py commit --out .),\"$machine\"" >> "$work/cost.csv"
  done
done
mv "$work/cost.csv" "$out"
cat "$out"
