"""Helpers shared by the ledger's CLI tests: a private state dir and sandbox root per test, a
config for the local backend, and `sbx` runs that return (exit code, stdout, stderr)."""
import json
import os
import shutil
import subprocess
import unittest

SBX = os.environ["SBX_BIN"]
TMP_ROOT = os.environ["LEDGER_TMP"]


class SbxCase(unittest.TestCase):
    # Extra data sources for the config, as YAML list items (indented under data_sources).
    DATA_SOURCES = ""

    def setUp(self):
        self.tmp = os.path.join(TMP_ROOT, "%s.%s" % (type(self).__name__, self._testMethodName))
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.root = os.path.join(self.tmp, "sandboxes")
        os.makedirs(self.root)
        self.state = os.path.join(self.tmp, "state")
        self.cfg = os.path.join(self.tmp, "config.yaml")
        with open(self.cfg, "w") as f:
            f.write("data_source:\n  sandbox:\n    type: local\n    root: %s\n" % self.root)
            if self.DATA_SOURCES:
                f.write("data_sources:\n" + self.DATA_SOURCES.replace("ROOT", self.root))
        self.env = dict(os.environ, SBX_STATE_DIR=self.state)
        self.env.pop("SBX_CONFIG", None)

    def tearDown(self):
        # What the test left behind goes, and with it the root: the next gc on this machine
        # (run below, once per class) reaps the root's cgroups and any process left in them.
        shutil.rmtree(self.tmp, ignore_errors=True)

    @classmethod
    def tearDownClass(cls):
        # One fixed state dir and root for these runs: gc's own (empty) cgroup namespace
        # stays one per build tree.
        scratch = os.path.join(TMP_ROOT, "gc-scratch")
        env = dict(os.environ, SBX_STATE_DIR=os.path.join(scratch, "state"))
        env.pop("SBX_CONFIG", None)
        os.makedirs(scratch, exist_ok=True)
        cfg = os.path.join(scratch, "config.yaml")
        with open(cfg, "w") as f:
            f.write("data_source:\n  sandbox:\n    type: local\n    root: %s\n"
                    % os.path.join(scratch, "sandboxes"))
        subprocess.run([SBX, "--config", cfg, "gc"], env=env, capture_output=True,
                       timeout=120)

    def sbx(self, *args, stdin=None):
        p = subprocess.run([SBX, "--config", self.cfg] + list(args), env=self.env,
                           input=stdin, capture_output=True, timeout=120)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    def ok(self, *args, stdin=None):
        rc, out, err = self.sbx(*args, stdin=stdin)
        self.assertEqual(rc, 0, "sbx %s: %s" % (" ".join(args), err))
        return out

    def popen(self, *args):
        return subprocess.Popen([SBX, "--config", self.cfg] + list(args), env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def sandbox_dirs(self):
        return sorted(os.listdir(self.root))

    @staticmethod
    def backend(sandbox_id):
        return sandbox_id.split(":", 1)[1]
