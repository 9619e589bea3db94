import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import sbx
from proctable import alive

LOCAL = {"data_source": {"sandbox": {"type": "local"}}}


def _ledger_states(state_dir):
    """The states of the ledger's sandbox rows, read by another process: closing a
    descriptor of the ledger here would drop the SQLite locks this process's host holds."""
    code = ("import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
            "print(' '.join(r[0] for r in c.execute('SELECT state FROM sandboxes')))")
    out = subprocess.run([sys.executable, "-c", code, os.path.join(state_dir, "ledger.db")],
                         capture_output=True, text=True, check=True).stdout
    return out.split()




async def _until(pred, bound=20.0):
    t0 = time.monotonic()
    while not pred() and time.monotonic() - t0 < bound:
        await asyncio.sleep(0.02)
    return time.monotonic() - t0


class AsyncTest(unittest.TestCase):
    def test_two_hundred_sandboxes_on_one_loop_with_bounded_threads(self):
        peak = [0]

        async def one(h, i):
            sid = await h.create()
            try:
                r = await h.exec(sid, f"echo {i}")
                peak[0] = max(peak[0], threading.active_count())
                return r.stdout
            finally:
                await h.destroy(sid)

        async def main():
            async with sbx.AsyncHost({"data_source": {"sandbox": {"type": "local"}}},
                                     max_workers=16) as h:
                return await asyncio.gather(*(one(h, i) for i in range(200)))

        before = threading.active_count()
        outs = asyncio.run(main())
        self.assertEqual(outs, [f"{i}\n" for i in range(200)])
        self.assertLessEqual(peak[0], before + 16 + 2)

    def test_lifecycle_and_files_take_no_python_thread_and_bounded_threads(self):
        """create, exec, destroy and the file calls run on libsbx's queue: no thread of the
        pool ("sbx_N") exists, and the process's threads (C ones included) stay within
        max_workers of what it had."""
        peak = [0]

        def threads():
            return len(os.listdir("/proc/self/task"))

        async def one(h, i):
            sid = await h.create()
            try:
                await h.write_file(sid, "in.txt", f"v{i}")
                r = await h.exec(sid, "cat in.txt")
                peak[0] = max(peak[0], threads())
                return r.stdout + (await h.read_file(sid, "in.txt")).decode()
            finally:
                await h.destroy(sid)

        async def main():
            async with sbx.AsyncHost(LOCAL, max_workers=8) as h:
                outs = await asyncio.gather(*(one(h, i) for i in range(40)))
                pool = [t.name for t in threading.enumerate() if t.name.startswith("sbx_")]
                return outs, pool

        before = threads()
        outs, pool = asyncio.run(main())
        self.assertEqual(outs, [f"v{i}v{i}" for i in range(40)])
        self.assertEqual(pool, [])
        self.assertLessEqual(peak[0], before + 8 + 2)

    def test_one_host_on_two_loops_in_turn(self):
        h = sbx.AsyncHost(LOCAL)

        async def use():
            sid = await h.create()
            r = await h.exec(sid, "echo again")
            await h.destroy(sid)
            return r.stdout

        self.assertEqual(asyncio.run(use()), "again\n")
        self.assertEqual(asyncio.run(use()), "again\n")
        asyncio.run(h.aclose())

    def test_a_failed_exec_raises_as_host_exec_does(self):
        async def main():
            async with sbx.AsyncHost(LOCAL) as h:
                with self.assertRaises(sbx.SbxError) as got:
                    await h.exec("nosuchalias:abc", "true")
                try:
                    h.host.exec("nosuchalias:abc", "true")
                except sbx.SbxError as e:
                    want = e
                self.assertIs(type(got.exception), type(want))
                self.assertEqual(str(got.exception), str(want))
                sid = await h.create()
                with self.assertRaises(sbx.SbxError) as got:
                    await h.read_file(sid, "../outside")
                try:
                    h.host.read_file(sid, "../outside")
                except sbx.SbxError as e:
                    want = e
                self.assertEqual(str(got.exception), str(want))
                await h.destroy(sid)
        asyncio.run(main())

    def test_exec_into_files_through_the_queue(self):
        """stdout_path / stderr_path reach the C side through the completion queue."""
        async def main():
            async with sbx.AsyncHost(LOCAL) as h:
                sid = await h.create()
                try:
                    r = await h.exec(sid, "echo o; echo e >&2", stdout_path="o",
                                     stderr_path="e")
                    self.assertEqual((r.exit_code, r.stdout, r.stderr), (0, "", ""))
                    self.assertEqual(await h.read_file(sid, "o"), b"o\n")
                    self.assertEqual(await h.read_file(sid, "e"), b"e\n")
                finally:
                    await h.destroy(sid)
        asyncio.run(main())

    def test_write_file_takes_what_host_write_file_takes(self):
        """Through the queue, a bytes-like object is written as its bytes and a bad type
        raises Host.write_file's TypeError."""
        async def main():
            async with sbx.AsyncHost(LOCAL) as h:
                sid = await h.create()
                try:
                    await h.write_file(sid, "ba.bin", bytearray(b"\x00q"))
                    await h.write_file(sid, "mv.bin", memoryview(b"abc")[:2])
                    self.assertEqual(await h.read_file(sid, "ba.bin"), b"\x00q")
                    self.assertEqual(await h.read_file(sid, "mv.bin"), b"ab")
                    with self.assertRaises(TypeError) as got:
                        await h.write_file(sid, "bad.txt", 3.5)
                    self.assertEqual(str(got.exception), "sbx: write_file data must be str "
                                     "or bytes-like, not float")
                finally:
                    await h.destroy(sid)
        asyncio.run(main())

    def test_a_cancelled_create_deletes_the_sandbox_it_made(self):
        state = tempfile.mkdtemp(prefix="sbx-async-")

        async def main():
            async with sbx.AsyncHost(LOCAL, state_dir=state) as h:
                task = asyncio.ensure_future(h.create())
                await asyncio.sleep(0)  # submitted; its completion cannot be read yet
                task.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await task
                await _until(lambda: _ledger_states(state) == ["gone"])
                self.assertEqual(_ledger_states(state), ["gone"])
        try:
            asyncio.run(main())
        finally:
            shutil.rmtree(state, ignore_errors=True)

    def test_aclose_right_after_a_cancelled_create_still_deletes_its_sandbox(self):
        state = tempfile.mkdtemp(prefix="sbx-async-")

        async def main():
            h = sbx.AsyncHost(LOCAL, state_dir=state)
            task = asyncio.ensure_future(h.create())
            await asyncio.sleep(0)
            task.cancel()
            await h.aclose()
            self.assertTrue(task.cancelled())
        try:
            asyncio.run(main())
            self.assertEqual(_ledger_states(state), ["gone"])
        finally:
            shutil.rmtree(state, ignore_errors=True)

    def test_infra_error_is_an_exception_not_a_result(self):
        async def main():
            async with sbx.AsyncHost() as h:
                with self.assertRaises(sbx.SandboxNotFound):
                    await h.exec("local:0123456789abcdef", "true")
        asyncio.run(main())


class CancelTest(unittest.TestCase):
    def test_cancelled_exec_kills_the_command_and_frees_its_worker(self):
        marker = f"sbx-cancel-{os.getpid()}-{time.monotonic_ns()}"

        async def main():
            async with sbx.AsyncHost(LOCAL, max_workers=1) as h:
                sid = await h.create()
                task = asyncio.ensure_future(h.exec(sid, f"exec -a {marker} sleep 60"))
                await _until(lambda: alive(marker))
                self.assertTrue(alive(marker))
                running = next(iter(h._inflight.values()))  # whether the call is on its worker
                task.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await task
                took = await _until(lambda: not running() and not alive(marker))
                self.assertEqual(alive(marker), [])
                self.assertLess(took, 10.0)  # sanity bound; ~0.2 s measured
                # the one worker is free again: the next call runs at once
                self.assertEqual((await h.exec(sid, "echo next")).stdout, "next\n")
                await h.destroy(sid)
        asyncio.run(main())

    def test_cancel_before_the_command_started_still_kills_it(self):
        marker = f"sbx-early-{os.getpid()}-{time.monotonic_ns()}"

        async def main():
            async with sbx.AsyncHost(LOCAL, max_workers=1) as h:
                sid = await h.create()
                task = asyncio.ensure_future(h.exec(sid, f"exec -a {marker} sleep 60"))
                await asyncio.sleep(0)  # the call is on its worker, the command not yet up
                running = next(iter(h._inflight.values()))
                task.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await task
                await _until(lambda: not running(), 40.0)
                self.assertFalse(running())  # the call returned well before the command's 60 s
                self.assertEqual(alive(marker), [])
                await h.destroy(sid)
        asyncio.run(main())

    def test_aclose_kills_running_commands_instead_of_waiting(self):
        marker = f"sbx-aclose-{os.getpid()}-{time.monotonic_ns()}"

        async def main():
            h = sbx.AsyncHost(LOCAL)
            sid = await h.create()
            runs = [asyncio.ensure_future(h.exec(sid, f"exec -a {marker} sleep 60"))
                    for _ in range(2)]
            await _until(lambda: len(alive(marker)) == 2)
            t0 = time.monotonic()
            await h.aclose()
            self.assertLess(time.monotonic() - t0, 10.0)  # not the commands' 60 s
            self.assertEqual(alive(marker), [])
            for r in runs:
                self.assertEqual((await r).signal, 9)
        asyncio.run(main())


class CancelTokenTest(unittest.TestCase):
    def test_each_exec_carries_a_token_of_its_own_and_a_given_one_wins(self):
        async def main():
            async with sbx.AsyncHost(LOCAL) as h:
                sid = await h.create()
                got = [(await h.exec(sid, 'printf %s "$SBX_CANCEL_TOKEN"')).stdout
                       for _ in range(3)]
                self.assertEqual(len(set(got)), 3)
                for tok in got:
                    self.assertRegex(tok, r"^[0-9a-f]{16}-[0-9a-f]+$")
                # A token in env is replaced by the one cancel() will look for.
                r = await h.exec(sid, 'printf %s "$SBX_CANCEL_TOKEN"', cancel_token="mine-1234",
                                 env={"SBX_CANCEL_TOKEN": "theirs-99", "A": "1"})
                self.assertEqual(r.stdout, "mine-1234")
                r = await h.exec(sid, 'printf %s "$A"', env={"A": "b c"})
                self.assertEqual(r.stdout, "b c")
                await h.destroy(sid)
        asyncio.run(main())

    def test_a_forked_child_draws_tokens_apart_from_its_parent(self):
        from sbx.host import _new_token
        mine = _new_token()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(w, _new_token().encode())
            os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        child = os.read(r, 100).decode()
        os.close(r)
        self.assertNotEqual(child.split("-")[0], mine.split("-")[0])
        self.assertNotEqual(child, _new_token())


class ContextManagerTest(unittest.TestCase):
    def test_sandbox_blocks_destroy_their_sandbox(self):
        with sbx.Host(LOCAL) as h:
            with h.sandbox() as sb:
                self.assertEqual(sb.exec("echo in").stdout, "in\n")
                sid = sb.id
            self.assertEqual(h.status(sid), "gone")

        async def main():
            async with sbx.AsyncHost(LOCAL) as h:
                async with await h.sandbox() as sb:
                    self.assertEqual((await sb.exec("echo in")).stdout, "in\n")
                self.assertEqual(await h.status(sb.id), "gone")
        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
