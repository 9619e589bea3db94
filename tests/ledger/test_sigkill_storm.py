"""A harness SIGKILLed in the middle of a storm of 200 creates leaves nothing behind once
`sbx gc` has run: counted by the backend (the local plugin's sandbox folders and live
processes), not by the ledger."""
import json
import os
import shutil
import signal
import subprocess
import time
import unittest

SBX = os.environ["SBX_BIN"]
TMP = os.environ["STORM_TMP"]


class SigkillStorm(unittest.TestCase):
    def test_sigkilled_harness_leaks_nothing_after_gc(self):
        shutil.rmtree(TMP, ignore_errors=True)
        root = os.path.join(TMP, "sandboxes")
        os.makedirs(root)
        env = dict(os.environ, SBX_STATE_DIR=os.path.join(TMP, "state"))
        cfg = os.path.join(TMP, "storm.yaml")
        with open(cfg, "w") as f:
            f.write("data_source:\n  sandbox:\n    type: local\n    root: %s\n" % root)
        tasks = os.path.join(TMP, "tasks.jsonl")
        with open(tasks, "w") as f:
            for i in range(200):
                f.write(json.dumps({"id": i, "commands": ["sleep 0.3; echo storm-%d" % i]}) + "\n")
        harness = subprocess.Popen([SBX, "rollout", "--config", cfg, "--concurrency", "32",
                                    "--output", os.path.join(TMP, "out.jsonl"), tasks],
                                   env=env, stderr=subprocess.DEVNULL)
        # Kill it once sandboxes exist, mid-storm.
        deadline = time.time() + 30
        while time.time() < deadline and len(os.listdir(root)) < 20:
            time.sleep(0.01)
        self.assertGreaterEqual(len(os.listdir(root)), 20, "the storm never started")
        harness.send_signal(signal.SIGKILL)
        harness.wait()
        leaked_before = len(os.listdir(root))
        self.assertGreater(leaked_before, 0)

        gc = subprocess.run([SBX, "--config", cfg, "gc", "--json"], env=env,
                            capture_output=True, timeout=300)
        self.assertEqual(gc.returncode, 0, gc.stderr.decode())
        reaped = json.loads(gc.stdout)
        self.assertTrue(all(r["status"] == "SBX_OK" for r in reaped), reaped)

        self.assertEqual(os.listdir(root), [], "sandbox folders left after gc")
        survivors = subprocess.run(["pgrep", "-f", "storm-"], capture_output=True)
        self.assertEqual(survivors.stdout, b"", "processes of the storm left after gc")
        # A second gc finds nothing more to do.
        again = subprocess.run([SBX, "--config", cfg, "gc", "--json"], env=env,
                               capture_output=True, timeout=120)
        self.assertEqual(json.loads(again.stdout), [])


if __name__ == "__main__":
    unittest.main()
