#!/bin/sh
# The official e2b npm SDK for the e2b_sdk test, installed from the committed lockfile in
# tests/e2b/sdk. Idempotent: skipped when node_modules already matches the lockfile (npm keeps
# a copy of the lock it installed in node_modules/.package-lock.json).
set -eu
dir=$(cd "$(dirname "$0")/../../tests/e2b/sdk" && pwd)
command -v npm >/dev/null || { echo "30-e2b-sdk: npm is not installed" >&2; exit 1; }
stamp=$dir/node_modules/.sbx-lock-sha256
want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
if [ -f "$dir/node_modules/e2b/package.json" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	exit 0
fi
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
echo "$want" >"$stamp"
