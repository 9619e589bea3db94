#!/bin/sh
# engine.sh start|stop DIR IMAGE: the Podman service the docker tests talk to.
#   start: writes a private containers.conf, imports IMAGE if podman's storage lacks it, starts
#          `podman system service` on DIR/podman.sock, waits until /_ping answers.
#   stop:  kills that service by the pid start recorded.
# DIR must be short (Podman refuses long run roots; the socket path has a 108-byte limit).
set -eu
cmd=$1
dir=$2
image=${3:-localhost/sbx-busybox:latest}
here=$(cd "$(dirname "$0")" && pwd)
export CONTAINERS_CONF="$dir/containers.conf"

stop() {
	[ -f "$dir/pid" ] || return 0
	pid=$(cat "$dir/pid")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$dir/pid"
}

case $cmd in
start)
	mkdir -p "$dir"
	stop
	cat >"$CONTAINERS_CONF" <<'CONF'
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
	podman image exists "$image" 2>/dev/null || sh "$here/make-image.sh" "$image"
	rm -f "$dir/podman.sock"
	podman system service --time=0 "unix://$dir/podman.sock" >"$dir/service.log" 2>&1 &
	echo $! >"$dir/pid"
	i=0
	while [ $i -lt 200 ]; do
		if curl -sf --unix-socket "$dir/podman.sock" http://d/_ping >/dev/null 2>&1; then
			exit 0
		fi
		kill -0 "$(cat "$dir/pid")" 2>/dev/null || break
		sleep 0.1
		i=$((i + 1))
	done
	echo "engine.sh: podman service did not answer on $dir/podman.sock; log:" >&2
	cat "$dir/service.log" >&2
	stop
	exit 1
	;;
stop)
	# Containers a failed test left behind (the tests label theirs sbx.owner=docker-test).
	podman ps -aq --filter label=sbx.owner=docker-test 2>/dev/null | while read -r c; do
		podman rm -f "$c" >/dev/null 2>&1 || true
	done
	stop
	;;
*)
	echo "usage: engine.sh start|stop DIR [IMAGE]" >&2
	exit 2
	;;
esac
