#!/bin/sh
# Installs the Debian 12 packages sbx builds and tests with. Idempotent: a package already
# present is skipped by apt, so running it on every CI start costs a few seconds.
set -eu
pkgs="build-essential cmake pkg-config clang-format clang libclang-rt-14-dev git ca-certificates curl openssl
libyaml-dev libjansson-dev libcurl4-openssl-dev libsqlite3-dev libarchive-dev libssl-dev
libcriterion-dev podman runc busybox-static uidmap slirp4netns fuse-overlayfs
bubblewrap musl-tools docker.io python3 python3-venv python3-pip python3-setuptools
dpkg-dev debhelper dh-python lintian mmdebstrap"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
	SUDO=""
	[ "$(id -u)" = 0 ] || SUDO=sudo
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	# shellcheck disable=SC2086
	$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
# Node.js 20 and npm (for the E2B SDK conformance test) come with these machines, not from
# Debian, whose nodejs conflicts with them; only say so when they are missing.
command -v node >/dev/null && command -v npm >/dev/null || echo "install-deps: node and npm are needed for the e2b SDK test" >&2
