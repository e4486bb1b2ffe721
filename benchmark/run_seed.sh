# Sourced by the learning benchmarks (muzero_minatar.sh, muzero_breakthrough.sh): one training run of one seed.
#
#   run_seed LOG PREFIX OUT COMMAND...
#
# runs COMMAND (a training run) with its console in LOG, or, with RESUME set, continues with --resume the run
# directory runs/PREFIX* that has a checkpoint and no finished.json (stopped, e.g. at the end of a session), with
# the same flags (--resume refuses others) and appending to LOG. Then collects the run into OUT with the commit its
# code comes from ("+changes" if anything but OUT differs from it), its wall time and the share of CPU time the host
# gave to other VMs (steal, from /proc/stat). A resumed run's wall time is its time running: collect sums its pieces.
# Sets RUN_DIR (the run directory, named by the script's first line) and RUN_COMMIT.

cpu_ticks() { awk '/^cpu /{print $9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }  # steal and total CPU ticks

run_seed() {
  local log=$1 prefix=$2 out=$3
  shift 3
  local start steal0 total0 steal1 total1 steal unfinished="" d
  RUN_COMMIT=$(python muzero_tools.py commit --out "$out")
  start=$(date +%s)
  read -r steal0 total0 < <(cpu_ticks)
  if [ -n "${RESUME:-}" ]; then
    for d in runs/"$prefix"*; do
      if [ -f "$d/checkpoint.pkl" ] && [ ! -f "$d/finished.json" ]; then unfinished=$d; fi
    done
  fi
  local wall_time=()
  if [ -n "$unfinished" ]; then
    "$@" --resume "$unfinished" 2>&1 | tee -a "$log"  # (the log keeps every piece)
  else
    "$@" 2>&1 | tee "$log"
    wall_time=(--wall-time $(( $(date +%s) - start )))  # one piece: its wall time
  fi
  read -r steal1 total1 < <(cpu_ticks)
  steal=$(awk -v s=$((steal1 - steal0)) -v t=$((total1 - total0)) 'BEGIN {printf "%.3f", s / t}')
  RUN_DIR=$(sed -n 's/^run: \(runs\/[^ ]*\).*/\1/p' "$log" | head -n 1)
  python muzero_tools.py collect --run-dir "$RUN_DIR" "${wall_time[@]}" --commit "$RUN_COMMIT" \
    --cpu-steal "$steal" --out "$out"
}
