import asyncio
import os
import shutil
import tempfile
import threading
import time
import unittest

import sbx

LOCAL = {"data_source": {"sandbox": {"type": "local", "timeout": 30}}}


class HostTest(unittest.TestCase):
    def setUp(self):
        self.host = sbx.Host(LOCAL)
        self.sid = self.host.create()

    def tearDown(self):
        self.host.destroy(self.sid)
        self.host.close()

    def test_id_is_alias_prefixed(self):
        self.assertTrue(self.sid.startswith("local:"), self.sid)

    def test_shell_and_argv_results(self):
        r = self.host.exec(self.sid, "echo out; echo err >&2; exit 3")
        self.assertEqual((r.exit_code, r.stdout, r.stderr), (3, "out\n", "err\n"))
        self.assertFalse(r.timed_out)
        self.assertFalse(r.truncated)
        self.assertEqual(r.original_stdout_length, 4)
        with open(r.stdout_file, "rb") as f:
            self.assertEqual(f.read(), b"out\n")
        r = self.host.exec(self.sid, ["printf", "%s|", "a b", "$HOME"])
        self.assertEqual(r.stdout, "a b|$HOME|")

    def test_bytes_survive(self):
        r = self.host.exec(self.sid, ["printf", "\\377\\000x"])
        self.assertEqual(r.stdout_raw, b"\xff\x00x")
        self.assertEqual(r.stdout_bytes, 3)

    def test_stdin_env_cwd(self):
        self.host.mkdir(self.sid, "sub")
        r = self.host.exec(self.sid, "read v; echo $v-$K; pwd", stdin=b"hello\n",
                           env={"K": "kv"}, cwd="sub")
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "hello-kv")
        self.assertTrue(lines[1].endswith("/sub"), lines[1])

    def test_timeout(self):
        r = self.host.exec(self.sid, "echo before; sleep 30", timeout=0.5)
        self.assertTrue(r.timed_out)
        self.assertEqual(r.stdout, "before\n")
        self.assertLess(r.duration, 1.5)

    def test_output_into_files_in_the_sandbox(self):
        """stdout_path / stderr_path: the files take the streams (from cwd), the result's
        texts stay empty; a file that cannot be opened is a PathError naming it, and the
        command does not run."""
        self.host.mkdir(self.sid, "sub")
        r = self.host.exec(self.sid, "echo out; echo err >&2; exit 3", cwd="sub",
                           stdout_path="o.txt", stderr_path="e.txt")
        self.assertEqual((r.exit_code, r.stdout, r.stderr, r.stdout_bytes), (3, "", "", 0))
        self.assertEqual(self.host.read_file(self.sid, "sub/o.txt"), b"out\n")
        self.assertEqual(self.host.read_file(self.sid, "sub/e.txt"), b"err\n")
        r = self.host.exec(self.sid, ["sh", "-c", "echo a; echo b >&2"], stdout_path="ab",
                           stderr_path="ab")
        self.assertEqual(self.host.read_file(self.sid, "ab"), b"a\nb\n")
        with self.assertRaises(sbx.PathError) as cm:
            self.host.exec(self.sid, "touch ran", stderr_path="no/dir/e")
        self.assertEqual(str(cm.exception), "local: exec: cannot open the stderr file no/dir/e: "
                         "No such file or directory (SBX_E_NO_FILE)")
        self.assertEqual(self.host.exec(self.sid, "ls ran").exit_code, 2)

    def test_write_file_data_kinds(self):
        """str goes as UTF-8, any bytes-like object as its bytes; anything else is a
        TypeError naming its type, and nothing is written."""
        import array
        cases = [("s.txt", "h\u00e9\n", b"h\xc3\xa9\n"),
                 ("ba.bin", bytearray(b"\x00ab"), b"\x00ab"),
                 ("mv.bin", memoryview(b"xyz")[1:], b"yz"),
                 ("ar.bin", array.array("B", [1, 2, 255]), b"\x01\x02\xff")]
        for name, data, want in cases:
            self.host.write_file(self.sid, name, data)
            self.assertEqual(self.host.read_file(self.sid, name), want, name)
        for bad in (None, 7, ["a"]):
            with self.assertRaises(TypeError) as cm:
                self.host.write_file(self.sid, "bad.txt", bad)
            self.assertEqual(str(cm.exception),
                             "sbx: write_file data must be str or bytes-like, not %s"
                             % type(bad).__name__)
        with self.assertRaises(sbx.PathError):
            self.host.read_file(self.sid, "bad.txt")

    def test_files(self):
        self.host.write_file(self.sid, "d/f.bin", b"\x00\x01\xfe")
        self.assertEqual(self.host.read_file(self.sid, "d/f.bin"), b"\x00\x01\xfe")
        st = self.host.stat(self.sid, "d/f.bin")
        self.assertEqual((st.kind, st.size), ("file", 3))
        self.assertEqual([e.name for e in self.host.list_dir(self.sid, "d")], ["f.bin"])
        self.host.remove(self.sid, "d", recursive=True)
        with self.assertRaises(sbx.PathError):
            self.host.read_file(self.sid, "d/f.bin")
        with self.assertRaises(sbx.PathError):
            self.host.read_file(self.sid, "../../etc/passwd")

    def test_error_mapping(self):
        with self.assertRaises(sbx.BadId):
            self.host.exec("no-colon", "true")
        with self.assertRaises(sbx.PluginError):
            self.host.exec("nosuchalias:abc", "true")
        other = self.host.create()
        self.host.destroy(other)
        with self.assertRaises(sbx.SandboxNotFound) as cm:
            self.host.exec(other, "true")
        self.assertIsInstance(cm.exception, sbx.InfrastructureError)
        self.assertEqual(cm.exception.name, "SBX_E_NOT_FOUND")
        self.host.destroy(other)  # already gone: success

    def test_create_waits_for_a_place_under_the_caps(self):
        # A data source of its own: the cap counts every process of the state dir.
        capped = {"data_sources": [{"name": "capped-host-test",
                                    "sandbox": {"type": "local", "max_concurrency": 2}}]}
        with sbx.Host(capped) as h:
            first = h.create("capped-host-test")
            second = h.create("capped-host-test", wait=0.1)  # a place is free: no wait
            with self.assertRaises(sbx.SbxError) as cm:
                h.create("capped-host-test", wait=0.3)
            self.assertEqual(cm.exception.name, "SBX_E_LIMIT")
            self.assertRegex(str(cm.exception), r"data source 'capped-host-test' has 2 live "
                             r"sandboxes, its max_concurrency; destroy one first "
                             r"\(waited 0\.[3-9]\d s\)")
            h.destroy(first)
            h.destroy(h.create("capped-host-test"))
            h.destroy(second)

    def test_nul_bytes_are_refused_not_cut(self):
        # ctypes passed "a.txt\0../.." as "a.txt" and "echo hi\0; rm ..." as "echo hi".
        self.host.write_file(self.sid, "a.txt", b"a")
        calls = [
            lambda: self.host.read_file(self.sid, "a.txt\0../../etc/passwd"),
            lambda: self.host.write_file(self.sid, "b\0c", b"x"),
            lambda: self.host.exec(self.sid, "echo hi\0; touch pwned"),
            lambda: self.host.exec(self.sid, ["echo", "a\0b"]),
            lambda: self.host.exec(self.sid, "true", env={"K": "v\0w"}),
            lambda: self.host.exec(self.sid, "true", cwd="sub\0/../.."),
            lambda: self.host.exec(self.sid + "\0x", "true"),
            lambda: self.host.stat(self.sid, "a\0"),
            lambda: self.host.list_dir(self.sid, ".\0"),
            lambda: self.host.mkdir(self.sid, "m\0"),
            lambda: self.host.remove(self.sid, "a.txt\0"),
            lambda: self.host.create(image="img\0x"),
            lambda: self.host.job("abc\0@" + self.sid),
            lambda: self.host.session_start("u\0", "s"),
        ]
        for call in calls:
            with self.assertRaises(ValueError) as cm:
                call()
            self.assertIn("NUL byte", str(cm.exception))
        r = self.host.exec(self.sid, "ls")
        self.assertEqual(r.stdout, "a.txt\n")

    def test_env_keys_with_equals_or_empty_are_refused(self):
        for env in ({"A=B": "c"}, {"": "c"}):
            with self.assertRaises(ValueError) as cm:
                self.host.exec(self.sid, "true", env=env)
            self.assertIn("must be non-empty without '='", str(cm.exception))
            with self.assertRaises(ValueError):
                self.host.create(env=env)

    def test_bad_config_names_the_key(self):
        # Plugin keys are checked when the plugin starts: at the first create.
        with sbx.Host({"data_source": {"sandbox": {"type": "local", "no_such_key": 1}}}) as h:
            with self.assertRaises(sbx.ConfigError) as cm:
                h.create()
        self.assertIn("unknown key 'no_such_key' for sandbox type 'local'", cm.exception.message)
        with self.assertRaises(sbx.ConfigError) as cm:
            sbx.Host({"data_source": {"sandbox": {"type": "local", "timeout": -1}}})
        self.assertIn("'timeout' is -1", cm.exception.message)


class ShareDirTest(unittest.TestCase):
    """create(share_dir=): a host folder is that sandbox's work dir, for that sandbox alone,
    so one Host serves sandboxes that each work in a folder of their own."""

    def setUp(self):
        self.host = sbx.Host(LOCAL)
        self.tmp = tempfile.mkdtemp(prefix="sbx-share-")
        self.a = os.path.join(self.tmp, "a")
        self.b = os.path.join(self.tmp, "b")
        os.mkdir(self.a)
        os.mkdir(self.b)

    def tearDown(self):
        self.host.close()
        shutil.rmtree(self.tmp)

    def test_each_sandbox_works_in_its_own_folder(self):
        sa = self.host.create(share_dir=self.a)
        sb = self.host.create(share_dir=self.b)
        try:
            self.assertEqual(self.host.exec(sa, "pwd; echo x > f").stdout, self.a + "\n")
            self.assertEqual(self.host.exec(sb, "pwd; echo y > f").stdout, self.b + "\n")
            with open(os.path.join(self.a, "f")) as f:
                self.assertEqual(f.read(), "x\n")
            # The folder's own path names the work dir, for files and for cwd; another
            # sandbox's folder is outside.
            self.host.write_file(sa, os.path.join(self.a, "d", "g"), b"z")
            self.assertEqual(self.host.read_file(sa, "d/g"), b"z")
            r = self.host.exec(sa, "pwd", cwd=os.path.join(self.a, "d"))
            self.assertEqual(r.stdout, os.path.join(self.a, "d") + "\n")
            with self.assertRaises(sbx.errors.PathError) as cm:
                self.host.read_file(sa, os.path.join(self.b, "f"))
            self.assertIn("is outside the sandbox work dir", cm.exception.message)
            # Another process's host reaches it by its id alone.
            with sbx.Host(LOCAL) as other:
                self.assertEqual(other.exec(sa, "cat f").stdout, "x\n")
        finally:
            self.host.destroy(sa)
            self.host.destroy(sb)
        # Destroy leaves the folders and their files.
        self.assertEqual(sorted(os.listdir(self.a)), ["d", "f"])
        self.assertEqual(os.listdir(self.b), ["f"])

    def test_bad_folders_are_refused(self):
        want = ("create: share_dir '%s' must be an existing folder given by its absolute "
                "path (at most 1023 bytes)")
        for bad in ("rel/dir", os.path.join(self.tmp, "missing"),
                    os.path.join(self.tmp, "file"), "/" + "x" * 1100):
            if bad.endswith("file"):
                open(bad, "w").close()
            with self.assertRaises(sbx.errors.InvalidArgument) as cm:
                self.host.create(share_dir=bad)
            self.assertEqual(cm.exception.message, want % bad[:300])


class ForkTest(unittest.TestCase):
    """A Host crosses os.fork() (multiprocessing's default start method on Linux): in the
    child it makes a libsbx host of its own at its first call, while the parent's threads go
    on using theirs. Before, a child that forked while another thread was starting a command
    waited forever, and children shared the parent's SQLite connection ("database is
    locked")."""

    @unittest.skipIf("libasan" in os.environ.get("LD_PRELOAD", ""),
                     "AddressSanitizer's allocator (GCC 12) is not fork-safe with threads: "
                     "run from a build without SBX_SANITIZE (.ci/run does)")
    def test_children_use_the_host_while_the_parent_works(self):
        host = sbx.Host(LOCAL)
        sid = host.create()
        stop = threading.Event()
        errors = []

        def churn():
            while not stop.is_set():
                try:
                    s = host.create()
                    host.exec(s, "true")
                    host.destroy(s)
                except Exception as e:  # reported below, with the children's
                    errors.append(repr(e))

        threads = [threading.Thread(target=churn) for _ in range(3)]
        for t in threads:
            t.start()
        kids = []
        try:
            for i in range(12):
                time.sleep(0.02)
                pid = os.fork()
                if pid == 0:
                    code = 1
                    try:
                        r = host.exec(sid, "echo child %d" % i)
                        s = host.create()
                        r2 = host.exec(s, "echo own")
                        host.destroy(s)
                        code = 0 if (r.stdout, r2.stdout) == ("child %d\n" % i, "own\n") else 2
                    finally:
                        os._exit(code)
                kids.append(pid)
            statuses = []
            for pid in kids:
                deadline = time.monotonic() + 120
                while True:
                    got, status = os.waitpid(pid, os.WNOHANG)
                    if got:
                        statuses.append(status)
                        break
                    if time.monotonic() > deadline:
                        os.kill(pid, 9)
                        os.waitpid(pid, 0)
                        statuses.append("hung")
                        break
                    time.sleep(0.01)
        finally:
            stop.set()
            for t in threads:
                t.join()
        self.assertEqual(statuses, [0] * len(kids))
        self.assertEqual(errors, [])
        self.assertEqual(host.exec(sid, "echo parent").stdout, "parent\n")
        host.destroy(sid)
        host.close()

    @unittest.skipIf("libasan" in os.environ.get("LD_PRELOAD", ""),
                     "AddressSanitizer's allocator (GCC 12) is not fork-safe with threads: "
                     "run from a build without SBX_SANITIZE (.ci/run does)")
    def test_async_host_in_a_child_loop(self):
        """An AsyncHost used in the parent serves a child's own event loop: its queue and
        pool are the parent's threads, so the child gets new ones."""
        ah = sbx.AsyncHost(LOCAL, max_workers=4)

        async def round_trip(text):
            sid = await ah.create()
            r = await ah.exec(sid, "echo " + text)
            await ah.destroy(sid)
            return r.stdout

        self.assertEqual(asyncio.run(round_trip("parent")), "parent\n")
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = 0 if asyncio.run(round_trip("child")) == "child\n" else 2
            finally:
                os._exit(code)
        deadline = time.monotonic() + 120
        status = "hung"
        while time.monotonic() < deadline:
            got, st = os.waitpid(pid, os.WNOHANG)
            if got:
                status = st
                break
            time.sleep(0.01)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        self.assertEqual(status, 0)
        self.assertEqual(asyncio.run(round_trip("again")), "again\n")

        async def close():
            await ah.aclose()

        asyncio.run(close())


if __name__ == "__main__":
    unittest.main()
