#!/usr/bin/env bash
# Speed of muzero_breakthrough.py on 8x8 on one GPU (benchmark/muzero_breakthrough_gpu.py): each configuration for
# BUDGET seconds (default 150, so that three fit in 9 minutes), its plies/s and memory in $OUT/gpu_speed.csv. For a
# machine with jax (CUDA), flax, optax, numpy, scipy and absl-py installed and no internet: the other packages come as
# wheels from the folder $WHEELS, fetched where there is internet (Python 3.12, Linux x86-64; about 17 MB):
#
#   WHEELS=.whl bash benchmark/muzero_breakthrough_gpu.sh download   # here: the wheels into .whl
#   WHEELS=.whl OUT=$OUT bash benchmark/muzero_breakthrough_gpu.sh   # there: installed into /tmp/site, then the runs
#   BUDGET=450 WHEELS=.whl OUT=$OUT bash benchmark/muzero_breakthrough_gpu.sh --learn   # there: a learning run
#
# --learn trains the largest configuration instead for BUDGET seconds, one model every 250k plies, and returns them in
# $OUT/run.tar.gz (without the checkpoint) for muzero_tools.py match here, with its speed in $OUT/gpu_learn.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES="open-spiel ml-collections mctx tyro docstring-parser typeguard tensorboardX"
if [ "${1:-}" = download ]; then
  platforms=()
  for tag in manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 manylinux1; do
    platforms+=(--platform "${tag}_x86_64")
  done
  # shellcheck disable=SC2086
  exec python -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" -c constraints.txt -d "$WHEELS" $PACKAGES
fi
if [ -n "${WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$WHEELS"/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 benchmark/muzero_breakthrough_gpu.py --budget "${BUDGET:-150}" --out "${OUT:-gpu_speed}" "$@"
