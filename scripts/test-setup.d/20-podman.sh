#!/bin/sh
# Podman for the docker backend's tests: an engine configuration these VMs can run (crun fails
# on their hybrid cgroups, there is no systemd journal) and a small local image built from
# busybox-static with no registry. Idempotent: a rerun finds both in place and does nothing.
set -eu
image=localhost/sbx-busybox:latest
command -v podman >/dev/null || { echo "20-podman: podman is not installed" >&2; exit 1; }

# The engine settings. A config someone else wrote is left alone; the test fixture passes its
# own private CONTAINERS_CONF anyway, so this only helps podman run by hand.
if [ "$(id -u)" = 0 ] && [ ! -e /etc/containers/containers.conf ]; then
	mkdir -p /etc/containers
	cat >/etc/containers/containers.conf <<'CONF'
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
fi

# The image, in podman's default storage (where the fixture's service looks).
podman image exists "$image" 2>/dev/null && exit 0
sh "$(dirname "$0")/../../tests/docker/make-image.sh" "$image"
