#!/bin/sh
# failed_case.sh PLUGIN_TEST SOCKET: runs the plugin test's deliberate_failure case, which
# creates a container labelled sbx.run=t-deliberate and then fails, and checks that the case
# failed as planned and that the engine on SOCKET has no such container afterwards.
set -u
out=$(SBX_DOCKER_TEST_FAIL=1 "$1" --filter 'docker_plugin/deliberate_failure' 2>&1)
rc=$?
if [ $rc = 0 ] || ! printf '%s\n' "$out" | grep -q 'deliberate failure after creating'; then
	echo "failed_case: the deliberate failure did not happen (exit $rc):" >&2
	printf '%s\n' "$out" >&2
	exit 1
fi
left=$(curl -sS --max-time 60 --unix-socket "$2" \
	"http://d/containers/json?all=1&filters=%7B%22label%22%3A%5B%22sbx.run%3Dt-deliberate%22%2C%22sbx.test-tree%3D${SBX_TEST_TREE:-}%22%5D%7D")
if [ "$left" != "[]" ]; then
	echo "failed_case: containers left behind: $left" >&2
	exit 1
fi
echo "failed_case: the case failed (exit $rc) and left no container"
