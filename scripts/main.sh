#!/bin/sh
# The main job on the embedded default: install, build, then run the example rollout on the
# `local` backend and print its summary.
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh
cmake -S . -B build -DSBX_TESTS=OFF >/dev/null
cmake --build build -j "$(nproc)"
./build/sbx rollout --config examples/local.yaml --output build/results.jsonl examples/tasks.jsonl
