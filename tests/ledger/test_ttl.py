"""A data source's `ttl` sets the ledger row's expiry and the sandbox's sbx.expires label, and
`sbx gc` reaps a detached sandbox once its TTL has passed, counted by the backend (its folder
is gone), while sparing detached sandboxes whose TTL has not passed or that have none. A
session whose sandbox was reaped starts again with a new one."""
import json
import os
import time
import unittest

from sbxtest import SbxCase


class Ttl(SbxCase):
    DATA_SOURCES = ("  - name: short\n    sandbox:\n      type: local\n      root: ROOT\n"
                    "      ttl: 1\n"
                    "  - name: long\n    sandbox:\n      type: local\n      root: ROOT\n"
                    "      ttl: 3600\n")

    def rows(self):
        return {r["id"]: r for r in json.loads(self.ok("ls", "--json", "--all"))}

    def labels(self, sandbox_id):
        with open(os.path.join(self.root, self.backend(sandbox_id), "meta.json")) as f:
            return json.load(f)["labels"]

    def test_gc_reaps_an_expired_detached_sandbox(self):
        short = self.ok("create", "--data-source", "short").strip()
        long_ = self.ok("create", "--data-source", "long").strip()
        none = self.ok("create").strip()
        sess = json.loads(self.ok("session", "start", "--user", "dave", "--session", "t",
                                  "--data-source", "short", "--json"))
        self.assertEqual(sess["outcome"], "created")
        rows = self.rows()
        for sid, ttl in ((short, 1), (long_, 3600), (sess["id"], 1)):
            r = rows[sid]
            self.assertEqual(r["owner_pid"], 0, "create from a shell is detached")
            self.assertEqual(r["expires"], r["created"] + ttl)
            self.assertEqual(self.labels(sid)["sbx.expires"], str(r["expires"]))
        self.assertEqual(rows[none]["expires"], 0)
        self.assertNotIn("sbx.expires", self.labels(none))

        expiry = max(rows[short]["expires"], rows[sess["id"]]["expires"])
        while time.time() < expiry + 1:
            time.sleep(0.1)
        reaped = json.loads(self.ok("gc", "--json"))
        # Each names the ledger row it reaped by its token.
        self.assertTrue(all(len(r.pop("token")) > 8 for r in reaped), reaped)
        self.assertEqual(sorted(reaped, key=lambda r: r["id"]),
                         sorted([{"action": "deleted", "id": short, "reason": "ttl expired",
                                  "status": "SBX_OK"},
                                 {"action": "deleted", "id": sess["id"],
                                  "reason": "ttl expired", "status": "SBX_OK"}],
                                key=lambda r: r["id"]))
        self.assertEqual(self.sandbox_dirs(), sorted([self.backend(long_), self.backend(none)]))
        rows = self.rows()
        self.assertEqual(rows[short]["state"], "gone")
        self.assertEqual(rows[long_]["state"], "running")
        self.assertEqual(json.loads(self.ok("gc", "--json")), [])

        # The session's record survives gc; its next start makes a new sandbox.
        again = json.loads(self.ok("session", "start", "--user", "dave", "--session", "t",
                                   "--json"))
        self.assertEqual(again["outcome"], "recreated")
        self.assertNotEqual(again["id"], sess["id"])
        self.assertEqual(self.rows()[again["id"]]["data_source"], "short")


if __name__ == "__main__":
    unittest.main()
