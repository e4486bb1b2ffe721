#!/usr/bin/env bash
# Learning benchmark of muzero_breakthrough.py: self-play on Breakthrough, evaluated against a uniform-random
# player and OpenSpiel's MCTSBot. Runs every seed one after another (each run uses both cores of a 2-core CPU),
# collects each run's win-rate curves into $OUT, plays its final model's matches (matches.csv) and the Elo ladder
# of its checkpoints ($OUT/ladder/seed{seed}/), then redraws the figure and table the docs show.
#
#   bash benchmark/muzero_breakthrough.sh                 # 5x5 (the docs' defaults), seeds 1 2
#   SEEDS="3" bash benchmark/muzero_breakthrough.sh --track
#   BOARD_SIZE=8 bash benchmark/muzero_breakthrough.sh    # the full board, into $OUT/board_8 (2M plies, 2.0-2.6 h)
#   MATCHES="mcts-10000:200" LADDER="" bash benchmark/muzero_breakthrough.sh   # a longer match, no ladder
#   EXP_NAME=muzero_breakthrough_8x8_considered_4 OUT=docs/benchmark/muzero_breakthrough/considered_4 BOARD_SIZE=8 \
#     bash benchmark/muzero_breakthrough.sh --max-num-considered-actions 4   # a setting beside the defaults
#
# Extra arguments are passed to every run. BOARD_SIZE (default 5) sets --board-size; another board than 5 runs
# with --exp-name muzero_breakthrough_{n}x{n} (EXP_NAME replaces it, on any board) and its results go to
# $OUT/board_{n}. MATCHES lists the final model's matches as opponent:games (opponent random or mcts-{simulations});
# LADDER the MCTSBot anchors of the ladder (empty: no ladder; on another board than 5 it is empty unless given).
# On 8x8 the runs take 2M plies, evaluated every 200k: about 100 minutes of training (300-390 plies/s) and 45 of
# evaluations on 2 cores. Each run keeps a checkpoint every --checkpoint-interval plies (50k) with its parameters in
# runs/{run_name}/models/. Runs longer than a sitting: with RESUME=1 a run of the same seed and --exp-name that has
# a checkpoint and no finished.json (stopped, e.g. at the end of a session) is continued with --resume, and its wall
# time is its time running (collect leaves out the pauses between its pieces).
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${SEEDS:-"1 2"}
BOARD_SIZE=${BOARD_SIZE:-5}
OUT=${OUT:-docs/benchmark/muzero_breakthrough}
board=(--board-size "$BOARD_SIZE")
if [ "$BOARD_SIZE" = 5 ]; then  # a seed's 4 matches: about 10 minutes on 5x5; 8x8: MCTSBot-1000 4.2 s a move (reported)
  MATCHES=${MATCHES:-"random:200 mcts-100:200 mcts-1000:200 mcts-10000:50"}
  LADDER=${LADDER-"100 1000"}
  exp_name=${EXP_NAME:-muzero_breakthrough}
else
  MATCHES=${MATCHES:-"random:200 mcts-1000:50"}
  LADDER=${LADDER-""}
  exp_name=${EXP_NAME:-muzero_breakthrough_${BOARD_SIZE}x${BOARD_SIZE}}
  if [ "$BOARD_SIZE" = 8 ]; then board+=(--total-timesteps 2000000 --eval-interval 200000); fi
  OUT=$OUT/board_$BOARD_SIZE
fi
board+=(--exp-name "$exp_name")  # (RESUME finds a run by it)
mkdir -p "$OUT/logs"
. benchmark/run_seed.sh
for seed in $SEEDS; do
  log="$OUT/logs/breakthrough__seed${seed}.log"
  echo "== breakthrough ${BOARD_SIZE}x${BOARD_SIZE} seed $seed (log: $log)"
  run_seed "$log" "breakthrough__${exp_name}__${seed}__" "$OUT" python muzero_breakthrough.py --seed "$seed" --save-model \
    "${board[@]}" "$@"
  for match in $MATCHES; do  # opponent:games
    opponent=${match%%:*}
    simulations=()
    if [ "$opponent" != random ]; then simulations=(--mcts-simulations "${opponent#mcts-}"); fi
    python muzero_tools.py match --model "$(ls "$RUN_DIR"/*.muzero_model)" --opponent "${opponent%%-*}" \
      "${simulations[@]}" --games "${match#*:}" --commit "$RUN_COMMIT" --out "$OUT"
  done
  if [ -n "$LADDER" ]; then  # checkpoints at 50k, 300k, 550k and 800k plies on 5x5, and the anchors
    # shellcheck disable=SC2086  # LADDER is a list of numbers
    python muzero_tools.py ladder --run-dirs "$RUN_DIR" --every 5 --games-per-pair 20 --mcts-simulations $LADDER \
      --out "$OUT/ladder/seed$seed"
  fi
done
python muzero_tools.py report --out "$OUT"
