#!/bin/sh
# make-image.sh IMAGE [SOCKET]: imports a root filesystem made of busybox-static and its applet
# links as IMAGE: into podman's storage, or with SOCKET through that engine's API
# (POST /images/create?fromSrc=-, what `docker import` sends). No registry, no network; takes
# about a second.
set -eu
image=$1
socket=${2:-}
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
if [ -z "$socket" ]; then
	podman import -q --change 'CMD ["/bin/sh"]' --change 'ENV PATH=/bin' "$tmp/root.tar" "$image" >/dev/null
	exit 0
fi
repo=${image%:*}
tag=${image##*:}
# changes: CMD ["/bin/sh"] and ENV PATH=/bin, URL-encoded.
out=$(curl -sS --unix-socket "$socket" -X POST -H 'Content-Type: application/x-tar' \
	--data-binary "@$tmp/root.tar" \
	"http://d/images/create?fromSrc=-&repo=$repo&tag=$tag&changes=CMD%20%5B%22%2Fbin%2Fsh%22%5D&changes=ENV%20PATH%3D%2Fbin")
case $out in
*'"status":"sha256:'*) ;;
*)
	echo "make-image: the engine on $socket did not import $image: $out" >&2
	exit 1
	;;
esac
