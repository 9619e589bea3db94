import unittest

from sbx.adapters.nexau import SandboxStatus, SbxSandbox


class NexAUTest(unittest.TestCase):
    def setUp(self):
        self.sb = SbxSandbox({"type": "local", "output_char_threshold": 100,
                              "truncate_head_chars": 10, "truncate_tail_chars": 10})

    def tearDown(self):
        self.sb.stop()

    def test_execute_bash_fields(self):
        r = self.sb.execute_bash("echo hi")
        self.assertEqual((r.status, r.stdout, r.exit_code, r.truncated),
                         (SandboxStatus.SUCCESS, "hi\n", 0, False))
        self.assertEqual(r.original_stdout_length, 3)
        self.assertTrue(r.stdout_file.endswith("stdout.txt"))
        big = self.sb.execute_bash("head -c 500 /dev/zero | tr '\\0' a")
        self.assertTrue(big.truncated)
        self.assertEqual(big.original_stdout_length, 500)
        self.assertIn("... [480 characters omitted] ...", big.stdout)
        slow = self.sb.execute_bash("sleep 5", timeout=300)
        self.assertEqual(slow.status, SandboxStatus.TIMEOUT)
        bad = self.sb.execute_bash("exit 9")
        self.assertEqual((bad.status, bad.exit_code), (SandboxStatus.ERROR, 9))

    def test_file_methods(self):
        w = self.sb.write_file("a/b/c.txt", "one two two")
        self.assertEqual(w.status, SandboxStatus.SUCCESS)
        self.assertEqual(self.sb.read_file("a/b/c.txt").content, "one two two")
        self.assertTrue(self.sb.file_exists("a/b/c.txt"))
        self.assertFalse(self.sb.file_exists("a/nope"))
        e = self.sb.edit_file("a/b/c.txt", "two", "2")
        self.assertEqual(e.error, "old_string must match exactly once; found 2 matches")
        e = self.sb.edit_file("a/b/c.txt", "one", "1")
        self.assertEqual(e.status, SandboxStatus.SUCCESS)
        self.assertEqual(self.sb.read_file("a/b/c.txt").content, "1 two two")
        self.assertEqual(self.sb.edit_file("new.txt", "", "fresh").status, SandboxStatus.SUCCESS)
        self.assertEqual(self.sb.edit_file("new.txt", "", "again").error,
                         "File already exists: new.txt")
        self.assertEqual(self.sb.glob("**/*.txt"), ["a/b/c.txt", "new.txt"])
        names = [f.path for f in self.sb.list_files("a", recursive=True)]
        self.assertEqual(names, ["a/b", "a/b/c.txt"])
        info = self.sb.get_file_info("new.txt")
        self.assertEqual((info.exists, info.is_file, info.size), (True, True, 5))
        self.assertFalse(self.sb.get_file_info("missing").exists)
        self.assertEqual(self.sb.read_file("missing").error, "File does not exist: missing")


if __name__ == "__main__":
    unittest.main()
