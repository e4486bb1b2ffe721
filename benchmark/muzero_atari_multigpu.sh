#!/usr/bin/env bash
# Learning benchmark of muzero_atari_multigpu.py at its default (docs) configuration: envpool Atari games x
# seeds, one run after another (each uses both cores of a 2-core CPU), collected into
# docs/benchmark/muzero_atari_multigpu/ (curves, runs.csv, logs) by benchmark/muzero_minatar.sh's steps.
#
#   bash benchmark/muzero_atari_multigpu.sh                           # Breakout-v5 and Pong-v5 x seeds 1 2
#   GAMES="Pong-v5" SEEDS="1" bash benchmark/muzero_atari_multigpu.sh --num-actor-threads 2
#
# The speed table (devices, threads, processes) comes from benchmark/muzero_atari_multigpu_speed.py.
set -euo pipefail
cd "$(dirname "$0")/.."
export GAMES=${GAMES:-"Breakout-v5 Pong-v5"} SEEDS=${SEEDS:-"1 2"}
SCRIPT=muzero_atari_multigpu.py OUT=docs/benchmark/muzero_atari_multigpu bash benchmark/muzero_minatar.sh "$@"
