#!/usr/bin/env bash
# One-GPU check of muzero_atari_multigpu.py (benchmark/muzero_atari_gpu.py): the paper-scale command for BUDGET
# seconds of wall time (default 420, so that the whole check fits in 9 minutes), its speed, memory and evaluations
# in $OUT/gpu_check.csv. For a machine with jax (CUDA) installed and no internet: the other packages come from the
# wheel folder $WHEELS, made once where there is internet (Python 3.12, Linux x86-64):
#
#   pip download --dest wheels --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#       mctx envpool ale-py tyro tensorboardX tensorboard
#
#   WHEELS=wheels bash benchmark/muzero_atari_gpu.sh                       # install, then the check
#   REPLAY_RATIO=16 BUDGET=300 bash benchmark/muzero_atari_gpu.sh --env-id Pong-v5
#   BUDGET=60 TINY=1 OUT=/tmp/check bash benchmark/muzero_atari_gpu.sh     # tiny sizes: the CPU test's run
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${WHEELS:-}" ]; then  # the packages jax's CUDA install lacks, without the network
    python -m pip install --quiet --no-index --find-links "$WHEELS" mctx envpool ale-py tyro tensorboardX tensorboard
fi
python benchmark/muzero_atari_gpu.py --budget "${BUDGET:-420}" --replay-ratio "${REPLAY_RATIO:-8}" \
    --out "${OUT:-gpu_check}" ${TINY:+--tiny} "$@"
