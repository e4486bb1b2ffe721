#!/usr/bin/env bash
# One-GPU check of muzero_atari_multigpu.py (benchmark/muzero_atari_gpu.py): the paper-scale command for BUDGET
# seconds of wall time (default 420, so that the whole check fits in 9 minutes), its speed, memory and evaluations
# in $OUT/gpu_check.csv. For a machine with jax (CUDA), flax and optax installed and no internet: the other packages
# come from the folder $SITE, made where there is internet by benchmark/muzero_atari_gpu_site.sh (Python 3.12,
# Linux x86-64; envpool trimmed to Atari, about 38 MB):
#
#   SITE=.gpucheck bash benchmark/muzero_atari_gpu.sh                      # the packages from $SITE, then the check
#   REPLAY_RATIO=16 BUDGET=300 bash benchmark/muzero_atari_gpu.sh --env-id Pong-v5
#   BUDGET=60 TINY=1 OUT=/tmp/check bash benchmark/muzero_atari_gpu.sh     # tiny sizes (the CPU test adds its own flags)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${SITE:-}" ]; then  # the packages jax's CUDA install lacks, and envpool's Atari ROMs, without the network
    export PYTHONPATH="$(realpath "$SITE")/site${PYTHONPATH:+:$PYTHONPATH}" ENVPOOL_ASSETS_PATH="$(realpath "$SITE")/assets"
fi
python3 benchmark/muzero_atari_gpu.py --budget "${BUDGET:-420}" --replay-ratio "${REPLAY_RATIO:-8}" \
    --out "${OUT:-gpu_check}" ${TINY:+--tiny} "$@"
