"""State dirs are tenants: the local backend's machine-global cgroups live in a folder of
their own per sandbox root (r-<hash of the root's real path>), so `rm` from another state dir
cannot reach a running sandbox, and gc reaps the cgroups that nothing can reach any more (a
root that was deleted, a sandbox folder that is gone) without touching live ones."""
import os
import shutil
import signal
import subprocess
import time
import unittest

from sbxtest import SbxCase, SBX

MOUNTS = ["/sys/fs/cgroup/sbx", "/sys/fs/cgroup/unified/sbx", "/sys/fs/cgroup/freezer/sbx"]


def namespace(root):
    h = 14695981039346656037
    for c in os.path.realpath(root).encode():
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "r-%016x" % h


def procs(cg):
    pids = []
    for d, _, files in os.walk(cg):
        if "cgroup.procs" in files:
            with open(os.path.join(d, "cgroup.procs")) as f:
                pids += [int(x) for x in f.read().split()]
    return pids


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class Tenants(SbxCase):
    def other(self, name, root=None):
        """Another tenant: its own state dir and config (default root unless given)."""
        d = os.path.join(self.tmp, name)
        os.makedirs(d, exist_ok=True)
        cfg = os.path.join(d, "config.yaml")
        with open(cfg, "w") as f:
            f.write("data_source:\n  sandbox:\n    type: local\n")
            if root:
                f.write("    root: %s\n" % root)
        env = dict(os.environ, SBX_STATE_DIR=os.path.join(d, "state"))
        env.pop("SBX_CONFIG", None)
        return cfg, env

    def run_as(self, tenant, *args):
        cfg, env = tenant
        p = subprocess.run([SBX, "--config", cfg] + list(args), env=env, capture_output=True,
                           timeout=120)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    def cgroup_of(self, root, sid):
        """The sandbox's cgroup, after checking it is in the root's namespace only."""
        for m in MOUNTS:
            path = os.path.join(m, namespace(root), self.backend(sid))
            if os.path.isdir(path):
                self.assertFalse(os.path.exists(os.path.join(m, self.backend(sid))),
                                 "a cgroup outside the root's namespace")
                return path
        self.skipTest("this machine gives local no cgroup (subreaper fallback)")

    def test_rm_from_another_state_dir_cannot_touch_a_running_sandbox(self):
        sid = self.ok("create").strip()
        self.cgroup_of(self.root, sid)
        runner = self.popen("exec", sid, "--", "sh", "-c", "sleep 2; echo survived")
        time.sleep(0.5)
        rc, out, err = self.run_as(self.other("intruder"), "rm", sid)
        # The intruder's root holds no such sandbox: deleting what is not there succeeds
        # (destroy is idempotent) and touches nothing.
        self.assertEqual((rc, err), (0, ""))
        out, err = runner.communicate(timeout=60)
        self.assertEqual((runner.returncode, out.decode()), (0, "survived\n"), err.decode())
        self.assertEqual(self.sandbox_dirs(), [self.backend(sid)])
        self.assertEqual(self.ok("exec", sid, "--", "echo", "still here"), "still here\n")
        self.ok("rm", sid)
        self.assertEqual(self.sandbox_dirs(), [])

    def test_gc_reaps_the_cgroups_of_a_deleted_root_and_leaves_live_ones(self):
        gone_root = os.path.join(self.tmp, "gone", "sandboxes")
        gone = self.other("gone", gone_root)
        rc, out, err = self.run_as(gone, "create")
        self.assertEqual(rc, 0, err)
        gone_sid = out.strip()
        gone_cg = self.cgroup_of(gone_root, gone_sid)
        rc, out, err = self.run_as(gone, "exec", gone_sid, "--", "sh", "-c",
                                   "sleep 300 >/dev/null 2>&1 & echo started")
        self.assertEqual((rc, out), (0, "started\n"), err)
        leftover = procs(gone_cg)
        self.assertEqual(len(leftover), 1)
        # Ours: a live sandbox with a leftover of its own.
        sid = self.ok("create").strip()
        cg = self.cgroup_of(self.root, sid)
        self.assertEqual(self.ok("exec", sid, "--", "sh", "-c",
                                 "sleep 300 >/dev/null 2>&1 & echo started"), "started\n")
        mine = procs(cg)
        self.assertEqual(len(mine), 1)
        # The other tenant's whole tree is deleted, its processes still running.
        shutil.rmtree(os.path.join(self.tmp, "gone"))
        self.ok("gc")
        self.assertFalse(os.path.exists(os.path.dirname(gone_cg)))
        deadline = time.time() + 10
        while alive(leftover[0]) and time.time() < deadline:
            time.sleep(0.05)
        self.assertFalse(alive(leftover[0]), "the deleted root's leftover still runs")
        self.assertEqual(procs(cg), mine)
        self.assertTrue(alive(mine[0]))
        self.ok("rm", sid)
        self.assertFalse(alive(mine[0]) and os.path.exists(cg))

    def test_gc_reaps_a_cgroup_whose_sandbox_folder_is_gone(self):
        keep = self.ok("create").strip()
        lost = self.ok("create").strip()
        lost_cg = self.cgroup_of(self.root, lost)
        self.assertEqual(self.ok("exec", lost, "--", "sh", "-c",
                                 "sleep 300 >/dev/null 2>&1 & echo started"), "started\n")
        pid = procs(lost_cg)[0]
        shutil.rmtree(os.path.join(self.root, self.backend(lost)))
        self.ok("gc")
        self.assertFalse(os.path.exists(lost_cg))
        deadline = time.time() + 10
        while alive(pid) and time.time() < deadline:
            time.sleep(0.05)
        self.assertFalse(alive(pid))
        self.assertTrue(os.path.isdir(self.cgroup_of(self.root, keep)))
        self.assertEqual(self.ok("exec", keep, "--", "echo", "ok"), "ok\n")
        self.ok("rm", keep, lost)


if __name__ == "__main__":
    unittest.main()
