"""Soak: several worker processes (soak_worker.py, on the Python binding) create, use, run jobs
in and delete sandboxes under a max_concurrency they share, beside a gc loop, while workers and
gc runs are SIGKILLed at random moments and replaced. At the end, after one more gc, every
sandbox, process, folder, cgroup and ledger row is accounted for: no worker that was not
killed saw a failure, gc deleted only sandboxes of killed processes, every sandbox created was
deleted by its worker or reaped by gc, and nothing is left. SOAK_SECONDS (default 25) sets
how long the storm lasts; CI keeps it short, a longer run is SOAK_SECONDS=600.

A second test SIGKILLs a rollout in the middle, and one gc plus `rollout --resume` give every
task's result exactly once and leave nothing behind."""
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import unittest

from sbxtest import SbxCase, SBX

SOAK_SECONDS = float(os.environ.get("SOAK_SECONDS", "25"))
WORKERS = int(os.environ.get("SOAK_WORKERS", "4"))
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "soak_worker.py")
MOUNTS = ["/sys/fs/cgroup/sbx", "/sys/fs/cgroup/unified/sbx", "/sys/fs/cgroup/freezer/sbx"]
LIVE = "('creating', 'running', 'paused', 'deleting')"


def namespace(root):
    h = 14695981039346656037
    for c in os.path.realpath(root).encode():
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "r-%016x" % h


class Soak(SbxCase):
    DATA_SOURCES = ""

    def setUp(self):
        super().setUp()
        with open(self.cfg, "a") as f:
            f.write("    max_concurrency: %d\n" % max(WORKERS - 1, 1))

    def leftovers(self):
        """Sandbox folders, cgroups and live ledger rows that remain."""
        cgroups = []
        for m in MOUNTS:
            ns = os.path.join(m, namespace(self.root))
            if os.path.isdir(ns):
                cgroups += [d for d in os.listdir(ns) if os.path.isdir(os.path.join(ns, d))]
        with sqlite3.connect(os.path.join(self.state, "ledger.db"), timeout=30) as db:
            rows = db.execute("SELECT id, state FROM sandboxes WHERE state IN " + LIVE).fetchall()
        return {"folders": self.sandbox_dirs(), "cgroups": cgroups, "rows": rows}

    def test_workers_and_gc_killed_at_random_lose_nothing_and_leak_nothing(self):
        rnd = random.Random(int(os.environ.get("SOAK_SEED", "1414")))
        mark = "%09d" % rnd.randrange(10 ** 9)
        stop = os.path.join(self.tmp, "stop")
        journals = os.path.join(self.tmp, "journals")
        os.makedirs(journals)
        killed, gc_entries, problems = set(), [], []
        lock = threading.Lock()

        # The workers load libsbx into python: an ASan build needs its runtime preloaded.
        worker_env = dict(self.env)
        if os.environ.get("SOAK_PRELOAD"):
            worker_env.update(LD_PRELOAD=os.environ["SOAK_PRELOAD"],
                              ASAN_OPTIONS="detect_leaks=0")

        def spawn(n):
            return subprocess.Popen(
                [sys.executable, WORKER, self.cfg, os.path.join(journals, "w%d.jsonl" % n),
                 "w%d" % n, stop, mark], env=worker_env, stderr=subprocess.PIPE)

        def gc_loop():
            # Every third run is SIGKILLed after a random moment.
            grnd = random.Random(rnd.random())
            k = 0
            while not os.path.exists(stop):
                k += 1
                p = subprocess.Popen([SBX, "--config", self.cfg, "gc", "--json"],
                                     env=self.env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
                if k % 3 == 0:
                    time.sleep(grnd.uniform(0.0, 0.5))
                    p.send_signal(signal.SIGKILL)
                    with lock:
                        killed.add(p.pid)
                out, err = p.communicate(timeout=300)
                if p.returncode == -signal.SIGKILL:
                    continue
                with lock:
                    if p.returncode != 0:
                        problems.append("gc: rc %d: %s" % (p.returncode, err.decode()))
                    else:
                        gc_entries.extend(json.loads(out))
                time.sleep(0.2)

        # Worker 0 is never killed. Each other one is SIGKILLed at a random moment of its
        # first 4 s of work (counted from its first journal line: starting the library can
        # take long on a loaded machine), then replaced.
        def started(p):
            with open(os.path.join(journals, "w%d.jsonl" % n), encoding="utf-8") as f:
                return '"pid": %d,' % p.pid in f.read()

        workers = {n: spawn(n) for n in range(WORKERS)}
        kill_at = {}
        gc_thread = threading.Thread(target=gc_loop)
        gc_thread.start()
        kills, deadline = 0, time.monotonic() + SOAK_SECONDS
        while time.monotonic() < deadline:
            time.sleep(0.05)
            for n in range(1, WORKERS):
                p = workers[n]
                if n not in kill_at:
                    if os.path.exists(os.path.join(journals, "w%d.jsonl" % n)) and started(p):
                        kill_at[n] = time.monotonic() + rnd.uniform(0.0, 4.0)
                    continue
                if time.monotonic() < kill_at[n]:
                    continue
                p.send_signal(signal.SIGKILL)
                p.communicate()
                with lock:
                    killed.add(p.pid)
                kills += 1
                workers[n] = spawn(n)
                del kill_at[n]
        with open(stop, "w"):
            pass
        for n, p in workers.items():
            _, err = p.communicate(timeout=300)
            if p.returncode != 0:
                problems.append("worker %d: rc %d: %s" % (n, p.returncode, err.decode()))
        gc_thread.join()
        final = subprocess.run([SBX, "--config", self.cfg, "gc", "--json"], env=self.env,
                               capture_output=True, timeout=300)
        self.assertEqual(final.returncode, 0, final.stderr.decode())
        gc_entries.extend(json.loads(final.stdout))

        steps = []
        for name in sorted(os.listdir(journals)):
            with open(os.path.join(journals, name), encoding="utf-8") as f:
                for line in f:
                    if line.endswith("\n"):  # a line torn by a SIGKILL is no step
                        steps.append(json.loads(line))
        owner = {s["id"]: s["pid"] for s in steps if s["step"] == "created"}
        removed = {s["id"] for s in steps if s["step"] == "removed"}
        rounds = sum(1 for s in steps if s["step"] == "removed")
        failures = [s for s in steps if s["step"] == "failed"]
        deleted = [e for e in gc_entries if e["action"] == "deleted"]
        touched = {e["id"] for e in gc_entries if e["id"] and e["action"] != "skipped"}
        print("soak: %.0f s, %d workers, %d rounds, %d workers killed, %d gc runs killed, "
              "%d sandboxes reaped" % (SOAK_SECONDS, WORKERS, rounds, kills,
                                       len(killed) - kills, len(deleted)))

        self.assertEqual(problems, [])
        # Only a killed process's steps may be cut short; no step of any worker failed.
        self.assertEqual(failures, [])
        # The worker never killed went round and round.
        self.assertGreater(sum(1 for s in steps if s["step"] == "removed" and
                               s["pid"] == workers[0].pid), 0)
        for e in deleted:
            self.assertEqual(e["status"], "SBX_OK", e)
            pid = owner.get(e["id"])
            if pid is None:  # made by a worker killed before it journalled the id
                m = re.search(r"pid (\d+)", e["reason"])
                self.assertTrue(m and int(m.group(1)) in killed, e)
            else:
                self.assertIn(pid, killed, "gc reaped a live worker's sandbox: %r" % e)
        # Every sandbox a worker made was deleted by it or reaped (or finished) by gc; one
        # whose worker was killed right after deleting it is gone in the ledger.
        with sqlite3.connect(os.path.join(self.state, "ledger.db"), timeout=30) as db:
            state = dict(db.execute("SELECT id, state FROM sandboxes"))
        unaccounted = [(i, owner[i], state.get(i)) for i in sorted(set(owner) - removed - touched)
                       if owner[i] not in killed or state.get(i) != "gone"]
        self.assertEqual(unaccounted, [])
        self.assertEqual(self.leftovers(), {"folders": [], "cgroups": [], "rows": []})
        left = subprocess.run(["pgrep", "-f", "sleep 600.%s" % mark], capture_output=True)
        self.assertEqual(left.stdout, b"", "jobs of the soak still run")
        again = subprocess.run([SBX, "--config", self.cfg, "gc", "--json"], env=self.env,
                               capture_output=True, timeout=120)
        self.assertEqual(json.loads(again.stdout), [])

    def test_a_sigkilled_rollout_resumes_after_one_gc(self):
        tasks = os.path.join(self.tmp, "tasks.jsonl")
        with open(tasks, "w") as f:
            for i in range(40):
                f.write(json.dumps({"id": i, "commands": ["sleep 0.2; echo t%d" % i]}) + "\n")
        out = os.path.join(self.tmp, "out.jsonl")
        cmd = [SBX, "--config", self.cfg, "rollout", "--concurrency", "6", "--output", out,
               tasks]
        p = subprocess.Popen(cmd, env=self.env, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (not os.path.exists(out) or
                                               os.path.getsize(out) < 200):
            time.sleep(0.02)
        self.assertGreater(os.path.getsize(out), 0, "no task finished")
        p.send_signal(signal.SIGKILL)
        p.wait()
        self.ok("gc")
        self.assertEqual(self.leftovers(), {"folders": [], "cgroups": [], "rows": []})
        rc, _, err = self.sbx(*(cmd[3:8] + ["--resume"] + cmd[8:]))
        self.assertEqual(rc, 0, err)
        with open(out, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
        self.assertEqual(sorted(r["id"] for r in rows), list(range(40)))
        self.assertEqual({r["id"]: r["commands"][0]["stdout"] for r in rows},
                         {i: "t%d\n" % i for i in range(40)})
        self.assertEqual(self.leftovers(), {"folders": [], "cgroups": [], "rows": []})


if __name__ == "__main__":
    unittest.main()
