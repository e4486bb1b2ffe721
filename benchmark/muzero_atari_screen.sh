#!/usr/bin/env bash
# The screen that chose muzero_atari_multigpu.py's defaults before the 26-game suite (benchmark/muzero_atari_multigpu.sh):
# settings x games, seed 1, 100k agent steps, under the Atari 100k protocol of the references (no sticky actions),
# with an evaluation of 16 whole games every 25k agent steps so that a fall shows. The games, named before the first
# run: RoadRunner and MsPacman (rewards dense), Asterix (between), Breakout and Pong (sparse); the choice rests on the
# dense two (docs/experiment_log.md). Each setting's runs are collected into
# docs/benchmark/muzero_atari_multigpu/screen/<setting>/ (runs.csv, curves, logs).
#
#   bash benchmark/muzero_atari_screen.sh                                   # the settings of the default list
#   GAMES="Pong-v5" SETTINGS="gumbel" RESUME=1 bash benchmark/muzero_atari_screen.sh
#
# Settings: `puct` (the script's defaults before the screen: PUCT, 8 simulations, replay ratio 2), `gumbel` (the
# same with the gumbel planner), `gumbel_lean` (gumbel, 4 simulations, replay ratio 1: about 0.65 of puct's CPU) and
# `gumbel_lean_sampled` (the same training, evaluated with Gumbel noise of scale 1 instead of greedily). The default
# list runs `gumbel_lean_sampled`, then `puct`, on the two dense games; `gumbel` ran on RoadRunner and `gumbel_lean` on
# RoadRunner and MsPacman. The other three games' runs at the chosen setting are the suite's.
#
# Runs checkpoint every 10k steps; with RESUME=1 a stopped run continues (benchmark/run_seed.sh) and a finished one
# is not run again.
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A FLAGS=(
  [puct]="--planner muzero --num-simulations 8 --replay-ratio 2"
  [gumbel]="--planner gumbel --num-simulations 8 --replay-ratio 2"
  [gumbel_lean]="--planner gumbel --num-simulations 4 --replay-ratio 1"
  [gumbel_lean_sampled]="--planner gumbel --num-simulations 4 --replay-ratio 1 --eval-gumbel-scale 1"
)
for setting in ${SETTINGS:-gumbel_lean_sampled puct}; do
  for game in ${GAMES:-MsPacman-v5 RoadRunner-v5}; do
    out=docs/benchmark/muzero_atari_multigpu/screen/$setting
    if [ -n "${RESUME:-}" ] && [ -f "$out/runs.csv" ] && grep -q "^$game,1," "$out/runs.csv"; then continue; fi
    # shellcheck disable=SC2086  # the setting's flags are words
    GAMES=$game SEEDS=1 CHECKPOINT_INTERVAL=10000 SCRIPT=muzero_atari_multigpu.py OUT=$out bash benchmark/muzero_minatar.sh \
      --exp-name "screen_$setting" --sticky-action-prob 0 --eval-interval 25000 --eval-episodes 16 ${FLAGS[$setting]}
  done
done
