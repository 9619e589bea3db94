"""SbxSandbox against NexAU's contract: built the way NexAU builds its sandboxes (keyword
dataclass fields), results and messages as NexAU's LocalSandbox reports them."""
import dataclasses
import itertools
import os
import tempfile
import unittest
from pathlib import Path, PurePosixPath, PureWindowsPath

from sbx.adapters.nexau import SandboxFileError, SandboxStatus, SbxSandbox


class ConstructionTest(unittest.TestCase):
    def test_keyword_fields_as_nexau_builds_sandboxes(self):
        with tempfile.TemporaryDirectory() as d:
            sb = SbxSandbox(sandbox_id="agent-1", work_dir=d, envs={"K": "v"},
                            output_char_threshold=100, truncate_head_chars=10,
                            truncate_tail_chars=10)
            try:
                self.assertEqual(sb.execute_bash("echo $K").stdout, "v\n")
                self.assertEqual(sb.dict()["work_dir"], os.path.abspath(d))
                self.assertEqual(sb.dict()["output_char_threshold"], 100)
            finally:
                sb.stop()

    def test_positional_config_is_refused(self):
        # NexAU's dataclass sandboxes are keyword-only; a dict in first place is a mistake.
        with self.assertRaises(TypeError):
            SbxSandbox({"type": "local"})

    def test_nexau_fields_are_the_dataclass_fields(self):
        names = [f.name for f in dataclasses.fields(SbxSandbox) if f.init]
        self.assertEqual(names[:6], ["sandbox_id", "envs", "work_dir", "output_char_threshold",
                                     "truncate_head_chars", "truncate_tail_chars"])


class JoinPathTest(unittest.TestCase):
    def test_join_path_is_nexaus_pathlib_join(self):
        """join_path takes a shortcut for plain POSIX paths: it must give exactly what
        NexAU's pathlib join gives, for every base and part built from awkward pieces."""
        def pathlib_join(base, *parts):
            drive = len(base) > 2 and base[0].isalpha() and base[1] == ":" and base[2] in "\\/"
            p = PureWindowsPath(base) if drive or "\\" in base else PurePosixPath(base)
            for x in parts:
                p = p / x
            return str(p)
        sb = SbxSandbox(work_dir=tempfile.gettempdir())
        pieces = ["/", ".", "a", "..", "\\", ".h", "C:"]
        tails = [("a",), (".",), ("..",), (".h",), ("a/b",), ("/abs",), ("a/",), ("b", "c"),
                 ("a", "."), ("\\w",)]
        for n in range(1, 5):
            for combo in itertools.product(pieces, repeat=n):
                base = "".join(combo)
                for parts in tails:
                    self.assertEqual(sb.join_path(base, *parts), pathlib_join(base, *parts),
                                     (base, parts))


class SharedHostTest(unittest.TestCase):
    def test_sandboxes_with_their_own_work_dirs_share_one_host(self):
        """LocalSandbox mode: each sandbox names its folder at create (share_dir), so the
        sandboxes of one config share a Host; closing one leaves the others working."""
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            sa = SbxSandbox(work_dir=os.path.join(a, "w"))
            sb = SbxSandbox(work_dir=b)
            try:
                self.assertEqual(sa.execute_bash("pwd").stdout, os.path.join(a, "w") + "\n")
                self.assertEqual(sb.execute_bash("pwd").stdout, b + "\n")
                self.assertIs(sa.host, sb.host)
                sa.stop()
                self.assertEqual(sb.execute_bash("echo still").stdout, "still\n")
                self.assertTrue(os.path.isdir(os.path.join(a, "w")))
            finally:
                sa.stop()
                sb.stop()
        other = SbxSandbox(work_dir=tempfile.gettempdir(), output_char_threshold=100,
                           truncate_head_chars=10, truncate_tail_chars=10)
        try:
            self.assertIsNot(other._host(), sb.host)  # another config, another host
        finally:
            other.stop()


class NexAUTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.sb = SbxSandbox(work_dir=self.tmp.name, output_char_threshold=100,
                             truncate_head_chars=10, truncate_tail_chars=10)

    def tearDown(self):
        self.sb.stop()
        self.tmp.cleanup()

    def test_work_dir_is_the_host_folder(self):
        self.sb.write_file("made.txt", "x")
        self.assertEqual((Path(self.tmp.name) / "made.txt").read_text(), "x")
        (Path(self.tmp.name) / "host.txt").write_text("from host")
        self.assertEqual(self.sb.execute_bash("cat host.txt").stdout, "from host")

    def test_output_folder_is_made_before_the_command_runs(self):
        """In LocalSandbox mode the output folder and command.txt are made before the command
        starts, by this process (no mkdir process per command); a folder that cannot be made
        is an ERROR result, and the command does not run."""
        r = self.sb.execute_bash("echo h\u00e9")
        self.assertEqual(r.stdout, "h\u00e9\n")
        self.assertEqual(Path(r.output_dir, "command.txt").read_bytes(), "echo h\u00e9".encode())
        self.assertEqual(Path(r.stdout_file).read_text(), "h\u00e9\n")
        marker = Path(self.tmp.name, "ran")
        with tempfile.TemporaryDirectory() as outside:
            blocker = Path(outside, "not-a-dir")  # a host file, outside the work dir
            blocker.write_text("")
            self.sb._tmp = str(blocker)  # the temp dir NexAU's output folders go under
            r = self.sb.execute_bash(f"touch {marker}")
            self.assertEqual((r.status, r.exit_code), (SandboxStatus.ERROR, -1))
            self.assertEqual(r.error, "Execution failed: [Errno 20] Not a directory: '%s'"
                             % os.path.join(str(blocker), "nexau_bash_tool_results"))
        blocker = Path(self.tmp.name, "not-a-dir")  # inside it: through sbx's file calls
        blocker.write_text("")
        self.sb._tmp = str(blocker)
        r = self.sb.execute_bash(f"touch {marker}")
        self.assertEqual((r.status, r.exit_code), (SandboxStatus.ERROR, -1))
        self.assertTrue(r.error.startswith("Execution failed: "), r.error)
        self.assertIn("not-a-dir", r.error)
        self.assertFalse(marker.exists())

    def test_foreground_command_is_bash_itself(self):
        """In LocalSandbox mode the backend opens stdout.txt and stderr.txt (exec's
        stdout_path and stderr_path), so no wrapper shell runs: $0 and bash's messages name
        bash's full path as LocalSandbox's do, and what a background child prints after the
        call has returned still lands in stdout.txt."""
        import shutil
        import time
        bash = shutil.which("bash")
        r = self.sb.execute_bash('echo "$0"; nosuchcmd')
        self.assertEqual(r.stdout, bash + "\n")
        self.assertEqual(r.stderr, f"{bash}: line 1: nosuchcmd: command not found\n")
        self.assertEqual(r.exit_code, 127)
        r = self.sb.execute_bash("(sleep 2; echo late) & echo now")
        self.assertEqual((r.exit_code, r.stdout), (0, "now\n"))
        deadline = time.monotonic() + 60
        while (Path(r.stdout_file).read_text() != "now\nlate\n" and
               time.monotonic() < deadline):
            time.sleep(0.05)
        self.assertEqual(Path(r.stdout_file).read_text(), "now\nlate\n")

    def test_wrapper_reports_a_folder_it_cannot_make(self):
        """Where the wrapper makes the output folder (backends other than LocalSandbox
        mode), a failure is exit 125 with its own message first on stderr, which
        execute_bash turns into an ERROR result."""
        import subprocess
        from sbx.adapters.nexau import _WRAP
        with tempfile.NamedTemporaryFile() as f:
            out = os.path.join(f.name, "o")
            p = subprocess.run(["/bin/sh", "-c", _WRAP, "sbx-nexau", out, "echo ran"],
                               capture_output=True, text=True)
        self.assertEqual((p.returncode, p.stdout, p.stderr),
                         (125, "", f"sbx-nexau: cannot make the output folder {out}\n"))

    def test_execute_bash_fields(self):
        r = self.sb.execute_bash("echo hi")
        self.assertEqual((r.status, r.stdout, r.exit_code, r.truncated, r.error),
                         (SandboxStatus.SUCCESS, "hi\n", 0, False, None))
        # NexAU's lengths are None unless the output was cut.
        self.assertEqual((r.original_stdout_length, r.original_stderr_length), (None, None))
        self.assertTrue(r.stdout_file.endswith("stdout.txt"))
        big = self.sb.execute_bash("head -c 500 /dev/zero | tr '\\0' a")
        self.assertTrue(big.truncated)
        self.assertEqual(big.original_stdout_length, 500)
        self.assertEqual(big.stdout,
                         "a" * 10 + "\n\n... [480 characters omitted] ...\n(Full output: "
                         f"{big.output_dir}/stdout.txt)\n\n" + "a" * 10)
        slow = self.sb.execute_bash("sleep 5", timeout=300)  # milliseconds
        self.assertEqual((slow.status, slow.error),
                         (SandboxStatus.TIMEOUT, "Command timed out after 300ms"))
        self.assertLess(slow.duration_ms, 4000)
        bad = self.sb.execute_bash("exit 9")
        self.assertEqual((bad.status, bad.exit_code, bad.error),
                         (SandboxStatus.ERROR, 9, "Command failed with exit code 9"))

    def test_file_methods(self):
        w = self.sb.write_file("a/b/c.txt", "one two two")
        self.assertEqual((w.status, w.size), (SandboxStatus.SUCCESS, 11))
        self.assertEqual(self.sb.read_file("a/b/c.txt").content, "one two two")
        self.assertTrue(self.sb.file_exists("a/b/c.txt"))
        self.assertFalse(self.sb.file_exists("a/nope"))
        e = self.sb.edit_file("a/b/c.txt", "two", "2")
        self.assertEqual(e.error, "Found 2 matches of the string to replace. For safety, this "
                         "tool only supports replacing exactly one occurrence at a time. Add "
                         "more lines of context to your edit and try again.")
        e = self.sb.edit_file("a/b/c.txt", "one", "1")
        self.assertEqual(e.status, SandboxStatus.SUCCESS)
        self.assertEqual(self.sb.read_file("a/b/c.txt").content, "1 two two")
        self.assertEqual(self.sb.edit_file("new.txt", "", "fresh").status, SandboxStatus.SUCCESS)
        self.assertEqual(self.sb.edit_file("new.txt", "", "again").error,
                         "File already exists: new.txt. Use UPDATE operation instead.")
        self.assertEqual(self.sb.glob("**/*.txt"), ["a/b/c.txt", "new.txt"])
        self.assertEqual(self.sb.glob("*.txt"), ["new.txt"])  # `*` stays in one folder
        names = [f.path for f in self.sb.list_files("a", recursive=True)]
        base = os.path.abspath(self.tmp.name)
        self.assertEqual(names, [f"{base}/a/b", f"{base}/a/b/c.txt"])
        info = self.sb.get_file_info("new.txt")
        self.assertEqual((info.exists, info.is_file, info.size, info.permissions),
                         (True, True, 5, "rw-r--r--"))
        self.assertFalse(self.sb.get_file_info("missing").exists)
        self.assertEqual(self.sb.read_file("missing").error, "File does not exist: missing")
        with self.assertRaises(SandboxFileError):
            self.sb.list_files("missing")

    def test_write_without_create_directories_fails_on_missing_parent(self):
        w = self.sb.write_file("no/such/dir/f.txt", "x", create_directories=False)
        self.assertEqual(w.status, SandboxStatus.ERROR)
        self.assertFalse((Path(self.tmp.name) / "no").exists())


if __name__ == "__main__":
    unittest.main()
