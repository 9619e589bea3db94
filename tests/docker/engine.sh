#!/bin/sh
# engine.sh start|stop ENGINE DIR [IMAGE]: the engine the docker tests talk to, on the private
# socket DIR/engine.sock. ENGINE is
#   podman   `podman system service` with a private containers.conf, podman's own storage;
#   dockerd  Docker Engine (Debian's docker.io) with its data root, exec root (and the
#            containerd it starts) under DIR, no iptables rules and no bridge.
#   start: starts it, waits until /_ping answers, imports IMAGE if the engine lacks it.
#   stop:  removes the containers the tests of this build tree left (labels
#          sbx.owner=docker-test and sbx.test-tree=$SBX_TEST_TREE), then stops the engine by
#          the pid start recorded.
# DIR must be short (Podman refuses long run roots; a socket path has a 108-byte limit).
set -eu
cmd=$1
engine=$2
dir=$3
image=${4:-localhost/sbx-busybox:latest}
here=$(cd "$(dirname "$0")" && pwd)
sock=$dir/engine.sock
export CONTAINERS_CONF="$dir/containers.conf"

api() {
	curl -sS --max-time 60 --unix-socket "$sock" "$@"
}

kill_pid() { # kill_pid PIDFILE SECONDS: TERM, then KILL after SECONDS
	[ -f "$1" ] || return 0
	pid=$(cat "$1")
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt $(($2 * 10)) ]; do
			sleep 0.1
			i=$((i + 1))
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$1"
}

stop() {
	kill_pid "$dir/pid" 20
	# dockerd stops the containerd it started; after a KILL that one is left alone.
	kill_pid "$dir/exec/containerd/containerd.pid" 5
}

remove_test_containers() {
	[ -S "$sock" ] || return 0
	# Only this build tree's (label sbx.test-tree): other trees may be testing on the same
	# Podman storage right now.
	[ -n "${SBX_TEST_TREE:-}" ] || return 0
	f="%7B%22label%22%3A%5B%22sbx.owner%3Ddocker-test%22%2C%22sbx.test-tree%3D$SBX_TEST_TREE%22%5D%7D"
	ids=$(api "http://d/containers/json?all=1&filters=$f" 2>/dev/null |
		tr ',' '\n' | sed -n 's/^.*"Id":"\([0-9a-f]*\)".*$/\1/p') || true
	for c in $ids; do
		api -X DELETE -o /dev/null "http://d/containers/$c?force=1" || true
	done
}

case $cmd in
start)
	mkdir -p "$dir"
	stop
	rm -f "$sock"
	case $engine in
	podman)
		cat >"$CONTAINERS_CONF" <<'CONF'
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
		podman system service --time=0 "unix://$sock" >"$dir/engine.log" 2>&1 &
		echo $! >"$dir/pid"
		;;
	dockerd)
		# An empty config file: the machine's /etc/docker/daemon.json is not ours to use.
		echo '{}' >"$dir/daemon.json"
		dockerd --config-file "$dir/daemon.json" --host "unix://$sock" \
			--data-root "$dir/data" --exec-root "$dir/exec" --pidfile "$dir/dockerd.pid" \
			--iptables=false --ip6tables=false --bridge=none >"$dir/engine.log" 2>&1 &
		echo $! >"$dir/pid"
		;;
	*)
		echo "engine.sh: unknown engine '$engine' (podman or dockerd)" >&2
		exit 2
		;;
	esac
	i=0
	until curl -sf --max-time 5 --unix-socket "$sock" http://d/_ping >/dev/null 2>&1; do
		if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null || [ $i -ge 600 ]; then
			echo "engine.sh: $engine did not answer on $sock; log:" >&2
			tail -n 30 "$dir/engine.log" >&2
			stop
			exit 1
		fi
		sleep 0.1
		i=$((i + 1))
	done
	code=$(api -o /dev/null -w '%{http_code}' "http://d/images/$image/json")
	if [ "$code" != 200 ]; then
		if [ "$engine" = podman ]; then
			sh "$here/make-image.sh" "$image"
		else
			sh "$here/make-image.sh" "$image" "$sock"
		fi
	fi
	;;
stop)
	remove_test_containers
	stop
	;;
*)
	echo "usage: engine.sh start|stop podman|dockerd DIR [IMAGE]" >&2
	exit 2
	;;
esac
