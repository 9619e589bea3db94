#!/bin/sh
# Run by deb.sh inside the clean root, where only Debian's packages and sbx's own .debs are
# installed: everything below uses the installed files, never the source tree's build.
set -eu
work=/srv/sbx
export SBX_STATE_DIR=$work/state
fail() {
	echo "inside: FAIL: $*" >&2
	exit 1
}

# The out-of-tree plugin example against libsbx-dev: plain pkg-config (no --define-prefix),
# then the CMake package.
[ "$(pkg-config --modversion sbx)" = 0.1.0 ] || fail "pkg-config sbx: $(pkg-config --modversion sbx)"
cflags=$(pkg-config --cflags --libs sbx)
make -s -C "$work/custom-src" >/dev/null || fail "make with pkg-config ($cflags) failed"
cmake -S "$work/custom-src" -B "$work/custom-cmake" >/dev/null || fail "cmake find_package(Sbx) failed"
cmake --build "$work/custom-cmake" >/dev/null || fail "the CMake package build failed"
for so in "$work/custom-src/sbx-custom.so" "$work/custom-cmake/sbx-custom.so"; do
	[ -f "$so" ] || fail "no $so"
done
printf 'custom:\n  path: %s\n' "$work/custom-cmake/sbx-custom.so" >/etc/sbx/registry.d/custom.yaml

# Every packaged backend loads from its own package, beside the third-party one, at the ABI
# of the installed headers.
version_h=/usr/include/sbx/version.h # libsbx-dev's
abi=$(sed -n 's/^#define SBX_ABI_MAJOR \([0-9]*\)$/\1/p' "$version_h").$(
	sed -n 's/^#define SBX_ABI_MINOR \([0-9]*\)$/\1/p' "$version_h")
printf '%s\n' "$abi" | grep -qx '[0-9][0-9]*\.[0-9][0-9]*' || fail "no ABI in $version_h: '$abi'"
listing=$(sbx plugins)
for a in local docker e2b k8s custom; do
	printf '%s\n' "$listing" | grep -q "^$a  *loaded  *${abi%.*}\\.${abi#*.} " ||
		fail "sbx plugins: $a (ABI $abi): $listing"
done

# The main job, as scripts/main.sh runs it, from the installed sbx.
sbx rollout --config "$work/examples/local.yaml" --output "$work/results.jsonl" \
	"$work/examples/tasks.jsonl" >"$work/rollout.out" || fail "rollout: $(cat "$work/rollout.out")"
want=$(grep -c . "$work/examples/tasks.jsonl")
got=$(grep -c . "$work/results.jsonl")
[ "$got" = "$want" ] || fail "rollout wrote $got results for $want tasks"

# The third-party plugin, selected by alias.
mkdir -p "$work/sandboxes"
printf 'data_source:\n  sandbox:\n    type: custom\n    root: %s\n' "$work/sandboxes" >"$work/custom.yaml"
id=$(sbx create --config "$work/custom.yaml")
case $id in custom:*) ;; *) fail "create printed '$id'" ;; esac
[ "$(sbx exec --config "$work/custom.yaml" "$id" -c 'echo from-the-package')" = from-the-package ] ||
	fail "exec on custom"
sbx rm --config "$work/custom.yaml" "$id"

# python3-sbx finds the installed libsbx by itself.
env -u SBX_LIBRARY python3 - <<'PY' || fail "python3-sbx"
import sbx
with sbx.Host() as h:
    sid = h.create()
    try:
        r = h.exec(sid, "echo from-python")
        assert r.exit_code == 0 and r.stdout == "from-python\n", (r.exit_code, r.stdout)
    finally:
        h.destroy(sid)
print("python3-sbx: ok")
PY

# Manual pages and bash completion.
for m in /usr/share/man/man1/sbx.1.gz /usr/share/man/man5/sbx-config.5.gz \
	/usr/share/man/man7/sbx-plugin.7.gz; do
	[ -f "$m" ] || fail "no $m"
done
[ -f /usr/share/bash-completion/completions/sbx ] || fail "no bash completion"
echo "inside: plugins, rollout, custom plugin, python3-sbx, man pages and completion ok"
