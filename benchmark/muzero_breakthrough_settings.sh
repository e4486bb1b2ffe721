#!/usr/bin/env bash
# MuZero's board-game settings against this script's defaults on Breakthrough 5x5: each setting trained on the same
# seeds as the defaults (benchmark/muzero_breakthrough.sh with its own --exp-name, into $OUT/{setting}/, its final
# model in a 200-game match against MCTSBot-1000), then one Elo ladder per seed in which every setting's checkpoints
# at 50k, 300k, 550k and 800k plies play each other and the anchors (random, MCTSBot-100 and -1000), 20 games per
# pair ($OUT/ladder/seed{seed}/). A setting is kept where its checkpoints do not rate below the defaults'.
#
#   bash benchmark/muzero_breakthrough_settings.sh                          # every setting, seeds 1 2 (about 7 h)
#   SETTINGS="defaults gamma_1" SEEDS=1 bash benchmark/muzero_breakthrough_settings.sh
#
# The settings (MuZero's board games: discount 1 with returns to the end of the game, Sequential Halving that
# halves):
#   defaults       the script's defaults
#   gamma_1        --gamma 1 --td-steps 71 (no 5x5 game is longer than 71 plies)
#   considered_4   --max-num-considered-actions 4 (16 simulations halve twice)
# (settings/explored_mean/ and the ladders' explored_mean runs: random moves' positions stored at the mean priority
# of their segment instead of 0, a flag this script had at the commit in their runs.csv, removed as it gained nothing;
# considered_4 ran on seed 1 only: it lost there, as on 8x8, so ladder/seed2/ holds defaults, gamma_1, explored_mean)
# A setting and seed with a finished run is not run again, one stopped part way is continued (RESUME=1: a session
# can end in the middle of one), and a ladder stopped part way continues from its last pair.
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${SEEDS:-"1 2"}
SETTINGS=${SETTINGS:-"defaults gamma_1 considered_4"}
OUT=${OUT:-docs/benchmark/muzero_breakthrough/settings}
declare -A flags=(
  [defaults]=""
  [gamma_1]="--gamma 1 --td-steps 71"
  [considered_4]="--max-num-considered-actions 4"
)
for setting in $SETTINGS; do
  if [ -z "${flags[$setting]+set}" ]; then echo "unknown setting $setting (known: ${!flags[*]})" >&2; exit 2; fi
done
finished() { ls -d runs/breakthrough__muzero_breakthrough_"$1"__"$2"__*/finished.json 2>/dev/null | tail -n 1; }
for setting in $SETTINGS; do
  todo=""
  for seed in $SEEDS; do
    if [ -z "$(finished "$setting" "$seed")" ]; then todo="$todo $seed"; fi
  done
  if [ -z "$todo" ]; then continue; fi  # every seed of it trained already
  # shellcheck disable=SC2086  # a setting's flags are words
  EXP_NAME=muzero_breakthrough_$setting OUT=$OUT/$setting MATCHES="mcts-1000:200" LADDER="" SEEDS="$todo" RESUME=1 \
    bash benchmark/muzero_breakthrough.sh ${flags[$setting]} "$@"
done
for seed in $SEEDS; do
  run_dirs=()
  for setting in $SETTINGS; do  # the finished run of this setting and seed
    run_dirs+=("$(dirname "$(finished "$setting" "$seed")")")
  done
  python muzero_tools.py ladder --run-dirs "${run_dirs[@]}" --every 5 --games-per-pair 20 --mcts-simulations 100 1000 \
    --out "$OUT/ladder/seed$seed"
done
