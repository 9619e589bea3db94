"""Processes of this machine by their command line, read from /proc (the local backend's
commands are host processes). Not `ps`: under the sanitizer build it inherits an ASan
LD_PRELOAD and can hang."""
import os


def alive(marker):
    """Command lines (NUL as space) of the live processes whose argv[0] is `marker`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if cmd.split(" ", 1)[0] == marker:
            found.append(cmd)
    return found
