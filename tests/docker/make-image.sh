#!/bin/sh
# make-image.sh IMAGE [podman global flags...]: imports a root filesystem made of busybox-static
# and its applet links as IMAGE. No registry, no network; takes about a second.
set -eu
image=$1
shift
bb=$(command -v busybox-static 2>/dev/null || true)
[ -n "$bb" ] || bb=/bin/busybox
file_out=$(od -An -c -N 4 "$bb" | tr -d ' ')
[ "$file_out" = "177ELF" ] || { echo "make-image: $bb is not an ELF binary" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/root/bin" "$tmp/root/tmp" "$tmp/root/etc" "$tmp/root/proc" "$tmp/root/sys" \
	"$tmp/root/dev" "$tmp/root/root" "$tmp/root/work"
chmod 1777 "$tmp/root/tmp"
cp "$bb" "$tmp/root/bin/busybox"
for a in $("$bb" --list); do
	[ "$a" = busybox ] || ln -s busybox "$tmp/root/bin/$a"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' >"$tmp/root/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\n' >"$tmp/root/etc/group"
tar -C "$tmp/root" -cf "$tmp/root.tar" .
podman "$@" import -q --change 'CMD ["/bin/sh"]' --change 'ENV PATH=/bin' "$tmp/root.tar" "$image" >/dev/null
