"""Background jobs through the Python binding on `local`: Host.exec(background=True) -> Job."""
import asyncio
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import unittest

import sbx

LOCAL = {"data_source": {"sandbox": {"type": "local", "timeout": 30}}}


class JobTest(unittest.TestCase):
    def setUp(self):
        self.host = sbx.Host(LOCAL)
        self.sid = self.host.create()

    def tearDown(self):
        self.host.destroy(self.sid)
        self.host.close()

    def test_start_returns_an_id_before_the_command_ends(self):
        t0 = time.monotonic()
        job = self.host.exec(self.sid, "sleep 3; echo late", background=True)
        took = time.monotonic() - t0
        self.assertLess(took, 2.5, "a background start waited for its command")
        self.assertRegex(job.id, r"^[0-9a-f]{12}@" + re.escape(self.sid) + "$")
        self.assertEqual(job.sandbox_id, self.sid)
        st = job.status()
        self.assertEqual((st.state, st.exit_code, st.signal), ("running", -1, 0))
        # The pid is 0 for the first moments, until the supervisor has started the command.
        for _ in range(100):
            if st.pid > 0:
                break
            time.sleep(0.05)
            st = job.status()
        self.assertGreater(st.pid, 0)
        self.assertEqual(st.command, "sleep 3; echo late")
        job.kill(signal.SIGKILL)

    def test_exit_status_output_and_reads(self):
        job = self.host.exec(self.sid, "for i in 1 2 3; do echo line $i; done; echo oops >&2; "
                             "exit 7", background=True)
        st = job.wait(30)
        self.assertEqual((st.state, st.exit_code, st.signal), ("exited", 7, 0))
        self.assertEqual((st.stdout_bytes, st.stderr_bytes), (21, 5))
        self.assertGreaterEqual(st.duration, 0.0)
        self.assertEqual(job.read_output(), "line 1\nline 2\nline 3\n")
        self.assertEqual(job.read_output(stderr=True), "oops\n")
        self.assertEqual(job.read_output(tail=2), "line 2\nline 3\n")
        self.assertEqual(job.read_output(offset=7, max_bytes=6), "line 2")
        self.assertEqual(job.read_output(offset=100), "")

    def test_argv_stdin_env_and_cwd(self):
        self.host.mkdir(self.sid, "sub")
        job = self.host.exec(self.sid, ["sh", "-c", 'read v; echo "$v-$K"; pwd'],
                             background=True, stdin=b"hello\n", env={"K": "kv"}, cwd="sub")
        self.assertEqual(job.wait(30).exit_code, 0)
        out = job.read_output().splitlines()
        self.assertEqual(out[0], "hello-kv")
        self.assertTrue(out[1].endswith("/sub"), out[1])
        # Without stdin bytes the job reads /dev/null.
        job = self.host.exec(self.sid, "wc -c", background=True)
        job.wait(30)
        self.assertEqual(job.read_output().strip(), "0")

    def test_bad_cwd_is_refused_and_starts_nothing(self):
        with self.assertRaises(sbx.PathError):
            self.host.exec(self.sid, "true", background=True, cwd="no-such-dir")
        self.assertEqual(self.host.jobs(self.sid), [])

    def test_wait_timeout_leaves_the_job_running(self):
        job = self.host.exec(self.sid, "sleep 60", background=True)
        with self.assertRaises(sbx.JobTimeout) as cm:
            job.wait(0.5)
        self.assertIsInstance(cm.exception, TimeoutError)
        self.assertEqual(cm.exception.job_status.state, "running")
        self.assertEqual(job.status().state, "running")
        job.kill()
        st = job.wait(30)
        self.assertEqual((st.state, st.signal, st.exit_code), ("killed", signal.SIGTERM, -1))

    def test_kill_ends_the_whole_tree(self):
        # A child in the job's group and a grandchild that made its own session.
        job = self.host.exec(self.sid, "sleep 300 & echo $! > a.pid; "
                             "setsid sh -c 'echo $$ > b.pid; exec sleep 300' & wait",
                             background=True)
        probe = "while [ ! -s a.pid ] || [ ! -s b.pid ]; do sleep 0.05; done; " \
                "for f in a b; do kill -0 $(cat $f.pid) 2>/dev/null && echo $f; done"
        self.assertEqual(self.host.exec(self.sid, probe).stdout, "a\nb\n")
        job.kill(signal.SIGKILL)
        st = job.wait(30)
        self.assertEqual((st.state, st.signal), ("killed", signal.SIGKILL))
        # Dead means gone or a zombie (kill -0 still reaches a zombie until its parent reaps
        # it, and the orphans' new parent may reap late): state Z in /proc/PID/stat.
        gone = ("for i in $(seq 100); do n=; for f in a b; do p=$(cat $f.pid); "
                "s=$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null); "
                "[ -n \"$s\" ] && [ \"$s\" != Z ] && n=\"$n$f\"; done; "
                "[ -z \"$n\" ] && break; sleep 0.1; done; echo \"$n\"")
        self.assertEqual(self.host.exec(self.sid, gone).stdout, "\n")

    def test_kill_of_a_finished_job_changes_nothing(self):
        job = self.host.exec(self.sid, "exit 4", background=True)
        job.wait(30)
        job.kill(signal.SIGKILL)
        st = job.status()
        self.assertEqual((st.state, st.exit_code), ("exited", 4))

    def test_status_recorded_when_nobody_waits(self):
        job = self.host.exec(self.sid, "exit 3", background=True)
        time.sleep(1.0)
        # Another host (another process's view: no state shared in memory).
        with sbx.Host(LOCAL) as other:
            st = other.job(job.id).status()
        self.assertEqual((st.state, st.exit_code), ("exited", 3))

    def test_job_survives_sigkill_of_its_starter(self):
        code = textwrap.dedent(f"""
            import os, signal, sys, sbx
            h = sbx.Host({LOCAL!r})
            j = h.exec({self.sid!r}, "sleep 1; echo survived; exit 5", background=True)
            print(j.id, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        """)
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(p.returncode, -signal.SIGKILL, p.stderr)
        job = self.host.job(p.stdout.strip())
        st = job.wait(30)
        self.assertEqual((st.state, st.exit_code), ("exited", 5))
        self.assertEqual(job.read_output(), "survived\n")

    def test_supervisor_gone_is_lost(self):
        job = self.host.exec(self.sid, "sleep 300", background=True)
        hexid = job.id.split("@")[0]
        r = self.host.exec(self.sid, f"kill -9 $(cat .sbx/jobs/{hexid}/sup) "
                           f"$(cat .sbx/jobs/{hexid}/pid)")
        self.assertEqual(r.exit_code, 0, r.stderr)
        st = job.wait(30)
        self.assertEqual((st.state, st.exit_code), ("lost", -1))

    def test_list_cached_and_destroy_forgets(self):
        a = self.host.exec(self.sid, "exit 0", background=True)
        b = self.host.exec(self.sid, "sleep 60", background=True)
        a.wait(30)
        got = {j.id: j.state for j in self.host.jobs(self.sid)}
        self.assertEqual(got, {a.id: "exited", b.id: "running"})
        cached = {j.id: j.state for j in self.host.jobs(self.sid, cached=True)}
        self.assertEqual(cached, got)
        sid2 = self.host.create()
        try:
            self.assertEqual(self.host.jobs(sid2), [])
        finally:
            self.host.destroy(sid2)
        self.host.destroy(self.sid)
        self.assertEqual(self.host.jobs(self.sid, cached=True), [])
        self.sid = self.host.create()

    def test_cap_on_live_jobs(self):
        cfg = {"data_source": {"sandbox": {"type": "local", "max_jobs": 2}}}
        with sbx.Host(cfg) as h:
            sid = h.create()
            try:
                a = h.exec(sid, "sleep 60", background=True)
                h.exec(sid, "sleep 60", background=True)
                with self.assertRaises(sbx.SbxError) as cm:
                    h.exec(sid, "sleep 60", background=True)
                self.assertEqual(cm.exception.name, "SBX_E_LIMIT")
                self.assertIn("2 live jobs", cm.exception.message)
                # An ended job frees its place, though the ledger still says running.
                a.kill(signal.SIGKILL)
                a.wait(30)
                h.exec(sid, "true", background=True).wait(30)
            finally:
                h.destroy(sid)

    def test_malformed_and_unknown_ids(self):
        for bad in ("", "xyz", "123@", "ABCDEFABCDEF@" + self.sid, "../../etc@" + self.sid):
            with self.assertRaises(sbx.InvalidArgument, msg=bad):
                self.host.job(bad).status()
        with self.assertRaises(sbx.SandboxNotFound):
            self.host.job("0123456789ab@" + self.sid).status()


class AsyncJobTest(unittest.TestCase):
    def test_awaitable_forms(self):
        async def main():
            async with sbx.AsyncHost(LOCAL) as ah:
                sid = await ah.create()
                try:
                    job = await ah.exec(sid, "echo hi; sleep 60", background=True)
                    self.assertIsInstance(job, sbx.AsyncJob)
                    self.assertEqual((await job.status()).state, "running")
                    with self.assertRaises(sbx.JobTimeout):
                        await job.wait(0.3)
                    self.assertEqual(await job.read_output(), "hi\n")
                    await job.kill()
                    st = await job.wait(30)
                    self.assertEqual(st.state, "killed")
                    self.assertEqual([j.id for j in await ah.jobs(sid)], [job.id])
                    again = ah.job(job.id)
                    self.assertEqual((await again.status()).state, "killed")
                    plain = await ah.exec(sid, "echo x")
                    self.assertEqual(plain.stdout, "x\n")
                finally:
                    await ah.destroy(sid)

        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
