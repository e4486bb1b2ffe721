#!/usr/bin/env bash
# Learning benchmark of muzero_breakthrough.py at its default (docs) configuration: self-play on
# Breakthrough 5x5, evaluated against a uniform-random player and OpenSpiel's MCTSBot. Runs every seed
# one after another (each run uses both cores of a 2-core CPU), collects each run's win-rate curves into
# docs/benchmark/muzero_breakthrough/, plays its final model's 200-game matches against random and
# MCTSBot-100 (matches.csv), and the Elo ladder of the first seed's checkpoints (ladder/seed{seed}/), then
# redraws the figure and table the docs show.
#
#   bash benchmark/muzero_breakthrough.sh                 # seeds 1 2
#   SEEDS="3" bash benchmark/muzero_breakthrough.sh --track
#
# Extra arguments are passed to every run. Each run keeps its checkpoints' parameters in
# runs/{run_name}/models/ (the material of a tournament among them).
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${SEEDS:-"1 2"}
OUT=${OUT:-docs/benchmark/muzero_breakthrough}
mkdir -p "$OUT/logs"
cpu_ticks() { awk '/^cpu /{print $9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
for seed in $SEEDS; do
  log="$OUT/logs/breakthrough__seed${seed}.log"
  echo "== breakthrough seed $seed (log: $log)"
  commit=$(python muzero_tools.py commit --out "$OUT")
  start=$(date +%s)
  read -r steal0 total0 < <(cpu_ticks)
  python muzero_breakthrough.py --seed "$seed" --save-model "$@" 2>&1 | tee "$log"
  wall=$(( $(date +%s) - start ))
  read -r steal1 total1 < <(cpu_ticks)
  steal=$(awk -v s=$((steal1 - steal0)) -v t=$((total1 - total0)) 'BEGIN {printf "%.3f", s / t}')
  run_dir=$(sed -n 's/^run: \(runs\/[^ ]*\).*/\1/p' "$log" | head -n 1)
  python muzero_tools.py collect --run-dir "$run_dir" --wall-time "$wall" --commit "$commit" \
    --cpu-steal "$steal" --out "$OUT"
  for opponent in random mcts; do
    python muzero_tools.py match --model "$(ls "$run_dir"/*.muzero_model)" --opponent "$opponent" --games 200 \
      --commit "$commit" --out "$OUT"
  done
  if [ "$seed" = "${SEEDS%% *}" ]; then  # the first seed's checkpoints
    python muzero_tools.py ladder --run-dir "$run_dir" --every 2 --games-per-pair 40 --out "$OUT/ladder/seed$seed"
  fi
done
python muzero_tools.py report --out "$OUT"
