#!/usr/bin/env python3
"""Starts and stops the stand-in apiserver for CTest fixtures and test scripts.

  standin_ctl.py start DIR [standin options...]   returns once DIR/pid exists (server is up)
  standin_ctl.py stop DIR                         stops the server whose pid is in DIR/pid
"""
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def start(d, extra=()):
    """Starts a stand-in in a fresh DIR; returns its port."""
    stop(d)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    log = open(os.path.join(d, "standin.log"), "wb")
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "standin.py"), "--dir", d]
                         + list(extra), stdout=log, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    for _ in range(300):
        if os.path.exists(os.path.join(d, "pid")):
            # The server outlives this Popen object on purpose (stop() ends it by pid).
            p.returncode = 0
            with open(os.path.join(d, "port")) as f:
                return int(f.read())
        if p.poll() is not None:
            raise RuntimeError("stand-in exited with %d; see %s/standin.log" % (p.returncode, d))
        time.sleep(0.05)
    raise RuntimeError("stand-in did not start within 15 s; see %s/standin.log" % d)


def stop(d):
    pf = os.path.join(d, "pid")
    try:
        with open(pf) as f:
            pid = int(f.read())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            os.kill(pid, 0)
            time.sleep(0.05)
    except ProcessLookupError:
        pass
    try:
        os.unlink(pf)
    except OSError:
        pass


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "start":
        print(start(os.path.abspath(sys.argv[2]), sys.argv[3:]))
    elif len(sys.argv) == 3 and sys.argv[1] == "stop":
        stop(os.path.abspath(sys.argv[2]))
    else:
        sys.exit(__doc__)
