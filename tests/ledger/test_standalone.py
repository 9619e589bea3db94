"""Ids that stand alone: a sandbox created with a non-default config (here a local root
other than the state dir's) is reached by id alone from a process that has no config at all,
because the plugin's non-secret config is recorded with its ledger row at create."""
import json
import os
import sqlite3
import subprocess
import time
import unittest

from sbxtest import SbxCase, SBX


class Standalone(SbxCase):
    def bare(self, *args, stdin=None):
        """`sbx` with no --config and no SBX_CONFIG: the built-in default (local, default
        root under the state dir)."""
        p = subprocess.run([SBX] + list(args), env=self.env, input=stdin,
                           capture_output=True, timeout=120)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    def bare_ok(self, *args, stdin=None):
        rc, out, err = self.bare(*args, stdin=stdin)
        self.assertEqual(rc, 0, "sbx %s: %s" % (" ".join(args), err))
        return out

    def recorded(self, sid):
        with sqlite3.connect(os.path.join(self.state, "ledger.db"), timeout=30) as db:
            return db.execute("SELECT config FROM sandboxes WHERE id = ?", (sid,)).fetchone()[0]

    def test_a_sandbox_of_a_non_default_root_is_used_and_removed_by_id_alone(self):
        sid = self.ok("create").strip()
        self.assertEqual(json.loads(self.recorded(sid)), {"root": self.root})
        folder = os.path.join(self.root, self.backend(sid))
        self.assertTrue(os.path.isdir(folder))
        self.assertEqual(self.bare_ok("exec", sid, "--", "sh", "-c", "echo hi > f; pwd"),
                         os.path.join(folder, "work") + "\n")
        self.assertEqual(self.bare_ok("file", "read", sid, "f"), "hi\n")
        self.bare_ok("pause", sid)
        self.assertEqual(self.bare_ok("status", sid).strip(), "paused")
        self.bare_ok("resume", sid)
        self.assertEqual(self.bare_ok("status", sid).strip(), "running")
        self.bare_ok("rm", sid)
        self.assertFalse(os.path.exists(folder))
        self.assertEqual(self.bare("exec", sid, "--", "true")[0], 125)
        # The default root was never used for it.
        default = os.path.join(self.state, "local")
        self.assertEqual([d for d in os.listdir(default) if not d.startswith(".")]
                         if os.path.isdir(default) else [], [])

    def test_gc_by_id_alone_reaps_an_expired_sandbox_of_a_non_default_root(self):
        sid = self.ok("create", "--ttl", "1").strip()
        keep = self.ok("create").strip()
        time.sleep(2.1)
        out = self.bare_ok("gc", "--json")
        mine = [e for e in json.loads(out) if e["id"] == sid]
        self.assertEqual([(e["action"], e["reason"], e["status"]) for e in mine],
                         [("deleted", "ttl expired", "SBX_OK")])
        self.assertEqual(self.sandbox_dirs(), [self.backend(keep)])
        self.bare_ok("rm", keep)
        self.assertEqual(self.sandbox_dirs(), [])


if __name__ == "__main__":
    unittest.main()
