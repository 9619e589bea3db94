"""Faulty plugins through the Python package: in a runner, a crash, an exit() or a hang of the
plugin is a PluginCrashed exception naming the alias and the signal or status; the caller
(this interpreter) lives on, and the next call, other calls and other aliases work."""
import asyncio
import concurrent.futures
import os
import re
import time
import unittest

import sbx

PROCESS = os.environ["ROGUE_PROCESS_REGISTRY"]
TIGHT = os.environ["ROGUE_TIGHT_REGISTRY"]
TMP = os.environ["RUNNER_PY_TMP"]

CONFIG = {"data_source": {"sandbox": {"type": "rogue"}},
          "data_sources": [{"name": "good", "sandbox": {"type": "ok"}}]}
CRASHED = r"^rogue: exec: plugin crashed: its runner \(pid (\d+)\) "


def host(registry=PROCESS):
    return sbx.Host(CONFIG, registry=registry, state_dir=os.path.join(TMP, "state"))


class Faults(unittest.TestCase):
    def crash(self, h, sid, command, tail):
        with self.assertRaises(sbx.PluginCrashed) as cm:
            h.exec(sid, command)
        e = cm.exception
        self.assertEqual(e.name, "SBX_E_PLUGIN_CRASHED")
        self.assertIsInstance(e, sbx.InfrastructureError)
        self.assertRegex(e.message, CRASHED + tail + "$")
        return int(re.match(CRASHED, e.message).group(1))

    def test_crashes_exits_and_hangs_are_exceptions_and_the_caller_goes_on(self):
        with host() as h:
            sid, good = h.create(), h.create("good")
            pid = int(h.exec(sid, "pid").stdout)
            self.assertNotEqual(pid, os.getpid())
            self.assertEqual(self.crash(h, sid, "segv", r"was killed by signal 11 \(SIGSEGV\)"), pid)
            # Three deaths: the registry's max_crashes is four.
            self.crash(h, sid, "exit 3", r"exited with status 3")
            with self.assertRaises(sbx.PluginCrashed) as cm:
                h.exec(sid, "hang", timeout=0.5)
            self.assertRegex(cm.exception.message,
                             r"^rogue: exec: plugin hung: its runner \(pid \d+\) was killed: a "
                             r"call to exec did not return within its timeout \(0\.5 s\) plus "
                             r"the grace period \(1 s\)$")
            self.assertEqual(h.exec(sid, "after").stdout, "after\n")
            self.assertEqual(h.exec(good, "other alias").stdout, "other alias\n")

    def test_garbage_late_callbacks_and_kept_memory_change_no_result(self):
        with host() as h:
            sid = h.create()
            self.assertEqual((h.exec(sid, "garbage").stdout, h.exec(sid, "late").stdout,
                              h.exec(sid, "leak").stdout), ("clean\n", "on time\n", "leaked\n"))
            self.assertEqual(h.exec(sid, "sleep 100").stdout, "slept\n")

    def test_calls_in_flight_on_other_threads_fail_too(self):
        with host() as h, concurrent.futures.ThreadPoolExecutor(3) as pool:
            sid = h.create()
            marks = [os.path.join(TMP, "py-parked-%d-%d" % (os.getpid(), i)) for i in range(3)]
            futs = [pool.submit(h.exec, sid, "park " + m) for m in marks]
            deadline = time.monotonic() + 60
            while not all(map(os.path.exists, marks)) and time.monotonic() < deadline:
                time.sleep(0.01)
            self.assertTrue(all(map(os.path.exists, marks)))
            pid = self.crash(h, sid, "segv", r"was killed by signal 11 \(SIGSEGV\)")
            for f in futs:
                with self.assertRaises(sbx.PluginCrashed) as cm:
                    f.result(timeout=60)
                self.assertEqual(int(re.match(CRASHED, cm.exception.message).group(1)), pid)
            self.assertEqual(h.exec(sid, "after").stdout, "after\n")

    def test_async_callers_get_the_exception(self):
        async def main():
            h = sbx.AsyncHost(CONFIG, registry=PROCESS, state_dir=os.path.join(TMP, "state"))
            try:
                sid = await h.create()
                with self.assertRaises(sbx.PluginCrashed):
                    await h.exec(sid, "abort")
                return (await h.exec(sid, "after")).stdout
            finally:
                await h.aclose()
        self.assertEqual(asyncio.run(main()), "after\n")

    def test_a_plugin_that_keeps_crashing_becomes_faulty(self):
        with host(TIGHT) as h:
            sid, good = h.create(), h.create("good")
            self.crash(h, sid, "segv", r"was killed by signal 11 \(SIGSEGV\)")
            self.crash(h, sid, "segv", r"was killed by signal 11 \(SIGSEGV\)")
            reason = ("rogue: plugin is faulty: its runner died 2 times within 600 s (last: "
                      "was killed by signal 11 (SIGSEGV)); it is not restarted")
            with self.assertRaises(sbx.PluginError) as cm:
                h.exec(sid, "echo")
            self.assertEqual((cm.exception.name, cm.exception.message), ("SBX_E_FAULTY", reason))
            state = {p.alias: (p.state, p.reason) for p in h.plugins()}
            self.assertEqual(state["rogue"], ("faulty", reason))
            self.assertEqual(h.exec(good, "still").stdout, "still\n")


if __name__ == "__main__":
    unittest.main()
