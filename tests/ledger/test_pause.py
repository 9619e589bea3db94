"""Pause and resume of a session's sandbox on `local` keep its files and its processes: a
command blocked in the sandbox stays frozen while paused (it cannot see the file that would
release it finish) and completes after the session is started (resumed) again. Where the
machine has no writable cgroup freezer, pause must fail with the exact unsupported message."""
import json
import time
import unittest

from sbxtest import SbxCase

SESSION = ["--user", "carol", "--session", "p1"]
UNSUPPORTED = ("sbx: session pause: local: pause: needs a writable cgroup freezer; this "
               "machine uses the subreaper fallback\n")


class Pause(SbxCase):
    def test_pause_resume_round_trip_keeps_files_and_processes(self):
        sid = json.loads(self.ok("session", "start", *SESSION, "--json"))["id"]
        self.ok("file", "write", sid, "kept.txt", stdin=b"kept across pause\n")
        worker = self.popen("exec", sid, "-c",
                            "echo started > started.txt; "
                            "while [ ! -e go ]; do sleep 0.05; done; echo survived")
        try:
            deadline = time.time() + 60
            while time.time() < deadline:
                if self.sbx("file", "stat", sid, "started.txt")[0] == 0:
                    break
                time.sleep(0.05)
            self.assertEqual(self.ok("file", "read", sid, "started.txt"), "started\n")

            rc, out, err = self.sbx("session", "pause", *SESSION)
            if rc != 0:
                self.assertEqual((rc, err), (125, UNSUPPORTED))
                self.assertEqual(json.loads(self.ok("session", "show", *SESSION,
                                                    "--json"))["state"], "running")
                self.ok("file", "write", sid, "go", stdin=b"")
                out, err = worker.communicate(timeout=60)
                self.assertEqual((worker.returncode, out), (0, b"survived\n"))
                return
            self.assertEqual(self.ok("status", sid).strip(), "paused")
            self.assertEqual(json.loads(self.ok("session", "show", *SESSION,
                                                "--json"))["state"], "paused")
            # Frozen: releasing it does not let it finish while paused.
            self.ok("file", "write", sid, "go", stdin=b"")
            time.sleep(0.5)
            self.assertIsNone(worker.poll(), "the command ran on while paused")

            self.assertEqual(json.loads(self.ok("session", "start", *SESSION, "--json")),
                             {"id": sid, "outcome": "resumed"})
            out, err = worker.communicate(timeout=60)
            self.assertEqual((worker.returncode, out), (0, b"survived\n"), err)
            self.assertEqual(self.ok("status", sid).strip(), "running")
            self.assertEqual(self.ok("file", "read", sid, "kept.txt"), "kept across pause\n")
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
            self.sbx("session", "end", *SESSION)


if __name__ == "__main__":
    unittest.main()
