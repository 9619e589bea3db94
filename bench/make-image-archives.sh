#!/bin/sh
# make-image-archives.sh OUT: the image archives bench_isolation imports, made outside the
# repository: OUT/busybox.tar (busybox-static, tests/docker/make-image.sh) and OUT/debian.tar
# (Debian 12 minbase from debootstrap, a few minutes and ~200 MiB), both saved by Podman as
# docker-archives. Needs root (debootstrap) and Debian's mirror.
set -eu
out=$1
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
command -v debootstrap >/dev/null || apt-get install -y -qq --no-install-recommends debootstrap
bb=localhost/sbx-bench-busybox:latest
deb=localhost/sbx-bench-debian:bookworm
podman image exists "$bb" || sh "$here/../tests/docker/make-image.sh" "$bb"
if ! podman image exists "$deb"; then
	root=$(mktemp -d)
	trap 'rm -rf "$root"' EXIT
	debootstrap --variant=minbase bookworm "$root/root" http://deb.debian.org/debian >"$root/log"
	tar -C "$root/root" -cf "$root/root.tar" .
	podman import -q --change 'CMD ["/bin/bash"]' \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		"$root/root.tar" "$deb" >/dev/null
fi
rm -f "$out/busybox.tar" "$out/debian.tar"
podman save -q --format docker-archive -o "$out/busybox.tar" "$bb"
podman save -q --format docker-archive -o "$out/debian.tar" "$deb"
