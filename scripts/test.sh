#!/bin/sh
# The whole test suite, from a fresh Debian 12 machine: packages, per-area test set-up
# (scripts/test-setup.d/*.sh: the npm SDK for the e2b test, ...), an ASan+UBSan build, and
# every CTest entry. Extra arguments go to ctest (e.g. `-R docker`).
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh
for f in scripts/test-setup.d/*.sh; do
	[ -e "$f" ] || continue
	sh "$f"
done
build=${SBX_TEST_BUILD:-build-test}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DSBX_SANITIZE=ON >/dev/null
cmake --build "$build" -j "$(nproc)"
cd "$build"
# Sandboxes and state of the suite live under the build tree, never in the user's home.
export SBX_STATE_DIR="$PWD/test-state"
ctest --output-on-failure -j "$(nproc)" --timeout 600 "$@"
