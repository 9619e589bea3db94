"""Caps held across processes: max_concurrency, max_starting and create_rate/create_burst of a
data source are counted in the ledger, so separate `sbx` processes sharing a state dir get
exactly the places the caps allow, wait for one with --wait, and never spin while waiting."""
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import time
import unittest

from clitest import BUILD_REGISTRY, FIXTURES, SBX, TMP, local_available


class Caps(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(TMP, "caps", self._testMethodName)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.env = dict(os.environ, SBX_STATE_DIR=os.path.join(self.dir, "state"))
        self.env.pop("SBX_CONFIG", None)
        self.env.pop("SBX_REGISTRY", None)
        self.registry = FIXTURES
        self.cfg = None

    def config(self, sandbox, caps, registry=FIXTURES):
        self.registry = registry
        self.cfg = os.path.join(self.dir, "config.yaml")
        with open(self.cfg, "w") as f:
            f.write("data_source:\n  sandbox:\n" + "".join(
                "    %s: %s\n" % kv for kv in list(sandbox.items()) + list(caps.items())))

    def popen(self, *args):
        return subprocess.Popen([SBX, "--registry", self.registry, "--config", self.cfg]
                                + list(args), env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)

    @staticmethod
    def finish(p, timeout=120):
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out.decode(), err.decode()

    def sbx(self, *args):
        return self.finish(self.popen(*args))

    def at_once(self, n, *args):
        """n `sbx ARGS` processes started together; their (rc, stdout, stderr)."""
        procs = [self.popen(*args) for _ in range(n)]
        return [self.finish(p) for p in procs]

    def ledger(self, sql):
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(self.dir, "state", "ledger.db"),
                             uri=True, timeout=30)
        try:
            return db.execute(sql).fetchall()
        finally:
            db.close()

    def wait_rows(self, state, n):
        """Polls the ledger until it holds n rows in `state` (a loose bound: 60 s)."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                got = self.ledger("SELECT count(*) FROM sandboxes WHERE state = '%s'" % state)
            except sqlite3.OperationalError:  # not made yet
                got = [(-1,)]
            if got[0][0] == n:
                return
            time.sleep(0.05)
        self.fail("the ledger never held %d rows %s" % (n, state))

    def still_waiting(self, p, seconds=1.0):
        """p has neither failed nor taken a place it was not given after `seconds`."""
        time.sleep(seconds)
        if p.poll() is not None:
            self.fail("the waiting create ended: %r" % (self.finish(p),))

    @staticmethod
    def cpu_seconds(p):
        """Waits for p; (rc, stdout, stderr, user+system CPU seconds it used)."""
        out = p.stdout.read()
        err = p.stderr.read()
        p.stdout.close()
        p.stderr.close()
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        return (p.returncode, out.decode(), err.decode(), usage.ru_utime + usage.ru_stime)

    @unittest.skipUnless(local_available(), "the local plugin is not built")
    def test_max_concurrency_holds_across_processes_and_a_waiter_gets_the_freed_place(self):
        root = os.path.join(self.dir, "root")
        os.makedirs(root)
        self.config({"type": "local", "root": root}, {"max_concurrency": 3}, BUILD_REGISTRY)
        results = self.at_once(8, "create")
        made = sorted(out.strip() for rc, out, _ in results if rc == 0)
        refused = [(rc, out, err) for rc, out, err in results if rc != 0]
        self.assertEqual(len(made), 3, results)
        self.assertEqual(refused, [(125, "", "sbx: create: data source 'default' has 3 "
                                    "live sandboxes, its max_concurrency; destroy one first\n")] * 5)
        self.assertEqual(len(os.listdir(root)), 3)
        # A create that may wait holds on until another process deletes one, then takes it.
        waiter = self.popen("create", "--wait", "120")
        started = time.monotonic()
        self.still_waiting(waiter)
        self.assertEqual(self.sbx("rm", made[0])[0], 0)
        rc, out, err, cpu = self.cpu_seconds(waiter)
        waited = time.monotonic() - started
        self.assertEqual((rc, err), (0, ""))
        self.assertRegex(out, r"^local:[0-9a-f]+\n$")
        # Sleeping, not spinning: far less CPU than the time it waited.
        self.assertLess(cpu, waited / 2, "CPU %.2f s in %.2f s of waiting" % (cpu, waited))
        live = sorted(made[1:] + [out.strip()])
        rc, out, _ = self.sbx("ls", "--json")
        self.assertEqual(sorted(r["id"] for r in json.loads(out)), live)
        # A wait that runs out says how long it waited.
        rc, out, err = self.sbx("create", "--wait", "0.3")
        self.assertEqual((rc, out), (125, ""))
        self.assertRegex(err, r"^sbx: create: data source 'default' has 3 live sandboxes,"
                         r" its max_concurrency; destroy one first \(waited 0\.[3-9]\d s\)\n$")
        for i in live:
            self.assertEqual(self.sbx("rm", i)[0], 0)
        self.assertEqual(os.listdir(root), [])

    def test_max_starting_counts_other_processes_creates_in_flight(self):
        gate = os.path.join(self.dir, "gate")
        self.config({"type": "ok"}, {"max_starting": 2})
        slow = [self.popen("create", "--image", "wait:" + gate) for _ in range(2)]
        self.wait_rows("creating", 2)
        self.assertEqual(self.sbx("create"), (
            125, "", "sbx: create: data source 'default' has 2 creates in flight, its "
            "max_starting; try again when one has finished\n"))
        waiter = self.popen("create", "--wait", "120")
        self.still_waiting(waiter)
        with open(gate, "w"):
            pass
        for p in slow + [waiter]:
            rc, out, err = self.finish(p)
            self.assertEqual((rc, err), (0, ""))
            self.assertRegex(out, r"^ok:ok-1\n$")
        self.assertEqual(self.ledger("SELECT state, count(*) FROM sandboxes GROUP BY state"),
                         [("running", 3)])

    def test_a_killed_creator_holds_no_place(self):
        self.config({"type": "ok"}, {"max_starting": 1, "max_concurrency": 1})
        slow = self.popen("create", "--image", "wait:" + os.path.join(self.dir, "never"))
        self.wait_rows("creating", 1)
        self.assertEqual(self.sbx("create")[0], 125)
        slow.send_signal(signal.SIGKILL)
        self.finish(slow)
        # Its row stays `creating` until gc finishes it, but counts for nothing.
        rc, out, err = self.sbx("create")
        self.assertEqual((rc, out, err), (0, "ok:ok-1\n", ""))
        self.assertEqual(self.ledger("SELECT state FROM sandboxes ORDER BY state"),
                         [("creating",), ("running",)])

    def test_create_rate_is_one_bucket_for_every_process(self):
        self.config({"type": "ok"}, {"create_rate": 0.01, "create_burst": 2})
        results = self.at_once(5, "create")
        self.assertEqual(sorted(rc for rc, _, _ in results), [0, 0, 125, 125, 125])
        for rc, out, err in results:
            if rc:
                self.assertRegex(err, r"^sbx: create: data source 'default' is at its "
                                 r"create_rate \(0\.01 per second, burst 2\); the next create "
                                 r"can start in \d+\.\d\d s\n$")
        rc, out, err = self.sbx("create", "--wait", "0.3")
        self.assertEqual((rc, out), (125, ""))
        self.assertRegex(err, r"can start in \d+\.\d\d s \(waited 0\.[3-9]\d s\)\n$")

    def test_create_rate_spaces_creates_that_wait(self):
        """At 4 creates per second with a burst of 1, five creates from five processes are
        admitted at least 250 ms apart: the bucket's stamp moves by 1 s or more after the
        first."""
        self.config({"type": "ok"}, {"create_rate": 4})
        self.assertEqual(self.sbx("create")[0], 0)
        first = self.ledger("SELECT stamp_ms FROM create_rates")[0][0]
        results = self.at_once(4, "create", "--wait", "120")
        self.assertEqual([(rc, err) for rc, _, err in results], [(0, "")] * 4)
        last = self.ledger("SELECT stamp_ms FROM create_rates")[0][0]
        self.assertGreaterEqual(last - first, 1000)
        self.assertEqual(self.ledger("SELECT count(*) FROM sandboxes WHERE state = 'running'"),
                         [(5,)])

    def test_bad_cap_values_are_refused(self):
        for caps, why in [
            ({"create_burst": 3}, "config.yaml:3: create_burst (3) needs create_rate, the "
             "creates per second that refill it\n"),
            ({"create_rate": -1}, "create_rate"),
            ({"max_starting": "many"}, "max_starting"),
        ]:
            self.config({"type": "ok"}, caps)
            rc, out, err = self.sbx("create")
            self.assertEqual((rc, out), (2, ""), err)
            self.assertIn(why, err)
        self.config({"type": "ok"}, {})
        rc, _, err = self.sbx("create", "--wait", "soon")
        self.assertEqual(rc, 2)
        self.assertTrue(err.startswith("sbx: create: --wait wants seconds, got 'soon'\n"), err)


if __name__ == "__main__":
    unittest.main()
