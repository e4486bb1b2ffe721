#!/usr/bin/env bash
# The packages the one-GPU check needs beside a GPU machine's own jax, flax and optax, as a folder to carry there
# (no internet on that machine; 64 MiB may travel). Run where there is internet:
#
#   bash benchmark/muzero_atari_gpu_site.sh            # makes .gpucheck/site and .gpucheck/assets (about 38 MB)
#   SITE=.gpucheck bash benchmark/muzero_atari_gpu.sh  # there: the check, with those folders on the path
#
# envpool's wheel holds every environment family (150 MB installed) and asks for 600 MB of assets; the check needs
# its Atari part and two ROMs. So the folder keeps envpool's Python files and its Atari library, registers Atari
# alone (envpool/entry.py rewritten), and holds the ROMs of Breakout and Pong from envpool-assets.
set -euo pipefail
cd "$(dirname "$0")/.."
SITE_DIR="${SITE_DIR:-.gpucheck}"
PYTHON_VERSION="${PYTHON_VERSION:-3.12}"  # the GPU machine's Python
rm -rf "$SITE_DIR" && mkdir -p "$SITE_DIR/assets/atari/roms"
platforms=()
for tag in manylinux_2_35 manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 \
    manylinux2014 manylinux1; do
    platforms+=(--platform "${tag}_x86_64")
done
python -m pip install --quiet --target "$SITE_DIR/site" --no-deps --only-binary=:all: \
    --python-version "$PYTHON_VERSION" --implementation cp "${platforms[@]}" -c constraints.txt \
    envpool mctx tyro tensorboardX docstring_parser typeguard dm-env dm-tree gymnasium farama-notifications optree \
    ale-py
# envpool: every compiled environment but Atari's goes, and only Atari is registered
find "$SITE_DIR/site/envpool" -name "*.so" ! -path "*/atari/*" -delete
find "$SITE_DIR/site/envpool/vizdoom" -type f ! -name "*.py" -size +100k -delete
printf '"""Entry point for the GPU check: Atari alone."""\n\nimport envpool.atari.registration  # noqa: F401\n' \
    > "$SITE_DIR/site/envpool/entry.py"
rm -f "$SITE_DIR"/site/ale_py/roms/*.bin
# the two ROMs, from envpool-assets' wheel
python -m pip download --quiet --no-deps --dest "$SITE_DIR/download" -c constraints.txt envpool-assets
python -m zipfile -e "$SITE_DIR"/download/envpool_assets-*.whl "$SITE_DIR/download/unpacked"
cp "$SITE_DIR"/download/unpacked/envpool_assets/atari/roms/{breakout,pong}.bin "$SITE_DIR/assets/atari/roms/"
rm -rf "$SITE_DIR/download"
find "$SITE_DIR" -name __pycache__ -prune -exec rm -rf {} +
du -sh "$SITE_DIR"
