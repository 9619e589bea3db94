"""SbxSandbox and SbxSandboxManager with NexAU importable (stand-ins at NexAU's import paths):
NexAU's own types, its whole BaseSandbox surface as LocalSandbox reports it, background tasks
on sbx jobs, the manager surface, and NexAU's builtin tools' write -> run -> read -> replace
loop unchanged."""
import dataclasses
import os
import stat
import tempfile
import time
import unittest
from pathlib import Path
from unittest import mock

from proctable import alive
import standins  # noqa: F401  (first: NexAU's import paths)
from nexau.archs.sandbox import base_sandbox as nx
from nexau.archs.tool import builtin as tools

from sbx import Host, SandboxNotFound
from sbx.adapters import nexau as adapter
from sbx.adapters.nexau import SbxSandbox, SbxSandboxManager




class TypesTest(unittest.TestCase):
    def test_upstream_classes_are_used(self):
        self.assertTrue(adapter.UPSTREAM)
        self.assertTrue(issubclass(SbxSandbox, nx.BaseSandbox))
        self.assertTrue(issubclass(SbxSandboxManager, nx.BaseSandboxManager))
        for name in ("CommandResult", "FileOperationResult", "FileInfo", "CodeExecutionResult",
                     "SandboxStatus", "SandboxFileError", "SandboxError",
                     "smart_truncate_output"):
            self.assertIs(getattr(adapter, name), getattr(nx, name), name)

    def test_fields_and_lazy_construction(self):
        names = [f.name for f in dataclasses.fields(SbxSandbox) if f.init]
        self.assertEqual(names[:6], ["sandbox_id", "envs", "work_dir", "output_char_threshold",
                                     "truncate_head_chars", "truncate_tail_chars"])
        sb = SbxSandbox(sandbox_id="label", work_dir="/nonexistent/never/made")
        self.assertIsNone(sb.host)  # constructing makes nothing
        self.assertEqual(sb.work_dir, Path("/nonexistent/never/made"))
        self.assertFalse(Path("/nonexistent/never").exists())
        self.assertEqual(str(sb), "SbxSandbox: label (/nonexistent/never/made)")
        d = sb.dict()
        self.assertEqual((d["sandbox_id"], d["work_dir"]), ("label", "/nonexistent/never/made"))
        self.assertNotIn("sandbox_config", d)
        with self.assertRaises(TypeError):
            SbxSandbox({"type": "local"})  # keyword-only, as NexAU's dataclasses


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.work = os.path.realpath(self.tmp.name)
        self.sb = SbxSandbox(sandbox_id="t", work_dir=self.work)

    def tearDown(self):
        for pid in list(self.sb.list_background_tasks()):
            self.sb.kill_background_task(pid)
        self.sb.close()
        self.tmp.cleanup()


class ShellTest(Base):
    def test_results_as_nexau_reports_them(self):
        ok = self.sb.execute_bash("echo hi; echo e >&2")
        self.assertIsInstance(ok, nx.CommandResult)
        self.assertEqual((ok.status, ok.stdout, ok.stderr, ok.exit_code, ok.error, ok.truncated,
                          ok.original_stdout_length, ok.original_stderr_length),
                         (nx.SandboxStatus.SUCCESS, "hi\n", "e\n", 0, None, False, None, None))
        base = self.sb.get_bash_tool_results_base_path()
        self.assertEqual(base, os.path.join(tempfile.gettempdir(), "nexau_bash_tool_results"))
        self.assertEqual(os.path.dirname(ok.output_dir), base)
        self.assertEqual(Path(ok.output_dir, "command.txt").read_text(), "echo hi; echo e >&2")
        self.assertEqual(Path(ok.stdout_file).read_text(), "hi\n")
        bad = self.sb.execute_shell("exit 9")
        self.assertEqual((bad.status, bad.exit_code, bad.error),
                         (nx.SandboxStatus.ERROR, 9, "Command failed with exit code 9"))
        t0 = time.monotonic()
        slow = self.sb.execute_shell("echo before; sleep 60", timeout=5000)  # milliseconds
        self.assertEqual((slow.status, slow.error, slow.stdout),
                         (nx.SandboxStatus.TIMEOUT, "Command timed out after 5000ms", "before\n"))
        self.assertLess(slow.exit_code, 0)
        self.assertLess(time.monotonic() - t0, 40)  # sanity bound: not the command's 60 s

    def test_default_timeout_is_nexau_s(self):
        self.sb.start()
        with mock.patch.object(self.sb.host, "exec", wraps=self.sb.host.exec) as spy:
            self.sb.execute_shell("true")
        self.assertEqual(spy.call_args.kwargs["timeout"], 120.0)

    def test_cleaning_and_truncation_are_nexaus_unless_opted_out(self):
        nx.CALLS.clear()
        r = self.sb.execute_bash("seq 1 10")
        self.assertEqual(r.stdout, "1\n... [8 similar lines collapsed]\n10\n")
        self.assertIn("smart_truncate_output", nx.CALLS)
        small = SbxSandbox(work_dir=self.work, output_char_threshold=100,
                           truncate_head_chars=10, truncate_tail_chars=10)
        try:
            big = small.execute_bash("head -c 500 /dev/zero | tr '\\0' a")
            self.assertEqual((big.truncated, big.original_stdout_length), (True, 500))
            self.assertEqual(big.stdout, "a" * 10 + "\n\n... [480 characters omitted] ...\n"
                             f"(Full output: {big.output_dir}/stdout.txt)\n\n" + "a" * 10)
            self.assertEqual(len(Path(big.stdout_file).read_text()), 500)
        finally:
            small.close()
        raw = SbxSandbox(work_dir=self.work, clean_output=False)
        try:
            r = raw.execute_bash("seq 1 10")
            self.assertEqual((r.stdout, r.truncated, r.original_stdout_length),
                             ("".join(f"{i}\n" for i in range(1, 11)), False, None))
        finally:
            raw.close()

    def test_envs_cwd_and_heredoc(self):
        sb = SbxSandbox(work_dir=self.work, envs={"A": "inst", "B": "inst"})
        try:
            r = sb.execute_shell("echo $A $B", envs={"B": "call"})
            self.assertEqual(r.stdout, "inst call\n")
            sb.create_directory("sub")
            self.assertEqual(sb.execute_shell("pwd", cwd="sub").stdout, f"{self.work}/sub\n")
            cmd = "cat > out.txt <<'EOF'\n$HOME stays\nEOF\ncat out.txt"
            prepared = sb.prepare_shell_command(cmd)
            self.assertRegex(prepared, r"^bash .*/_nexau_heredoc_[0-9a-f]{8}\.sh$")
            self.assertEqual(Path(prepared.split(" ", 1)[1]).read_text(), cmd)
            self.assertEqual(sb.execute_shell(cmd).stdout, "$HOME stays\n")
        finally:
            sb.close()

    def test_execute_code(self):
        r = self.sb.execute_code("print(6 * 7)", "python")
        self.assertEqual((r.status, r.outputs), (nx.SandboxStatus.SUCCESS,
                                                 [{"type": "stdout", "text": "42\n"}]))
        self.assertIsInstance(r, nx.CodeExecutionResult)
        bad = self.sb.execute_code("def (", nx.CodeLanguage.PYTHON)
        self.assertEqual((bad.status, bad.error_type), (nx.SandboxStatus.ERROR, "ExecutionError"))
        self.assertIn("SyntaxError", bad.traceback[0])
        other = self.sb.execute_code("x", "ruby")
        self.assertEqual((other.error_type, other.error_value),
                         ("ValueError", "Unsupported language: ruby."))
        self.assertEqual([n for n in os.listdir(self.work) if n.startswith("_nexau")], [])


class BackgroundTest(Base):
    def test_task_lifecycle_on_sbx_jobs(self):
        r = self.sb.execute_bash("echo started; sleep 60", background=True)
        pid = r.background_pid
        self.assertGreater(pid, 0)
        self.assertEqual(r.stdout, f"Background task started (pid: {pid})\n"
                                   f"Output will be saved to {r.output_dir}/")
        self.assertEqual(self.sb.list_background_tasks()[pid]["command"],
                         "echo started; sleep 60")
        st = self.sb.get_background_task_status(pid)
        self.assertEqual((st.status, st.exit_code, st.background_pid),
                         (nx.SandboxStatus.RUNNING, -1, pid))
        k = self.sb.kill_background_task(pid)
        self.assertEqual((k.status, k.stdout), (nx.SandboxStatus.SUCCESS,
                                                f"Background task (pid={pid}) killed successfully"))
        gone = self.sb.get_background_task_status(pid)
        self.assertEqual(gone.error, f"Background task not found: pid={pid}")
        self.assertEqual(self.sb.kill_background_task(pid).error,
                         f"Background task not found: pid={pid}")
        running = self.sb.execute_bash("sleep 60", background=True).background_pid
        self.assertTrue(Path(self.work, ".sbx/jobs").is_dir())
        self.sb.close()  # ends its tasks; the user's folder keeps no .sbx
        self.assertEqual(os.listdir(self.work), [])
        self.assertIn(running, self.sb.list_background_tasks())

    def test_finished_task_and_exit_code(self):
        ok = self.sb.execute_bash("echo done", background=True).background_pid
        bad = self.sb.execute_bash("echo no >&2; exit 4", background=True).background_pid
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            a = self.sb.get_background_task_status(ok)
            b = self.sb.get_background_task_status(bad)
            if a.status != nx.SandboxStatus.RUNNING and b.status != nx.SandboxStatus.RUNNING:
                break
            time.sleep(0.05)
        self.assertEqual((a.status, a.exit_code, a.stdout), (nx.SandboxStatus.SUCCESS, 0, "done\n"))
        self.assertEqual((b.status, b.exit_code, b.stderr, b.error),
                         (nx.SandboxStatus.ERROR, 4, "no\n", "Command failed with exit code 4"))

    def test_kill_ends_the_whole_tree(self):
        marker = f"sbx-bg-{os.getpid()}-{time.monotonic_ns()}"
        pid = self.sb.execute_bash(f"bash -c 'exec -a {marker} sleep 120' & sleep 120",
                                   background=True).background_pid
        deadline = time.monotonic() + 30
        while not alive(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertTrue(alive(marker))
        self.sb.kill_background_task(pid)
        deadline = time.monotonic() + 30
        while alive(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(alive(marker), [])


class FilesTest(Base):
    def test_read_write_delete(self):
        w = self.sb.write_file("a/b.txt", "x\r\ny")
        self.assertEqual((w.status, w.size), (nx.SandboxStatus.SUCCESS, 4))
        self.assertEqual(self.sb.read_file("a/b.txt").content, "x\ny")  # text mode
        self.assertEqual(self.sb.read_file("a/b.txt", binary=True).content, b"x\r\ny")
        self.assertEqual(self.sb.read_file("missing").error, "File does not exist: missing")
        Path(self.work, "bin").write_bytes(b"\xff\xfe")
        self.assertEqual(self.sb.read_file("bin").error,
                         "Failed to read file: 'utf-8' codec can't decode byte 0xff in "
                         "position 0: invalid start byte")
        no = self.sb.write_file("no/such/f.txt", "x", create_directories=False)
        self.assertEqual(no.error, "Failed to write file: [Errno 2] No such file or directory: "
                                   f"'{self.work}/no/such/f.txt'")
        self.assertFalse(Path(self.work, "no").exists())
        self.assertEqual(self.sb.delete_file("a").status, nx.SandboxStatus.SUCCESS)
        self.assertEqual(self.sb.delete_file("a").error, "File does not exist: a")

    def test_info_list_and_glob(self):
        self.sb.write_file("top.py", "print(1)\n")
        self.sb.write_file("sub/b.py", "x")
        self.sb.write_file(".hidden.py", "x")
        os.chmod(Path(self.work, "top.py"), 0o640)
        info = self.sb.get_file_info("top.py")
        self.assertIsInstance(info, nx.FileInfo)
        self.assertEqual((info.path, info.exists, info.is_file, info.size, info.permissions,
                          stat.S_ISREG(info.mode), stat.S_IMODE(info.mode)),
                         ("top.py", True, True, 9, "rw-r-----", True, 0o640))
        self.assertRegex(info.modified_time, r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$")
        self.assertIn(info.encoding, ("utf-8", "ascii"))
        self.assertEqual(self.sb.get_file_info("nope"), nx.FileInfo(path="nope", exists=False))
        listed = {Path(f.path).name: f for f in self.sb.list_files(".")}
        self.assertEqual(set(listed) - {".sbx"}, {"top.py", "sub", ".hidden.py"})
        self.assertEqual((listed["sub"].size, listed["sub"].mode, listed["sub"].is_directory),
                         (0, None, True))
        self.assertEqual(listed["top.py"].path, f"{self.work}/top.py")
        self.assertEqual(sorted(Path(f.path).name for f in
                                self.sb.list_files(".", recursive=True, pattern="*.py")),
                         [".hidden.py", "b.py", "top.py"])  # pathlib: wildcards match dots
        self.assertEqual(self.sb.glob("*.py"), ["top.py"])  # glob: one folder, no dot names
        self.assertEqual(self.sb.glob("**/*.py"), ["sub/b.py", "top.py"])
        self.assertEqual(self.sb.glob("**/*.py", recursive=False), ["sub/b.py"])
        self.assertEqual(self.sb.glob(f"{self.work}/sub/*"), ["sub/b.py"])
        with self.assertRaises(nx.SandboxFileError) as cm:
            self.sb.list_files("nope")
        self.assertEqual(str(cm.exception), "Failed to list files: Directory does not exist: nope")

    def test_edit_touches_only_the_match(self):
        Path(self.work, "f.txt").write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\nthree two\r\n")
        r = self.sb.edit_file("f.txt", "\r\ntwo\r\nthree", "\r\n2\r\nthree")
        self.assertEqual(r.status, nx.SandboxStatus.SUCCESS)
        self.assertEqual(Path(self.work, "f.txt").read_bytes(),
                         b"\xef\xbb\xbfone\r\n2\r\nthree two\r\n")
        many = self.sb.edit_file("f.txt", "t", "T")
        self.assertEqual(many.error, "Found 2 matches of the string to replace. For safety, this "
                         "tool only supports replacing exactly one occurrence at a time. Add "
                         "more lines of context to your edit and try again.")
        self.assertEqual(self.sb.edit_file("f.txt", "", "x").error,
                         "File already exists: f.txt. Use UPDATE operation instead.")
        self.assertEqual(self.sb.edit_file("g.txt", "a", "b").error,
                         "File does not exist: g.txt. Use CREATE operation instead.")
        self.assertEqual(self.sb.edit_file("f.txt", "zzz", "b").error,
                         "String to replace not found in file: f.txt")
        self.assertEqual(self.sb.edit_file("f.txt", "three two\r\n", "").status,
                         nx.SandboxStatus.SUCCESS)
        self.assertEqual(Path(self.work, "f.txt").read_bytes(), b"\xef\xbb\xbfone\r\n2\r\n")

    def test_transfer_and_paths(self):
        with tempfile.TemporaryDirectory() as other:
            src = Path(other, "in.sh")
            src.write_text("echo hi\n")
            os.chmod(src, 0o755)
            up = self.sb.upload_file(str(src), "bin/in.sh")
            self.assertEqual((up.status, up.size), (nx.SandboxStatus.SUCCESS, 8))
            self.assertEqual(self.sb.execute_shell("./bin/in.sh").stdout, "hi\n")
            down = self.sb.download_file("bin/in.sh", f"{other}/x/out.sh")
            self.assertEqual((down.status, Path(other, "x/out.sh").read_text()),
                             (nx.SandboxStatus.SUCCESS, "echo hi\n"))
            self.assertEqual(self.sb.upload_file(f"{other}/none", "y").error,
                             f"Source file does not exist: {other}/none")
            Path(other, "tree/d").mkdir(parents=True)
            Path(other, "tree/d/f").write_text("f")
            self.sb.write_file("dst/old", "stale")
            self.assertTrue(self.sb.upload_directory(f"{other}/tree", "dst"))
            self.assertFalse(self.sb.file_exists("dst/old"))  # replaced, as LocalSandbox
            self.assertTrue(self.sb.download_directory("dst", f"{other}/back"))
            self.assertEqual(Path(other, "back/d/f").read_text(), "f")
            with self.assertRaises(nx.SandboxFileError):
                self.sb.upload_directory(f"{other}/none", "z")
        self.assertEqual(self.sb.get_temp_dir(), tempfile.gettempdir())
        self.assertEqual(self.sb.join_path("C:\\x", "y"), "C:\\x\\y")
        self.assertEqual(self.sb.join_path("/a", "b", "c"), "/a/b/c")
        self.assertEqual(self.sb.to_shell_path(Path("/a b")), "/a b")
        self.assertTrue(self.sb.create_directory("d1/d2"))
        self.assertTrue(self.sb.create_directory("d1/d2"))  # exist_ok


class OwnPathsTest(unittest.TestCase):
    """Outside LocalSandbox mode every path is the sandbox's and the temp dir is inside."""

    def test_sandbox_paths(self):
        with SbxSandbox(sandbox_config={"type": "local", "isolation": "plain"}) as sb:
            sid = sb.start()
            self.assertIsNotNone(sb.work_dir)
            r = sb.execute_bash("echo x")
            self.assertTrue(r.output_dir.startswith(str(sb.work_dir) + "/.nexau_tmp/"))
            self.assertEqual(sb.read_file(r.stdout_file).content, "x\n")
            self.assertEqual(sb.write_file("/etc/sbx-escape", "x").status, nx.SandboxStatus.ERROR)
        with Host() as h:  # the `with` block's end destroyed it
            try:
                self.assertEqual(h.status(sid), "gone")
            except SandboxNotFound:
                pass


class ManagerTest(unittest.TestCase):
    def test_manager_surface(self):
        class Sessions:  # the stand-in manager keeps state here
            states = {}
        with tempfile.TemporaryDirectory() as d:
            mgr = SbxSandboxManager(work_dir=d)
            sb = mgr.start_sync()  # no session context prepared: Agent(sandbox_manager=...)
            self.assertIsInstance(sb, SbxSandbox)
            self.assertTrue(mgr.is_running())
            self.assertIs(mgr.instance, sb)
            self.assertTrue(mgr.stop())
            self.assertFalse(mgr.is_running())
            self.assertFalse(mgr.stop())

            sessions = Sessions()
            mgr = SbxSandboxManager(work_dir=d)
            mgr.prepare_session_context(sessions, "u", "s", {"envs": {"K": "v"}})
            sb = mgr.start_sync()
            self.assertEqual(sb.execute_bash("echo $K").stdout, "v\n")
            state = sessions.states[("u", "s")]
            self.assertEqual((state["sandbox_type"], state["sandbox_id"]),
                             ("SbxSandbox", sb.sandbox_id))
            with tempfile.TemporaryDirectory() as assets:
                Path(assets, "SKILL.md").write_text("skill")
                mgr.add_upload_assets([(assets, f"{d}/.skills/s")])
            self.assertEqual(Path(d, ".skills/s/SKILL.md").read_text(), "skill")
            sid = sb.sandbox_id
            self.assertTrue(mgr.pause())
            self.assertFalse(mgr.is_running())
            again = mgr.start_sync()  # resumes the paused sandbox
            self.assertEqual(again.sandbox_id, sid)
            mgr2 = SbxSandboxManager(work_dir=d)  # another process: saved state reconnects
            mgr2.prepare_session_context(sessions, "u", "s", None)
            self.assertEqual(mgr2.start_sync().sandbox_id, sid)
            self.assertTrue(mgr.stop())


class ToolsLoopTest(unittest.TestCase):
    """NexAU's builtin tools' calls, unchanged, on SbxSandbox reached through the manager."""

    def test_write_run_read_replace(self):
        with tempfile.TemporaryDirectory() as d:
            mgr = SbxSandboxManager(work_dir=d)
            st = mock.Mock()
            st.get_sandbox.side_effect = mgr.start_sync
            steps = [
                tools.write_file("app/hello.py", "print('hello one')\n", st),
                tools.run_shell_command("python3 app/hello.py", st),
                tools.read_file("app/hello.py", st),
                tools.replace("app/hello.py", "hello one", "hello two", st),
                tools.run_shell_command("python3 hello.py", st, dir_path="app"),
                tools.read_file("app/hello.py", st),
                tools.run_shell_command("cat > app/d.txt <<'EOF'\nalpha\nEOF\ncat app/d.txt", st),
                tools.replace("app/d.txt", "alpha", "beta", st),
                tools.run_shell_command("grep -q alpha app/d.txt", st),
                tools.run_shell_command("sleep 30", st, timeout_ms=500),
            ]
            mgr.stop()
        self.assertNotIn("error", steps[0])
        self.assertEqual((steps[1]["exit_code"], steps[1]["stdout"]), (0, "hello one\n"))
        self.assertEqual(steps[2]["content"], "print('hello one')\n")
        self.assertNotIn("error", steps[3])
        self.assertEqual((steps[4]["exit_code"], steps[4]["stdout"]), (0, "hello two\n"))
        self.assertEqual(steps[5]["content"], "print('hello two')\n")
        self.assertEqual(steps[6]["stdout"], "alpha\n")
        self.assertNotIn("error", steps[7])
        self.assertEqual(steps[8]["exit_code"], 1)
        self.assertEqual((steps[9]["timed_out"], steps[9]["exit_code"]), (True, -1))


if __name__ == "__main__":
    unittest.main()
