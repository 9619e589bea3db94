"""A conformance run on a level the machine cannot give is skipped (exit 77, which CTest
reports as skipped) with the plugin's reason, never passed: sbx_conformance (argv[1]) runs as
uid 65534 in a user namespace that forbids user namespaces below it, on `local`'s isolated
level. Needs root to map the two uids; otherwise it says so and exits 77 itself."""
import ctypes
import os
import sys
import time

CLONE_NEWUSER = 0x10000000
WANT = ("sbx_conformance: skipped (local:namespaces is not supported here: sbx runs as uid "
        "65534 and cannot make a user namespace: No space left on device (see "
        "/proc/sys/user/max_user_namespaces))\n")


def main():
    if os.geteuid() != 0:
        print("local_namespaces_level_skip: skipped (needs root to map uids in a user namespace)")
        return 77
    state = os.environ["SBX_STATE_DIR"]
    os.makedirs(state, exist_ok=True)
    os.chown(state, 65534, 65534)
    go_r, go_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(go_w)
        os.close(err_r)
        try:
            if ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWUSER) != 0:
                os._exit(2)
            os.read(go_r, 1)
            with open("/proc/sys/user/max_user_namespaces", "w") as f:
                f.write("0")
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            os.dup2(err_w, 2)
            os.execv(sys.argv[1], [sys.argv[1]])
        finally:
            os._exit(3)
    os.close(go_r)
    os.close(err_w)
    for name in ("uid_map", "gid_map"):
        for _ in range(5000):  # the child unshares on its own time
            try:
                fd = os.open("/proc/%d/%s" % (pid, name), os.O_WRONLY)
            except OSError:
                time.sleep(0.001)
                continue
            try:
                os.write(fd, b"0 0 1\n65534 65534 1\n")
                break
            except OSError:
                time.sleep(0.001)
            finally:
                os.close(fd)
        else:
            print("cannot write /proc/%d/%s" % (pid, name))
            return 1
    os.write(go_w, b"x")
    got = b""
    while True:
        chunk = os.read(err_r, 4096)
        if not chunk:
            break
        got += chunk
    _, st = os.waitpid(pid, 0)
    rc = os.waitstatus_to_exitcode(st)
    if (rc, got.decode()) != (77, WANT):
        print("want exit 77 and %r\n got exit %d and %r" % (WANT, rc, got.decode()))
        return 1
    print("ok: exit 77, " + WANT, end="")
    return 0


sys.exit(main())
