#!/bin/sh
# make-archives.sh OUT: what the image cases of test_isolation read.
#   OUT/images/   busybox saved by Podman as a docker-archive and as an OCI archive (the same
#                 image: localhost/sbx-local-busybox:latest), when podman is here;
#   OUT/rootdir/  a busybox root folder, for `rootfs: DIR`;
#   OUT/hostile/  archives made by make_archives.py (whiteouts, members that try to escape);
#   OUT/target/   the host folder the hostile archives aim at, holding one file, victim.
set -eu
out=$1
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$out"
mkdir -p "$out/images" "$out/hostile" "$out/target" "$out/rootdir/bin" "$out/rootdir/etc"
echo victim >"$out/target/victim"
python3 "$here/make_archives.py" "$out/hostile" "$out/target"
bb=$(command -v busybox-static 2>/dev/null || true)
[ -n "$bb" ] || bb=/bin/busybox
cp "$bb" "$out/rootdir/bin/busybox"
for a in sh ls cat echo touch id; do ln -s busybox "$out/rootdir/bin/$a"; done
echo rootdir >"$out/rootdir/etc/hostname"
command -v podman >/dev/null || exit 0
image=localhost/sbx-local-busybox:latest
podman image exists "$image" 2>/dev/null || sh "$here/../docker/make-image.sh" "$image"
podman save -q --format docker-archive -o "$out/images/busybox-docker.tar" "$image"
podman save -q --format oci-archive -o "$out/images/busybox-oci.tar" "$image"
