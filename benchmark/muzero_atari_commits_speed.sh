#!/usr/bin/env bash
# Two commits of muzero_atari_multigpu.py timed A B A B on this machine: the same short run (GAME, default Alien-v5,
# no sticky actions, 8,192 agent steps, no evaluation) at each commit in turn (each from a git worktree of its own),
# twice, with nothing else running. Writes OUT (default docs/benchmark/muzero_atari_multigpu/commits_speed.csv): per
# run its whole-process wall and CPU seconds (/usr/bin/time) and its training rate once updates start
# (benchmark/train_rate.py), which leaves out compiling.
#
#   bash benchmark/muzero_atari_commits_speed.sh 885d433 HEAD     # ~15 min on 2 cores
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${OUT:-docs/benchmark/muzero_atari_multigpu/commits_speed.csv}
game=${GAME:-Alien-v5}
work=$(mktemp -d)
machine=$(python -c "import muzero_tools; print(muzero_tools.machine_line())")
echo "commit,game,round,wall_s,cpu_s,train_steps_per_s,machine" > "$work/speed.csv"
for commit in "$1" "$2"; do
  git worktree add --detach "$work/$commit" "$commit" > /dev/null
done
for round in 1 2; do
  for commit in "$1" "$2"; do
    (cd "$work/$commit" && /usr/bin/time -f "%e %U %S" -o "$work/time" python muzero_atari_multigpu.py --env-id "$game" \
      --sticky-action-prob 0 --total-timesteps 8192 --eval-episodes 0 --exp-name "speed_$round" > "$work/log" 2>&1)
    read -r wall user sys < "$work/time"
    run_dir=$(sed -n 's/^run: \(runs\/[^ ]*\).*/\1/p' "$work/log" | head -n 1)
    rate=$(python benchmark/train_rate.py "$work/$commit/$run_dir")
    cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN {printf "%.1f", u + s}')
    echo "$(git rev-parse --short "$commit"),$game,$round,$wall,$cpu,$rate,\"$machine\"" >> "$work/speed.csv"
  done
done
for commit in "$1" "$2"; do
  git worktree remove --force "$work/$commit"
done
cd "$root" && mv "$work/speed.csv" "$out"
cat "$out"
