#!/bin/sh
# deb.sh SOURCE_DIR WORK_DIR: the Debian packages' build-install-use cycle.
#   1. dpkg-buildpackage -b on a copy of the tracked files of SOURCE_DIR;
#   2. lintian on the result: any error or warning fails;
#   3. a clean Debian 12 root made by mmdebstrap from Debian's mirror, into which apt installs
#      the built packages (so their dependencies are what apt resolves, nothing of this
#      machine) and a compiler;
#   4. inside that root, from the installed files only: plugins/custom built against
#      libsbx-dev through plain pkg-config and through the CMake package, selected by a
#      registry.d drop-in; every backend plugin loads; the main job (the example rollout on
#      `local`); python3-sbx finds libsbx by itself; man pages and bash completion are there.
# Prints the time of each step. Needs root (chroot) and Debian's mirror; SBX_DEB_MIRROR
# overrides the mirror, SBX_DEB_CACHE the folder that keeps Debian's .debs between runs
# (/var/cache/sbx-deb).
set -eu
src=$(cd "$1" && pwd)
# WORK_DIR made absolute: the build runs in a folder beneath it.
mkdir -p "$2"
work=$(cd "$2" && pwd)
mirror=${SBX_DEB_MIRROR:-http://deb.debian.org/debian}
cache=${SBX_DEB_CACHE:-/var/cache/sbx-deb}
root=$work/root

fail() {
	echo "deb: FAIL: $*" >&2
	exit 1
}
step() {
	now=$(date +%s)
	[ -z "${t0:-}" ] || echo "deb: $last took $((now - t0)) s"
	t0=$now
	last=$1
	[ "$1" = done ] || echo "deb: $1"
}
cleanup() {
	if [ -d "$root/proc" ] && mountpoint -q "$root/proc"; then
		umount "$root/proc" || umount -l "$root/proc"
	fi
}
trap cleanup EXIT INT TERM

cleanup
rm -rf "$work"
mkdir -p "$work/sbx-0.1.0"

step "build: dpkg-buildpackage"
# The tracked files as they are now (a file deleted in the work tree is skipped).
(cd "$src" && git ls-files) | while IFS= read -r f; do
	if [ -e "$src/$f" ]; then printf '%s\n' "$f"; fi
done >"$work/files"
tar -C "$src" -cf - -T "$work/files" | tar -C "$work/sbx-0.1.0" -xf -
# No -dbgsym packages: nothing here uses them, and they would double what lintian reads.
(cd "$work/sbx-0.1.0" && DEB_BUILD_OPTIONS=noddebs dpkg-buildpackage -us -uc -b -j"$(nproc)" \
	>"$work/build.log" 2>&1) ||
	{ tail -40 "$work/build.log" >&2; fail "dpkg-buildpackage failed (log: $work/build.log)"; }
ls "$work"/*.deb

step "lintian"
changes=$(ls "$work"/sbx_*.changes)
if ! lintian --fail-on error,warning --tag-display-limit 0 "$changes" >"$work/lintian.log" 2>&1; then
	cat "$work/lintian.log" >&2
	fail "lintian found errors or warnings"
fi
echo "deb: lintian: $(grep -c . "$work/lintian.log" || true) lines (errors and warnings: none)"
cat "$work/lintian.log"

step "clean root: mmdebstrap and apt-get install of the packages"
# One --include per .deb (mmdebstrap takes a path only as a whole argument).
# apt reads them outside the root and dpkg inside it, so they are copied in at the same path
# for the install, and removed after.
debdir=$work/debs
mkdir -p "$debdir"
mv "$work"/*.deb "$debdir/"
set --
for d in "$debdir"/*.deb; do set -- "$@" --include="$d"; done
# Debian's packages are kept between runs in $cache (apt still checks them against the
# mirror's signed indices); sbx's own are taken out before they could be kept.
mkdir -p "$cache"
mmdebstrap --quiet --variant=apt --hook-directory=/usr/share/mmdebstrap/hooks/eatmydata \
	--skip=essential/unlink \
	--setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
	--setup-hook="sync-in $cache /var/cache/apt/archives/" \
	--setup-hook="mkdir -p \"\$1$debdir\" && cp \"$debdir\"/*.deb \"\$1$debdir/\"" \
	--customize-hook='rm -f "$1"/var/cache/apt/archives/*sbx*.deb' \
	--customize-hook="sync-out /var/cache/apt/archives $cache" \
	--customize-hook="rm -r \"\$1$debdir\"" \
	"$@" --include=gcc,libc6-dev,make,pkg-config,cmake \
	bookworm "$root" "$mirror" >"$work/root.log" 2>&1 ||
	{ tail -30 "$work/root.log" >&2; fail "mmdebstrap failed (log: $work/root.log)"; }
mount -t proc proc "$root/proc"

step "use: the installed files only"
mkdir -p "$root/srv/sbx"
cp -r "$src/plugins/custom" "$root/srv/sbx/custom-src"
cp -r "$src/examples" "$root/srv/sbx/examples"
cp "$src/tests/packaging/inside.sh" "$root/srv/sbx/inside.sh"
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
	sh /srv/sbx/inside.sh || fail "the checks inside the clean root failed"

step done
echo "deb: build, lintian, install and use passed"
