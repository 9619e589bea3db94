"""Sessions survive the process that started them: a second process reconnects to the same
sandbox and sees its files; a sandbox removed behind the session's back is replaced by a new
one with the assets uploaded again; concurrent starts agree on one sandbox; no secret lands in
the ledger."""
import json
import os
import shutil
import unittest

from sbxtest import SbxCase

SESSION = ["--user", "alice", "--session", "s1"]


class Sessions(SbxCase):
    def start(self, *extra):
        return json.loads(self.ok("session", "start", *SESSION, *extra, "--json"))

    def show(self):
        return json.loads(self.ok("session", "show", *SESSION, "--json"))

    def test_restore_after_the_owner_exits_and_recreate_when_gone(self):
        asset = os.path.join(self.tmp, "prompt.txt")
        with open(asset, "w") as f:
            f.write("asset v1\n")
        # First process: starts the session (and exits), then another writes a file.
        first = self.start("--asset", asset + ":inputs/prompt.txt",
                           "--env", "SBX_TEST_SECRET=hunter2-do-not-store")
        self.assertEqual(first["outcome"], "created")
        sid = first["id"]
        self.ok("file", "write", sid, "notes/state.txt", stdin=b"written by process one\n")
        # gc between the processes must not reap it: its starter is gone, but it is detached.
        self.assertEqual(json.loads(self.ok("gc", "--json")), [])

        # Second process: same sandbox, same file, asset still there.
        second = self.start()
        self.assertEqual(second, {"id": sid, "outcome": "reused"})
        self.assertEqual(self.ok("file", "read", sid, "notes/state.txt"),
                         "written by process one\n")
        self.assertEqual(self.ok("file", "read", sid, "inputs/prompt.txt"), "asset v1\n")
        rec = self.show()
        self.assertEqual(rec["id"], sid)
        self.assertEqual(rec["state"], "running")
        self.assertEqual(rec["assets"], [{"host": os.path.realpath(asset),
                                          "sandbox": "inputs/prompt.txt"}])

        # Destroyed behind its back (neither the ledger nor the record is told).
        shutil.rmtree(os.path.join(self.root, self.backend(sid)))
        with open(asset, "w") as f:
            f.write("asset v2\n")
        third = self.start()
        self.assertEqual(third["outcome"], "recreated")
        self.assertNotEqual(third["id"], sid)
        nid = third["id"]
        self.assertEqual(self.sandbox_dirs(), [self.backend(nid)])
        self.assertEqual(self.ok("file", "read", nid, "inputs/prompt.txt"), "asset v2\n")
        rc, out, err = self.sbx("file", "read", nid, "notes/state.txt")
        self.assertNotEqual(rc, 0)
        rec = self.show()
        self.assertEqual(rec["id"], nid)
        self.assertEqual(len(rec["assets"]), 1)

        # No secret in the ledger (the database and its WAL).
        for name in os.listdir(self.state):
            if name.startswith("ledger.db"):
                with open(os.path.join(self.state, name), "rb") as f:
                    self.assertNotIn(b"hunter2", f.read(), name)

        # end destroys the sandbox and forgets the session.
        self.ok("session", "end", *SESSION)
        self.assertEqual(self.sandbox_dirs(), [])
        rc, out, err = self.sbx("session", "show", *SESSION)
        self.assertEqual((rc, out), (1, ""))
        self.assertEqual(err, "sbx: session show: session: get: no session 's1' for user "
                              "'alice'; start it first\n")
        rc, out, err = self.sbx("session", "end", *SESSION)
        self.assertEqual(rc, 1)
        self.assertEqual(err, "sbx: session end: session: end: no session 's1' for user "
                              "'alice'; start it first\n")

    def test_pause_keeps_the_record(self):
        sid = self.start()["id"]
        rc, out, err = self.sbx("session", "pause", *SESSION)
        rec = self.show()
        self.assertEqual(rec["id"], sid)
        if rc == 0:
            self.assertEqual(rec["state"], "paused")
            self.assertEqual(self.start(), {"id": sid, "outcome": "resumed"})
            self.assertEqual(self.show()["state"], "running")
        else:
            self.assertEqual((rc, err), (125, "sbx: session pause: local: pause: needs a "
                                              "writable cgroup freezer; this machine uses "
                                              "the subreaper fallback\n"))
            self.assertEqual(rec["state"], "running")
            self.assertEqual(self.start(), {"id": sid, "outcome": "reused"})

    def test_concurrent_starts_agree_on_one_sandbox(self):
        procs = [self.popen("session", "start", "--user", "bob", "--session", "race",
                            "--json") for _ in range(4)]
        results = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            self.assertEqual(p.returncode, 0, err.decode())
            results.append(json.loads(out))
        ids = {r["id"] for r in results}
        self.assertEqual(len(ids), 1, results)
        self.assertEqual(self.sandbox_dirs(), [self.backend(ids.pop())])
        self.assertEqual(sorted(r["outcome"] for r in results),
                         ["created", "reused", "reused", "reused"])

    def test_bad_asset_records_nothing_and_leaves_nothing(self):
        rc, out, err = self.sbx("session", "start", *SESSION, "--asset",
                                os.path.join(self.tmp, "missing.txt") + ":x.txt")
        self.assertEqual(rc, 125)
        self.assertEqual(err, "sbx: session start: session: asset '%s': No such file or "
                              "directory\n" % os.path.join(self.tmp, "missing.txt"))
        rc, out, err = self.sbx("session", "start", *SESSION, "--asset", self.tmp + ":d")
        self.assertEqual(rc, 2)
        self.assertEqual(err, "sbx: session start: session: asset '%s' is not a regular file; "
                              "list each file to upload\n" % self.tmp)
        self.assertEqual(self.sandbox_dirs(), [])
        self.assertEqual(self.sbx("session", "show", *SESSION)[0], 1)

    def test_usage_errors(self):
        rc, out, err = self.sbx("session", "start", "--user", "alice")
        self.assertEqual(rc, 2)
        self.assertTrue(err.startswith("sbx: session: start needs --user and --session\n"),
                        err)
        rc, out, err = self.sbx("session", "start", *SESSION, "--asset", "nocolon")
        self.assertEqual(rc, 2)
        self.assertTrue(err.startswith("sbx: session: --asset wants HOST_PATH:SANDBOX_PATH"),
                        err)
        rc, out, err = self.sbx("session", "pause", *SESSION, "--image", "x")
        self.assertEqual(rc, 2)


if __name__ == "__main__":
    unittest.main()
