"""Sessions through the Python binding: a second Host (as a new process would make) reconnects
to the session's sandbox, the record carries the absolute asset paths, pause keeps it, and
end forgets it."""
import os
import shutil
import unittest

import sbx

TMP = os.path.join(os.environ["LEDGER_TMP"], "py_sessions")


class PySessions(unittest.TestCase):
    def test_start_reconnect_pause_end(self):
        shutil.rmtree(TMP, ignore_errors=True)
        root = os.path.join(TMP, "sandboxes")
        os.makedirs(root)
        state = os.path.join(TMP, "state")
        cfg = {"data_source": {"sandbox": {"type": "local", "root": root}}}
        asset = os.path.join(TMP, "a.txt")
        with open(asset, "w") as f:
            f.write("asset\n")
        with sbx.Host(cfg, state_dir=state) as h:
            sid, how = h.session_start("u", "s", assets={asset: "in/a.txt"})
            self.assertEqual(how, "created")
            h.write_file(sid, "note.txt", b"one\n")
        with sbx.Host(cfg, state_dir=state) as h:
            self.assertEqual(h.session_start("u", "s"), (sid, "reused"))
            self.assertEqual(h.read_file(sid, "note.txt"), b"one\n")
            self.assertEqual(h.read_file(sid, "in/a.txt"), b"asset\n")
            rec = h.session_get("u", "s")
            self.assertEqual((rec.user_id, rec.session_id, rec.sandbox_id, rec.state),
                             ("u", "s", sid, "running"))
            self.assertEqual(rec.assets, {os.path.realpath(asset): "in/a.txt"})
            try:
                h.session_pause("u", "s")
                self.assertEqual(h.session_get("u", "s").state, "paused")
                self.assertEqual(h.session_start("u", "s"), (sid, "resumed"))
            except sbx.Unsupported as e:
                self.assertEqual((e.name, e.message),
                                 ("SBX_E_UNSUPPORTED", "local: pause: needs a writable cgroup "
                                  "freezer; this machine uses the subreaper fallback"))
            h.session_end("u", "s")
            self.assertEqual(os.listdir(root), [])
            with self.assertRaises(sbx.SandboxNotFound) as cm:
                h.session_get("u", "s")
            self.assertEqual((cm.exception.name, cm.exception.message),
                             ("SBX_E_NOT_FOUND",
                              "session: get: no session 's' for user 'u'; start it first"))


if __name__ == "__main__":
    unittest.main()
