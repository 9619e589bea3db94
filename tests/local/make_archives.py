#!/usr/bin/env python3
"""make_archives.py OUT: image archives in the docker-archive layout (`docker save`) for the
image tests of the isolated level: a legitimate one whose layers use whiteouts, and hostile
ones whose layers try to write outside the root they are unpacked into. Every digest in them
is right, so what an import refuses is the member, not a checksum."""
import hashlib
import io
import json
import sys
import tarfile


def member(tar, name, data=b"", kind=tarfile.REGTYPE, link="", mode=0o644):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.mode = mode
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def layer(entries):
    """entries: (name, data, kind, link) tuples -> the bytes of a tar layer."""
    buf = io.BytesIO()
    # GNU format keeps names exactly as given (a leading "/" included).
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for e in entries:
            member(tar, *e)
    return buf.getvalue()


def archive(path, layers, tag, bad_diff_id=False):
    blobs = [layer(entries) for entries in layers]
    diff_ids = ["sha256:" + hashlib.sha256(b).hexdigest() for b in blobs]
    if bad_diff_id:
        diff_ids[-1] = "sha256:" + "0" * 64
    config = json.dumps({
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": ["PATH=/bin", "FROM_IMAGE=" + tag]},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    names = [hashlib.sha256(b).hexdigest() + ".tar" for b in blobs]
    manifest = json.dumps([{"Config": config_name, "RepoTags": [tag], "Layers": names}])
    with tarfile.open(path, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in zip(names, blobs):
            member(tar, name, data)
        member(tar, config_name, config)
        member(tar, "manifest.json", manifest.encode())


def main(out, target):
    d = tarfile.DIRTYPE
    sym = tarfile.SYMTYPE
    hard = tarfile.LNKTYPE
    base = [("etc", b"", d, ""), ("etc/hostname", b"img\n", tarfile.REGTYPE, "")]
    # Whiteouts: b goes, a keeps only what the upper layer wrote, c/keep goes.
    archive(f"{out}/whiteouts.tar", [
        base + [("a", b"", d, ""), ("a/x", b"x"), ("a/y", b"y"), ("b", b"", d, ""),
                ("b/z", b"z"), ("c", b"", d, ""), ("c/keep", b"k"), ("c/stay", b"s"),
                ("f", b"file"), ("g", b"", d, ""), ("g/old", b"o")],
        [("a", b"", d, ""), ("a/new", b"n"), ("a/.wh..wh..opq", b""), (".wh.b", b""),
         ("c/.wh.keep", b""), ("f", b"", d, ""), ("f/inside", b"i"), ("g", b"new file")],
    ], "sbx-test/whiteouts:1")
    hostile = {
        "dotdot": [base + [("../../sbx-escape-dotdot", b"x")]],
        "absolute": [base + [(f"{target}/absolute", b"x")]],
        "symlink": [base + [("evil", b"", sym, target)], [("evil/symlink", b"x")]],
        "symlink-parent": [base + [("evil", b"", sym, target), ("evil/same-layer", b"x")]],
        "hardlink": [base + [("h", b"", hard, "/etc/passwd")]],
        "hardlink-dotdot": [base + [("h", b"", hard, "../../../../etc/passwd")]],
        "whiteout-symlink": [base + [("lnk", b"", sym, target)], [("lnk/.wh.victim", b"")]],
        "opaque-symlink": [base + [("lnk", b"", sym, target)], [("lnk/.wh..wh..opq", b"")]],
    }
    for name, layers in hostile.items():
        archive(f"{out}/{name}.tar", layers, f"sbx-test/{name}:1")
    archive(f"{out}/bad-digest.tar", [base], "sbx-test/bad-digest:1", bad_diff_id=True)
    with open(f"{out}/not-an-archive.tar", "w") as f:
        f.write("just text\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
