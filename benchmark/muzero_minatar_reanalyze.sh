#!/usr/bin/env bash
# The MooZi thesis' reanalyze experiment (5.5) at CPU scale: muzero_minatar_reanalyze.py at reanalyze
# ratios 0, 0.2 and 0.4 (the thesis' 20:0, 16:4 and 12:8 training:reanalyze workers) at equal frames,
# every game x seed one run after another (each run uses both cores of a 2-core CPU). Each ratio's runs
# go to their own folder under docs/benchmark/muzero_minatar_reanalyze/ (curves, runs.csv, logs), then
# the comparison step draws the ratios against frames and against wall time and writes the table of
# frames to reach a return.
#
#   bash benchmark/muzero_minatar_reanalyze.sh                        # Asterix, Breakout x seeds 1 2
#   RATIOS="0.4" GAMES="Asterix" SEEDS="3" bash benchmark/muzero_minatar_reanalyze.sh
#
# Ratio 0 is muzero_minatar.py's computation exactly (a test checks it, value for value), so its runs
# can also be taken from benchmark/muzero_minatar.sh's collected runs of the same seeds:
#   python muzero_tools.py select --runs docs/benchmark/muzero_minatar --games Asterix Breakout \
#     --seeds 1 2 --out docs/benchmark/muzero_minatar_reanalyze/ratio_0
#   RATIOS="0.2 0.4" bash benchmark/muzero_minatar_reanalyze.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RATIOS=${RATIOS:-"0 0.2 0.4"}
export GAMES=${GAMES:-"Asterix Breakout"} SEEDS=${SEEDS:-"1 2"}
BASE=docs/benchmark/muzero_minatar_reanalyze
for ratio in $RATIOS; do
  SCRIPT=muzero_minatar_reanalyze.py OUT="$BASE/ratio_$ratio" bash benchmark/muzero_minatar.sh \
    --reanalyze-ratio "$ratio" --exp-name "reanalyze_$ratio" "$@"
done
python muzero_tools.py compare --out "$BASE" --runs "$BASE"/ratio_*
