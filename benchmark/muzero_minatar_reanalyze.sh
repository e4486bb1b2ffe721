#!/usr/bin/env bash
# The reanalyze experiment: muzero_minatar_reanalyze.py at equal frames (the default 300k), evaluated every 50k
# frames, every game x seed x setting one run after another (each run uses both cores of a 2-core CPU):
#   ratio_0            no reanalysis: muzero_minatar.py's computation, value for value (replay ratio 2)
#   no_reanalysis_rr8  no reanalysis at replay ratio 8
#   sample_rr2         reanalysis when a batch is drawn ($SAMPLE: MuZero Reanalyze, EfficientZero), replay ratio 2
#   sample_rr4         the same at replay ratio 4
#   sample_rr8         the same at replay ratio 8
#   sample_rr2_ratio1  sample_rr2 searching every sampled position again (--reanalyze-ratio 1; EfficientZero: 0.99)
#   sample_rr4_ratio1  the same at replay ratio 4 (run by name in SETTINGS; its Breakout seeds 1-2: experiment log)
#   sample_rr4_td5     sample_rr4 bootstrapping after N = 5 steps (EfficientZero's horizon)
#   sample_rr4_sim16   sample_rr4 searching at 16 simulations, acting's budget (run by name in SETTINGS; compared with
#                      ratio_0 and sample_rr4 in simulations_8_vs_16/)
#   sample_rr4_insertion_priorities  sample_rr4 drawing as the base does, by the insertion priorities |v* - G^N|
#                      at exponent 1, not the learner's errors at 0.6 (run by name in SETTINGS; compared with ratio_0
#                      and sample_rr4 in priorities_learner_vs_insertion/)
#   sample_rr4_search_bootstrap  sample_rr4 bootstrapping from the stored v* (as the base does), not the target
#                      network: fresh policies only (run by name in SETTINGS; compared with ratio_0 and sample_rr4 in
#                      value_bootstrap_target_vs_search/)
#   sample_rr4_max_priority  sample_rr4 storing new positions at replay's largest priority (EfficientZero's
#                      --use_max_priority, LightZero's default), not |v* - G^N| (run by name in SETTINGS; compared
#                      with ratio_0 and sample_rr4 in new_data_priority_max_vs_insertion/)
#   sample_rr4_td5_max_priority  sample_rr4_td5 storing new positions at replay's largest priority (compared with
#                      ratio_0 and sample_rr4_td5 in td5_new_data_priority_max_vs_insertion/)
#   push_0.4           40% of the segments entering replay are reanalysed copies, stored as new ones (thesis 4.3.13, 5.5)
#   matched_updates    no reanalysis, with push_0.4's updates per played step: --replay-ratio x (32 + 21) / 32
# Each setting's runs are collected in docs/benchmark/muzero_minatar_reanalyze/experiment/{setting}/ (curves,
# runs.csv; the console logs stay out of the docs tree, in runs/logs/reanalyze_{setting}/); the comparison step then
# writes experiment.csv (every run with its setting), compare.md and the curves against frames and wall time in
# docs/benchmark/muzero_minatar_reanalyze/, and experiment/diagnostics.csv.
#
# COST=1 measures instead what $SAMPLE costs, A B A B against no reanalysis at replay ratio 2 and 8
# (benchmark/muzero_minatar_reanalyze_cost.py: cost.csv, cost.md).
#
#   bash benchmark/muzero_minatar_reanalyze.sh                     # Asterix, Breakout x seeds 1 2 3 x 9 settings
#   SETTINGS="sample_rr2" GAMES="Asterix" SEEDS="3" bash benchmark/muzero_minatar_reanalyze.sh
#   COST=1 bash benchmark/muzero_minatar_reanalyze.sh
set -euo pipefail
cd "$(dirname "$0")/.."
MAIN_SETTINGS="ratio_0 no_reanalysis_rr8 sample_rr2 sample_rr4 sample_rr8 sample_rr2_ratio1 sample_rr4_td5
sample_rr4_td5_max_priority push_0.4"  # run by default and compared in compare.md, with matched_updates
SETTINGS=${SETTINGS:-$MAIN_SETTINGS}
export GAMES=${GAMES:-"Asterix Breakout"} SEEDS=${SEEDS:-"1 2 3"}
BASE=docs/benchmark/muzero_minatar_reanalyze
# reanalysis at sampling time: a quarter of each batch's policy targets searched again (8 simulations) with the target
# network, every value target bootstrapped from it with N shortened by one per 1,000 updates of age, priorities from
# the learner's value errors drawn with exponent 0.6 (EfficientZero's alpha; it searches 0.99 of the batch with 50
# simulations), the bias kept as the base keeps it (importance exponent 0; EfficientZero anneals it 0.4 -> 1, which
# here left the weights at 0.12 of the batch's largest and Breakout seed 1 at 15.50 against 26.88: experiment log)
# (the script's defaults, written out; with --replay-ratio 4 they are sample_rr4)
SAMPLE="--reanalyze-mode sample --reanalyze-ratio 0.25 --reanalyze-num-simulations 8 --value-bootstrap target_network \
--td-age-updates 1000 --priority-exponent 0.6 --importance-exponent 0"
# push mode with the base's replay ratio, priorities, bootstrap and search budget: at ratio 0, muzero_minatar.py
PUSH="--reanalyze-mode push --replay-ratio 2 --priority-exponent 1 --value-bootstrap search --td-age-updates 0 \
--reanalyze-num-simulations 16"
if [ -n "${COST:-}" ]; then
  exec python benchmark/muzero_minatar_reanalyze_cost.py --sample-flags "$SAMPLE" --plain-flags "$PUSH --reanalyze-ratio 0" \
    --out "$BASE" "$@"
fi
# 32 environments: ratio 0.4 adds round(32 x 0.4 / 0.6) = 21 reanalysed segments to the 32 played each iteration, so
# push's updates at replay ratio 2 are those of replay ratio 2 x (32 + 21) / 32 without it
replay_ratio=3.3125
declare -A FLAGS=(
  [ratio_0]="$PUSH --reanalyze-ratio 0"
  [no_reanalysis_rr8]="$PUSH --reanalyze-ratio 0 --replay-ratio 8"
  [sample_rr2]="$SAMPLE --replay-ratio 2"
  [sample_rr4]="$SAMPLE --replay-ratio 4"
  [sample_rr8]="$SAMPLE --replay-ratio 8"
  [sample_rr2_ratio1]="$SAMPLE --replay-ratio 2 --reanalyze-ratio 1"
  [sample_rr4_ratio1]="$SAMPLE --replay-ratio 4 --reanalyze-ratio 1"
  [sample_rr4_td5]="$SAMPLE --replay-ratio 4 --td-steps 5"
  [sample_rr4_sim16]="$SAMPLE --replay-ratio 4 --reanalyze-num-simulations 16"
  [sample_rr4_insertion_priorities]="$SAMPLE --replay-ratio 4 --no-learner-priorities --priority-exponent 1"
  [sample_rr4_search_bootstrap]="$SAMPLE --replay-ratio 4 --value-bootstrap search"
  [sample_rr4_max_priority]="$SAMPLE --replay-ratio 4 --new-data-max-priority"
  [sample_rr4_td5_max_priority]="$SAMPLE --replay-ratio 4 --td-steps 5 --new-data-max-priority"
  [push_0.4]="$PUSH --reanalyze-ratio 0.4"
  [matched_updates]="$PUSH --reanalyze-ratio 0 --replay-ratio $replay_ratio"
)
for setting in $SETTINGS; do
  # shellcheck disable=SC2086
  SCRIPT=muzero_minatar_reanalyze.py OUT="$BASE/experiment/$setting" LOGS="runs/logs/reanalyze_$setting" \
    bash benchmark/muzero_minatar.sh ${FLAGS[$setting]} --exp-name "reanalyze_$setting" "$@"  # (evaluated every 50k)
done
done=()
for setting in $MAIN_SETTINGS matched_updates; do
  if [ -f "$BASE/experiment/$setting/runs.csv" ]; then done+=("$BASE/experiment/$setting"); fi
done
python muzero_tools.py compare --out "$BASE" --runs "${done[@]}"
# ratio 0 against sample mode at replay ratio 4 over the seeds both have run
# (the page's seeds: SEEDS="4 5 6 7 8 9" SETTINGS="sample_rr4 ratio_0" adds seeds 4-9, GAMES=Asterix for 6-9)
PAIR=("$BASE/experiment/ratio_0" "$BASE/experiment/sample_rr4")
if [ -f "${PAIR[0]}/runs.csv" ] && [ -f "${PAIR[1]}/runs.csv" ]; then
  python muzero_tools.py compare --out "$BASE/ratio_0_vs_sample_rr4" --runs "${PAIR[@]}"
fi
# and each single-lever setting against ratio 0 and the setting it departs from (setting:baseline:folder), over the
# seeds all three have run
for lever in sample_rr4_sim16:sample_rr4:simulations_8_vs_16 \
  sample_rr4_insertion_priorities:sample_rr4:priorities_learner_vs_insertion \
  sample_rr4_search_bootstrap:sample_rr4:value_bootstrap_target_vs_search \
  sample_rr4_max_priority:sample_rr4:new_data_priority_max_vs_insertion \
  sample_rr4_td5_max_priority:sample_rr4_td5:td5_new_data_priority_max_vs_insertion; do
  IFS=: read -r setting baseline folder <<< "$lever"
  TRIPLE=("$BASE/experiment/ratio_0" "$BASE/experiment/$baseline" "$BASE/experiment/$setting")
  if [ -f "${TRIPLE[0]}/runs.csv" ] && [ -f "${TRIPLE[1]}/runs.csv" ] && [ -f "${TRIPLE[2]}/runs.csv" ]; then
    python muzero_tools.py compare --out "$BASE/$folder" --runs "${TRIPLE[@]}"
    done+=("${TRIPLE[2]}")  # (its runs' series in diagnostics.csv too)
  fi
done
# every run's logged series (losses, entropies, values, reanalysis) per 50k frames, from the runs still in runs/
mapfile -t run_dirs < <(for d in "${done[@]}"; do tail -n +2 "$d/runs.csv" | cut -d, -f3; done | sed 's|^|runs/|' | sort -u |
  while read -r r; do [ -d "$r" ] && echo "$r"; done)
if [ ${#run_dirs[@]} -gt 0 ]; then python muzero_tools.py diagnostics --out "$BASE/experiment" --run-dirs "${run_dirs[@]}"; fi
