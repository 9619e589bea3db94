#!/bin/sh
# usage: third_party_plugin.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -eu
build=$1 src=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

cmake --install "$build" --prefix "$work/first" >/dev/null
for f in include/sbx/plugin.h include/sbx/host.h include/sbx/support/http.h lib/libsbx-support.a \
	lib/pkgconfig/sbx-support.pc bin/sbx share/sbx/plugin.map; do
	[ -e "$work/first/$f" ] || fail "install did not put $f in the prefix"
done
# Relocatable: moved after installing (to neither the configured nor the install prefix),
# everything still resolves relative to the package files themselves.
mv "$work/first" "$prefix"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pc_prefix=$(cd "$(pkg-config --variable=prefix sbx)" && pwd -P)
[ "$pc_prefix" = "$(cd "$prefix" && pwd -P)" ] || fail "sbx.pc prefix is $pc_prefix, not $prefix"
for v in includedir libdir plugindir pluginmap registrydir; do
	p=$(pkg-config --variable=$v sbx)
	[ -e "$p" ] || fail "sbx.pc $v=$p does not exist"
done
p=$(pkg-config --variable=libdir sbx-support)
[ -e "$p/libsbx-support.a" ] || fail "sbx-support.pc libdir=$p holds no libsbx-support.a"
cflags=$(pkg-config --cflags --libs sbx)
printf '#include <sbx/plugin.h>\nint main(void) { return SBX_ABI_MAJOR == 1 ? 0 : 1; }\n' >"$work/probe.c"
# shellcheck disable=SC2086
cc -o "$work/probe" "$work/probe.c" $cflags -Wl,-rpath,"$prefix/lib" || fail "cc with '$cflags' failed"
"$work/probe" || fail "probe built against the moved prefix did not run"

# 1. Through the CMake package, from a copy of the plugin's folder (nothing of the tree).
cp -r "$src/plugins/custom" "$work/custom-src"
cmake -S "$work/custom-src" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake-build" >/dev/null
[ -f "$work/cmake-build/sbx-custom.so" ] || fail "CMake package build made no sbx-custom.so"

# 2. Through plain pkg-config (no --define-prefix: the .pc file is relocatable).
make -s -C "$work/custom-src" >/dev/null
[ -f "$work/custom-src/sbx-custom.so" ] || fail "pkg-config build made no sbx-custom.so"

# Only sbx_plugin_register may be exported (the support library's symbols stay hidden), and
# a plugin never links against the host's library.
for so in "$work/cmake-build/sbx-custom.so" "$work/custom-src/sbx-custom.so"; do
	exported=$(nm -D --defined-only "$so" | awk '$2 == "T" {print $3}')
	[ "$exported" = "sbx_plugin_register" ] || fail "$so exports: $exported"
	nm "$so" | grep -q ' t sbxs_host_set$' || fail "$so does not hold the support library"
	! readelf -d "$so" | grep -q 'NEEDED.*libsbx\.so' || fail "$so links libsbx"
done

# The relocated install finds its own registry beside its library, not the configured prefix's.
# The ABI the installed headers speak, which the plugin was built against.
abi=$(sed -n 's/^#define SBX_ABI_MAJOR \([0-9]*\)$/\1/p' "$prefix/include/sbx/version.h").$(
	sed -n 's/^#define SBX_ABI_MINOR \([0-9]*\)$/\1/p' "$prefix/include/sbx/version.h")
printf '%s\n' "$abi" | grep -qx '[0-9][0-9]*\.[0-9][0-9]*' || fail "no ABI in version.h: '$abi'"
listing=$(env -u SBX_REGISTRY "$prefix/bin/sbx" plugins)
printf '%s\n' "$listing" | grep -q "^custom  *loaded  *${abi%.*}\\.${abi#*.} " ||
	fail "installed sbx plugins (ABI $abi): $listing"

cat >"$work/config.yaml" <<CFG
data_source:
  sandbox:
    type: custom
    root: $work/sandboxes
CFG
mkdir -p "$work/sandboxes"
for so in "$work/cmake-build/sbx-custom.so" "$work/custom-src/sbx-custom.so"; do
	reg=$work/registry-$(basename "$(dirname "$so")")
	mkdir -p "$reg/registry.d"
	printf 'local:\n  path: %s\n' "$prefix/lib/sbx/plugins/sbx-local.so" >"$reg/registry.yaml"
	printf '# dropped in by a third party\ncustom:\n  path: %s\n' "$so" >"$reg/registry.d/custom.yaml"
	export SBX_REGISTRY="$reg/registry.yaml"
	id=$("$prefix/bin/sbx" create --config "$work/config.yaml")
	case $id in custom:*) ;; *) fail "create printed '$id', expected custom:<id>" ;; esac
	out=$("$prefix/bin/sbx" exec --config "$work/config.yaml" "$id" -c 'echo third-party; pwd')
	[ "$out" = "third-party
$work/sandboxes/${id#custom:}" ] || fail "exec printed '$out'"
	set +e
	"$prefix/bin/sbx" exec --config "$work/config.yaml" "$id" -- sh -c 'exit 7'
	rc=$?
	set -e
	[ "$rc" = 7 ] || fail "exec exit status $rc, expected 7"
	"$prefix/bin/sbx" rm --config "$work/config.yaml" "$id"
	[ ! -e "$work/sandboxes/${id#custom:}" ] || fail "rm left the sandbox directory"
done

# `pip install bindings/python` into a virtual environment whose prefix holds the install:
# the package finds that libsbx (and its registry) by itself, without $SBX_LIBRARY. Debian's
# python3, whose setuptools builds the package offline.
/usr/bin/python3 -m venv --system-site-packages "$work/venv" || fail "python3 -m venv failed"
cmake --install "$build" --prefix "$work/venv" >/dev/null
# From a copy: setuptools writes build/ and *.egg-info beside the sources.
cp -r "$src/bindings/python" "$work/python-src"
"$work/venv/bin/python" -m pip install -q --no-build-isolation --no-index "$work/python-src" ||
	fail "pip install bindings/python failed"
out=$(cd "$work" && env -u SBX_LIBRARY -u PYTHONPATH -u SBX_REGISTRY -u SBX_PREFIX \
	LD_PRELOAD="${SBX_PY_PRELOAD:-}" ASAN_OPTIONS=detect_leaks=0 SBX_STATE_DIR="$work/state-pip" \
	"$work/venv/bin/python" -c '
import sbx
with sbx.Host({"data_source": {"sandbox": {"type": "local"}}}) as h:
    sid = h.create()
    try:
        print(h.exec(sid, "echo from-pip").stdout, end="")
    finally:
        h.destroy(sid)
libs = {l.split()[-1] for l in open("/proc/self/maps") if "/libsbx.so" in l}
print(sbx.__file__, *sorted(libs))
') || fail "the pip-installed package: $out"
site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
[ "$out" = "from-pip
$site/sbx/__init__.py $work/venv/lib/libsbx.so.0.1.0" ] || fail "the pip-installed package printed '$out'"

# The uninstall target takes a fresh install back: no file left, nor sbx's own folders, and a
# file of someone else's in a shared folder stays.
mkdir -p "$work/second/bin"
echo theirs >"$work/second/bin/theirs"
cmake --install "$build" --prefix "$work/second" >/dev/null
[ -x "$work/second/bin/sbx" ] || fail "the second install put no bin/sbx"
cmake --build "$build" --target uninstall >/dev/null
left=$(cd "$work/second" && find . ! -type d)
[ "$left" = ./bin/theirs ] || fail "uninstall left: $left"
for d in include/sbx lib/sbx lib/cmake/Sbx share/sbx etc/sbx; do
	[ ! -e "$work/second/$d" ] || fail "uninstall left the folder $d"
done
echo "third-party plugin: built both ways, selected by alias, create/exec/rm ok, pip-installed python ok, uninstalled"
