#!/usr/bin/env bash
# Learning benchmark of muzero_minatar.py at its default (docs) configuration.
# Runs every game x seed one after another (each run uses both cores of a 2-core CPU), then
# collects each run's evaluation curve into docs/benchmark/muzero_minatar/ and redraws the
# curves and the table the docs show.
#
#   bash benchmark/muzero_minatar.sh                      # all 5 games x seeds 1-5
#   GAMES="Freeway" SEEDS="3" bash benchmark/muzero_minatar.sh --track
#
# Extra arguments are passed to every run (e.g. --track --wandb-entity me). The frame budget per
# run is the script's default --total-timesteps (300k environment steps, 10-25 min a run on 2 cores);
# TOTAL_TIMESTEPS overrides it. SCRIPT runs a variant instead (benchmark/muzero_minatar_reanalyze.sh); LOGS puts the
# console logs elsewhere than $OUT/logs. Runs are evaluated every 50k frames (the script's --eval-interval is 100k),
# so that curves have six points: the three more evaluations took 76 s of a 23.0-minute Breakout run (5.5%;
# docs/benchmark/muzero_minatar/ppo/muzero/runs.csv).
#
# Runs longer than a sitting: CHECKPOINT_INTERVAL=50000 gives new runs a checkpoint every 50k steps, and with
# RESUME=1 a run of the same game, seed and --exp-name that has a checkpoint and no finished.json (stopped, e.g.
# at the end of a session) is continued with --resume instead of started anew. Such a run's wall time and
# minutes are its time running: collect leaves out the pauses between its pieces.
set -euo pipefail
cd "$(dirname "$0")/.."
GAMES=${GAMES:-"Asterix Breakout Freeway Seaquest SpaceInvaders"}
SEEDS=${SEEDS:-"1 2 3 4 5"}
OUT=${OUT:-docs/benchmark/muzero_minatar}
SCRIPT=${SCRIPT:-muzero_minatar.py}
LOGS=${LOGS:-$OUT/logs}  # each run's console output
budget=()
if [ -n "${TOTAL_TIMESTEPS:-}" ]; then budget=(--total-timesteps "$TOTAL_TIMESTEPS"); fi
mkdir -p "$LOGS"
exp_name=$(basename "$SCRIPT" .py)
args=("$@")
for i in "${!args[@]}"; do if [ "${args[$i]}" = "--exp-name" ]; then exp_name=${args[$((i + 1))]}; fi; done
checkpoints=()
if [ -n "${CHECKPOINT_INTERVAL:-}" ]; then checkpoints=(--checkpoint-interval "$CHECKPOINT_INTERVAL"); fi
. benchmark/run_seed.sh
for env_id in $GAMES; do
  for seed in $SEEDS; do
    log="$LOGS/${env_id}__seed${seed}.log"
    echo "== $env_id seed $seed (log: $log)"
    run_seed "$log" "${env_id}__${exp_name}__${seed}__" "$OUT" python "$SCRIPT" --env-id "$env_id" --seed "$seed" \
      --eval-interval 50000 "${budget[@]}" "${checkpoints[@]}" "$@"
  done
done
python muzero_tools.py report --out "$OUT"
