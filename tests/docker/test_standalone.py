"""Ids that stand alone on docker: a sandbox created with a non-default engine `host` (the
engine of the docker_<engine> fixture, DOCKER_HOST unset) is exec'd, removed and gc'd
by id alone from an `sbx` that has no config; the recorded config holds the host."""
import json
import os
import shutil
import sqlite3
import subprocess
import time
import unittest

SBX = os.environ["SBX_BIN"]
SOCK = os.environ["ENGINE_SOCK"]
IMAGE = os.environ["SBX_CONFORMANCE_IMAGE"]
TMP = os.environ["STANDALONE_TMP"]


class DockerStandalone(unittest.TestCase):
    def setUp(self):
        self.tmp = os.path.join(TMP, self._testMethodName)
        shutil.rmtree(self.tmp, ignore_errors=True)
        os.makedirs(self.tmp)
        self.state = os.path.join(self.tmp, "state")
        self.cfg = os.path.join(self.tmp, "config.yaml")
        with open(self.cfg, "w") as f:
            f.write("data_source:\n  sandbox:\n    type: docker\n    host: unix://%s\n"
                    "    image: %s\n"
                    # These VMs cannot raise rlimits past 1024 (as in docker.yaml).
                    "    ulimits:\n      - {name: nofile, soft: 1024, hard: 1024}\n"
                    "      - {name: nproc, soft: 1024, hard: 1024}\n" % (SOCK, IMAGE))
        self.env = dict(os.environ, SBX_STATE_DIR=self.state)
        for k in ("SBX_CONFIG", "DOCKER_HOST"):
            self.env.pop(k, None)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def sbx(self, *args, config=False):
        pre = [SBX, "--config", self.cfg] if config else [SBX]
        p = subprocess.run(pre + list(args), env=self.env, capture_output=True, timeout=180)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    def ok(self, *args, config=False):
        rc, out, err = self.sbx(*args, config=config)
        self.assertEqual(rc, 0, "sbx %s: %s" % (" ".join(args), err))
        return out

    def engine_has(self, sid):
        p = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                            "--unix-socket", SOCK,
                            "http://d/containers/%s/json" % sid.split(":", 1)[1]],
                           capture_output=True, timeout=60)
        return p.stdout.decode() == "200"

    def test_exec_and_rm_by_id_alone(self):
        sid = self.ok("create", config=True).strip()
        with sqlite3.connect(os.path.join(self.state, "ledger.db")) as db:
            recorded = db.execute("SELECT config FROM sandboxes WHERE id = ?",
                                  (sid,)).fetchone()[0]
        self.assertEqual(json.loads(recorded)["host"], "unix://" + SOCK)
        self.assertEqual(self.ok("exec", sid, "--", "echo", "from afar"), "from afar\n")
        self.ok("rm", sid)
        self.assertFalse(self.engine_has(sid))

    def test_gc_by_id_alone(self):
        sid = self.ok("create", "--ttl", "1", config=True).strip()
        self.assertTrue(self.engine_has(sid))
        time.sleep(2.1)
        events = json.loads(self.ok("gc", "--json"))
        mine = [(e["action"], e["reason"], e["status"]) for e in events if e["id"] == sid]
        self.assertEqual(mine, [("deleted", "ttl expired", "SBX_OK")])
        self.assertFalse(self.engine_has(sid))


if __name__ == "__main__":
    unittest.main()
