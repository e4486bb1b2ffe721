#!/usr/bin/env bash
# Atari 100k with muzero_atari_multigpu.py at its defaults: the benchmark's 26 games (Kaiser et al. 2020, as DER, CURL,
# DrQ, SPR and EfficientZero report them) x seeds, 100k agent steps a run, under the references' protocol: no sticky
# actions (the script's default; Machado et al. 2018's revisited protocol has 0.25), a final evaluation of 32 whole
# games (one more at 50k, so that a fall shows). One run after another (each uses both cores of a 2-core CPU), collected into
# docs/benchmark/muzero_atari_multigpu/ (runs.csv, curves, logs; results.md with the published agents and the
# aggregates) by benchmark/muzero_minatar.sh's steps.
#
#   bash benchmark/muzero_atari_multigpu.sh                           # the 26 games, seed 1
#   RESUME=1 bash benchmark/muzero_atari_multigpu.sh                  # the same, going on where it stopped
#   GAMES="Pong-v5" SEEDS="2" bash benchmark/muzero_atari_multigpu.sh --num-actor-threads 2
#
# Runs checkpoint every 10k agent steps; with RESUME=1 a stopped run continues (benchmark/run_seed.sh) and a game and
# seed already in runs.csv is not run again. The random player's floor under the same protocol:
#   ALL_GAMES=1 bash benchmark/muzero_atari_multigpu.sh   # prints the 26 ids, for random-returns --env-ids
#   python muzero_tools.py random-returns --out docs/benchmark/muzero_atari_multigpu --episodes 100 \
#     --sticky-action-prob 0 --env-ids $(ALL_GAMES=1 bash benchmark/muzero_atari_multigpu.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=docs/benchmark/muzero_atari_multigpu
ATARI_100K="Alien-v5 Amidar-v5 Assault-v5 Asterix-v5 BankHeist-v5 BattleZone-v5 Boxing-v5 Breakout-v5 ChopperCommand-v5 CrazyClimber-v5 DemonAttack-v5 Freeway-v5 Frostbite-v5 Gopher-v5 Hero-v5 Jamesbond-v5 Kangaroo-v5 Krull-v5 KungFuMaster-v5 MsPacman-v5 Pong-v5 PrivateEye-v5 Qbert-v5 RoadRunner-v5 Seaquest-v5 UpNDown-v5"
if [ -n "${ALL_GAMES:-}" ]; then echo "$ATARI_100K"; exit 0; fi
for game in ${GAMES:-$ATARI_100K}; do
  for seed in ${SEEDS:-1}; do
    if [ -n "${RESUME:-}" ] && [ -f "$OUT/runs.csv" ] && grep -q "^$game,$seed," "$OUT/runs.csv"; then continue; fi
    GAMES=$game SEEDS=$seed CHECKPOINT_INTERVAL=10000 SCRIPT=muzero_atari_multigpu.py OUT=$OUT \
      bash benchmark/muzero_minatar.sh --sticky-action-prob 0 --eval-interval 50000 --eval-episodes 32 "$@"
  done
done
