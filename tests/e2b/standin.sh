#!/bin/sh
# Starts or stops the stand-in gateway for the e2b tests.
#   standin.sh start DIR [FAULTS_JSON]   writes DIR/port and DIR/pid, logs to DIR/requests.log
#   standin.sh stop DIR                  stops the stand-in started in DIR (by its pid)
set -eu
cmd=$1 dir=$2
case $cmd in
start)
	if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
		kill "$(cat "$dir/pid")" || true
		sleep 0.2
	fi
	rm -rf "$dir"
	mkdir -p "$dir/root"
	STANDIN_FAULTS=${3:-'{}'} nohup node "$(dirname "$0")/standin.mjs" --root "$dir/root" \
		--port-file "$dir/port" --api-key-env E2B_API_KEY \
		--log "$dir/requests.log" >"$dir/standin.out" 2>&1 &
	echo $! >"$dir/pid"
	i=0
	while [ ! -s "$dir/port" ]; do
		i=$((i + 1))
		if [ $i -gt 100 ] || ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
			cat "$dir/standin.out" >&2
			echo "standin: did not start" >&2
			exit 1
		fi
		sleep 0.1
	done
	port=$(cat "$dir/port")
	# The config the e2b tests (and the conformance suite) use against this stand-in.
	cat >"$dir/e2b.yaml" <<EOF
data_source:
  sandbox:
    type: e2b
    api_url: http://127.0.0.1:$port
    sandbox_url: http://127.0.0.1:$port
    retry_max_delay: 0.5
    # The conformance suite's files_read_cap reads a file at the cap and one byte past it.
    max_file_bytes: 1048576
    template_map:
      "python:3.12": py312
EOF
	;;
stop)
	if [ -f "$dir/pid" ]; then
		kill "$(cat "$dir/pid")" 2>/dev/null || true
		rm -f "$dir/pid"
	fi
	;;
*)
	echo "usage: standin.sh start|stop DIR [FAULTS]" >&2
	exit 2
	;;
esac
