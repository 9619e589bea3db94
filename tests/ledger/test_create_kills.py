"""200 SIGKILLs of `sbx create` at random moments, then one `sbx gc`: no sandbox folder, no
cgroup and no live ledger row is left. The creates name an owner process (killed before the
gc), so the sandboxes that did get made are the dead owner's to reap."""
import os
import random
import signal
import sqlite3
import subprocess
import time
import unittest

from sbxtest import SbxCase, SBX

KILLS = int(os.environ.get("CREATE_KILLS", "200"))
MOUNTS = ["/sys/fs/cgroup/sbx", "/sys/fs/cgroup/unified/sbx", "/sys/fs/cgroup/freezer/sbx"]


def namespace(root):
    h = 14695981039346656037
    for c in os.path.realpath(root).encode():
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "r-%016x" % h


class CreateKills(SbxCase):
    def test_sigkilled_creates_leave_nothing_after_one_gc(self):
        owner = subprocess.Popen(["sleep", "600"])
        rnd = random.Random(14)
        # How long one create takes here, so the kills land all over it.
        t0 = time.monotonic()
        self.ok("create", "--owner-pid", str(owner.pid))
        span = max(time.monotonic() - t0, 0.02) * 1.2
        for _ in range(KILLS):
            p = subprocess.Popen([SBX, "--config", self.cfg, "create", "--owner-pid",
                                  str(owner.pid)], env=self.env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            time.sleep(rnd.uniform(0, span))
            p.send_signal(signal.SIGKILL)
            p.wait()
        owner.kill()
        owner.wait()
        with sqlite3.connect(os.path.join(self.state, "ledger.db"), timeout=30) as db:
            states = dict(db.execute("SELECT state, COUNT(*) FROM sandboxes GROUP BY state"))
        print("ledger states after the kills:", states)
        # The kills landed at every stage: some creates finished, some never wrote a row.
        self.assertGreater(sum(states.values()), 1, states)
        self.ok("gc")
        self.assertEqual(self.sandbox_dirs(), [], "sandbox folders (or staging) left")
        for m in MOUNTS:
            ns = os.path.join(m, namespace(self.root))
            if os.path.isdir(ns):
                self.assertEqual([d for d in os.listdir(ns)
                                  if os.path.isdir(os.path.join(ns, d))], [],
                                 "cgroups left in " + ns)
        with sqlite3.connect(os.path.join(self.state, "ledger.db"), timeout=30) as db:
            live = db.execute("SELECT token, id, state FROM sandboxes WHERE state IN"
                              " ('creating', 'running', 'paused', 'deleting')").fetchall()
        self.assertEqual(live, [])


if __name__ == "__main__":
    unittest.main()
