#!/bin/sh
# Builds the libFuzzer targets with clang (build-fuzz/, ASan + UBSan) and runs each one for
# SECONDS (default 15) from the committed seed corpus and past findings. New inputs go to
# build-fuzz/fuzz-work/<target>/, never into the repository. A crash, leak, timeout or
# sanitizer report fails the run; the input is kept in build-fuzz/findings/<target>/ (copy
# it to tests/fuzz/regress/<target>/ with the fix, so replay_<target> keeps it fixed).
#   sh tests/fuzz/run.sh [SECONDS] [TARGET...]      e.g. run.sh 600 config
set -eu
cd "$(dirname "$0")/../.."
secs=${1:-15}
[ $# -gt 0 ] && shift
build=${SBX_FUZZ_BUILD:-build-fuzz}
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DSBX_FUZZ=ON \
	-DSBX_TESTS=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target fuzz_all >/dev/null
# Every target this build made (the docker ones need libarchive).
targets=${*:-$(cd "$build/tests/fuzz" && ls fuzz_* | sed 's/^fuzz_//' | grep -v '\.' )}
for t in $targets; do
	work="$build/fuzz-work/$t"
	found="$build/findings/$t"
	mkdir -p "$work" "$found"
	dict=""
	[ -f "tests/fuzz/$t.dict" ] && dict="-dict=tests/fuzz/$t.dict"
	log="$build/fuzz-$t.log"
	# shellcheck disable=SC2086
	if ! "$build/tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=60 -rss_limit_mb=2048 \
		-max_len=65536 -print_final_stats=1 -artifact_prefix="$found/" $dict \
		"$work" "tests/fuzz/corpus/$t" "tests/fuzz/regress/$t" >"$log" 2>&1; then
		tail -40 "$log" >&2
		echo "fuzz: $t: finding kept in $found/" >&2
		exit 1
	fi
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	echo "fuzz: $t: ${runs:-?} executions in ${secs} s, no finding"
done
