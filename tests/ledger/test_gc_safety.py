"""`sbx gc` is safe beside harnesses that are creating, using and deleting sandboxes: a create
or delete in flight is spared (and reported so), one whose process died is finished with the
reason shown, and a create/exec/rm loop beside a gc loop sees no failed exec and no sandbox of
its reaped. Counted by the backend (the local plugin's folders), not by the ledger."""
import json
import os
import socket
import sqlite3
import subprocess
import threading
import time
import unittest

from sbxtest import SbxCase

RACE_SECONDS = float(os.environ.get("GC_RACE_SECONDS", "20"))


def start_time(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


class GcSafety(SbxCase):
    def db(self):
        return sqlite3.connect(os.path.join(self.state, "ledger.db"), timeout=30)

    def gc(self, *extra):
        return json.loads(self.ok("gc", "--json", *extra))

    def row(self, token):
        with self.db() as db:
            return db.execute("SELECT id, state, error FROM sandboxes WHERE token = ?",
                              (token,)).fetchone()

    def token_of(self, sandbox_id):
        with self.db() as db:
            return db.execute("SELECT token FROM sandboxes WHERE id = ?",
                              (sandbox_id,)).fetchone()[0]

    def act_as(self, token, proc, state, keep_id):
        """Makes `proc` the row's creator (state creating, no id yet) or deleter."""
        with self.db() as db:
            db.execute("UPDATE sandboxes SET state = ?, id = CASE WHEN ? THEN id ELSE '' END,"
                       " actor_host = ?, actor_pid = ?, actor_start = ? WHERE token = ?",
                       (state, keep_id, socket.gethostname(), proc.pid, start_time(proc.pid),
                        token))

    def test_a_create_in_flight_is_spared_and_finished_once_its_process_died(self):
        sid = self.ok("create").strip()
        token = self.token_of(sid)
        creator = subprocess.Popen(["sleep", "60"])
        try:
            # The sandbox exists with its token label; its row has no id yet.
            self.act_as(token, creator, "creating", False)
            events = self.gc()
            self.assertEqual(events, [{"action": "skipped", "id": "", "token": token,
                                       "reason": "create in flight (pid %d)" % creator.pid,
                                       "status": "SBX_OK"}])
            self.assertEqual(self.sandbox_dirs(), [self.backend(sid)])
        finally:
            creator.kill()
            creator.wait()
        why = "create by pid %d never finished (the process is gone)" % creator.pid
        self.assertEqual(self.gc(), [{"action": "deleted", "id": sid, "token": token,
                                      "reason": why, "status": "SBX_OK"}])
        self.assertEqual(self.sandbox_dirs(), [])
        self.assertEqual(self.row(token), ("", "failed", "reaped by gc: " + why))
        self.assertEqual(self.gc(), [])

    def test_a_create_that_died_before_the_backend_made_anything_is_closed(self):
        sid = self.ok("create").strip()
        token = self.token_of(sid)
        self.ok("rm", sid)
        creator = subprocess.Popen(["true"])
        creator.wait()
        with self.db() as db:
            db.execute("UPDATE sandboxes SET state = 'creating', id = '', actor_host = ?,"
                       " actor_pid = ?, actor_start = 1 WHERE token = ?",
                       (socket.gethostname(), creator.pid, token))
        why = "create by pid %d never finished (the process is gone)" % creator.pid
        self.assertEqual(self.gc(), [{"action": "finished", "id": "", "token": token,
                                      "reason": why, "status": "SBX_OK"}])
        self.assertEqual(self.row(token), ("", "failed", "closed by gc: " + why))
        out = self.ok("gc")
        self.assertEqual(out, "gc: 0 deleted, 0 skipped, 0 finished\n")

    def test_a_delete_in_flight_is_spared_and_finished_once_its_process_died(self):
        sid = self.ok("create").strip()
        token = self.token_of(sid)
        deleter = subprocess.Popen(["sleep", "60"])
        try:
            self.act_as(token, deleter, "deleting", True)
            out = self.ok("gc")
            self.assertEqual(out, "skipped %s: delete in flight (pid %d)\n"
                             "gc: 0 deleted, 1 skipped, 0 finished\n" % (sid, deleter.pid))
            self.assertEqual(self.sandbox_dirs(), [self.backend(sid)])
        finally:
            deleter.kill()
            deleter.wait()
        why = "delete by pid %d never finished (the process is gone)" % deleter.pid
        self.assertEqual(self.ok("gc", "--dry-run"),
                         "would delete %s: %s\ngc: 1 to delete, 0 skipped, 0 finished\n"
                         % (sid, why))
        self.assertEqual(self.sandbox_dirs(), [self.backend(sid)])
        self.assertEqual(self.gc(), [{"action": "deleted", "id": sid, "token": token,
                                      "reason": why, "status": "SBX_OK"}])
        self.assertEqual(self.sandbox_dirs(), [])
        self.assertEqual(self.row(token), (sid, "gone", "reaped by gc: " + why))

    def test_create_exec_rm_loops_beside_a_gc_loop_lose_nothing(self):
        stop = time.time() + RACE_SECONDS
        failures, used, deleted, rounds = [], set(), [], [0]
        lock = threading.Lock()

        def worker(n):
            while time.time() < stop:
                rc, out, err = self.sbx("create")
                if rc != 0:
                    with lock:
                        failures.append("create: %s" % err)
                    continue
                sid = out.strip()
                rc, out, err = self.sbx("exec", sid, "--", "sh", "-c",
                                        "sleep 0.1; echo w%d" % n)
                with lock:
                    used.add(sid)
                    rounds[0] += 1
                    if (rc, out) != (0, "w%d\n" % n):
                        failures.append("exec in %s: rc %d, %r, %s" % (sid, rc, out, err))
                rc, _, err = self.sbx("rm", sid)
                if rc != 0:
                    with lock:
                        failures.append("rm %s: %s" % (sid, err))

        def gc_loop():
            while time.time() < stop:
                rc, out, err = self.sbx("gc", "--json")
                if rc != 0:
                    with lock:
                        failures.append("gc: %s" % err)
                    continue
                with lock:
                    deleted.extend(e for e in json.loads(out) if e["action"] == "deleted")

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(3)]
        threads.append(threading.Thread(target=gc_loop))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertGreater(rounds[0], 0)
        self.assertEqual(failures, [])
        self.assertEqual(deleted, [], "gc deleted sandboxes the workers were using")
        self.assertEqual(self.sandbox_dirs(), [])
        with self.db() as db:
            live = db.execute("SELECT count(*) FROM sandboxes WHERE state NOT IN"
                              " ('gone', 'failed')").fetchone()[0]
        self.assertEqual(live, 0)


if __name__ == "__main__":
    unittest.main()
