"""The LoongSage client without coda installed (sbx's own create_sandbox_client)."""
import unittest

from sbx.adapters import loongsage as ls
from sbx.adapters.loongsage import SbxSandboxClient, create_sandbox_client


class LoongSageTest(unittest.TestCase):
    def test_type_none_and_empty_give_no_client(self):
        self.assertFalse(ls.UPSTREAM)
        self.assertIsNone(create_sandbox_client({"type": "none"}))
        self.assertIsNone(create_sandbox_client({"type": ""}))
        self.assertIsNone(create_sandbox_client(None))

    def test_create_execute_delete_shapes(self):
        client = create_sandbox_client({"type": "local", "command_exec_timeout_seconds": 1,
                                        "sandbox_creation_timeout_seconds": 60})
        self.assertIsInstance(client, SbxSandboxClient)
        self.assertEqual((client.timeout, client.ignored_keys),
                         (1, ["sandbox_creation_timeout_seconds"]))
        sid = client.create(image="ignored-by-local")
        try:
            client.execute(sid, "mkdir -p w")
            res = client.execute(sid, "pwd; echo e >&2; exit 2", workdir="w")
            self.assertEqual(sorted(res), ["exit_code", "stderr", "stdout", "success"])
            self.assertTrue(res["stdout"].rstrip().endswith("/w"))
            self.assertEqual((res["stderr"], res["exit_code"], res["success"]), ("e\n", 2, False))
            ok = client.execute(sid, "true")
            self.assertEqual((ok["exit_code"], ok["success"]), (0, True))
            slow = client.execute(sid, "sleep 10", timeout=0.1)  # per-call: swallowed
            self.assertEqual(slow["exit_code"], 124)
        finally:
            client.delete(sid)
        client.delete(sid)  # missing is a success


if __name__ == "__main__":
    unittest.main()
