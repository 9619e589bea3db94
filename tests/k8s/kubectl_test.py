#!/usr/bin/env python3
"""The kubectl oracle: if kubectl accepts the stand-in, its wire format is what client-go
expects. Runs run/get/wait/exec/cp/delete with the oldest and newest preinstalled kubectl.

kubectl 1.27 and 1.28 speak SPDY for exec (the stand-in, like the plugin, only does
WebSocket), so with them the test covers the REST verbs; 1.29 is driven over WebSocket v5 by
KUBECTL_REMOTE_COMMAND_WEBSOCKETS=true, and 1.30+ use v5 by default.

usage: kubectl_test.py WORKDIR"""
import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import standin_ctl  # noqa: E402

BIN = "/usr/lib/google-cloud-sdk/bin/kubectl.1.%d"
WORK = None

# On connect the server writes one empty message on the lowest writable channel (k8s.md
# section 1.4); client-go's WebSocket reader can see it before it has made its streams and then
# logs this line on stderr. It is kubectl's diagnostic of a race inside the client, seen
# against real clusters too, and the message it drops is empty.
CLIENT_RACE = re.compile(rb"^E\d{4} [\d:. ]+\d+ websocket\.go:\d+\] "
                         rb"Unknown stream id \d+, discarding message\n", re.M)


class Kubectl(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = os.path.join(WORK, "standin")
        # kubectl drops exec output that comes before it made its streams: give the command
        # the start-up time a container runtime takes (see standin.py --exec-start-delay).
        standin_ctl.start(cls.dir, ["--exec-start-delay", "0.3"])

    @classmethod
    def tearDownClass(cls):
        standin_ctl.stop(cls.dir)

    def k(self, minor, *args, stdin=None, env=None, rc=0):
        e = dict(os.environ, KUBECONFIG=os.path.join(self.dir, "kubeconfig"))
        e.pop("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", None)
        e.update(env or {})
        p = subprocess.run([BIN % minor, "--cache-dir", os.path.join(WORK, "cache%d" % minor)]
                           + list(args), input=stdin, capture_output=True, env=e, timeout=60)
        self.assertEqual(p.returncode, rc, "kubectl 1.%d %s: %s" % (minor, args, p.stderr))
        return p

    def lifecycle(self, minor):
        name = "oracle-%d" % minor
        label = "app=oracle-%d" % minor
        p = self.k(minor, "run", name, "--image=busybox", "--restart=Never",
                   "--labels=" + label)
        self.assertEqual(p.stdout, b"pod/%s created\n" % name.encode())
        # A failing case must not leave its pod to the next one.
        self.addCleanup(self.k, minor, "delete", "pod", name, "--ignore-not-found",
                        "--timeout=20s")
        p = self.k(minor, "wait", "--for=condition=Ready", "pod/" + name, "--timeout=20s")
        self.assertEqual(p.stdout, b"pod/%s condition met\n" % name.encode())
        pod = json.loads(self.k(minor, "get", "pod", name, "-o", "json").stdout)
        self.assertEqual(pod["status"]["phase"], "Running")
        self.assertEqual(pod["metadata"]["labels"], {"app": "oracle-%d" % minor})
        self.assertTrue(pod["metadata"]["uid"])
        p = self.k(minor, "get", "pods", "-l", label, "-o", "name")
        self.assertEqual(p.stdout, b"pod/%s\n" % name.encode())
        p = self.k(minor, "run", name, "--image=busybox", "--restart=Never", rc=1)
        self.assertIn(b'pods "%s" already exists' % name.encode(), p.stderr)
        return name

    def delete(self, minor, name):
        p = self.k(minor, "delete", "pod", name, "--timeout=20s")
        self.assertEqual(p.stdout, b'pod "%s" deleted\n' % name.encode())
        p = self.k(minor, "get", "pod", name, rc=1)
        self.assertIn(b'pods "%s" not found' % name.encode(), p.stderr)

    def exec_and_cp(self, minor, name, env=None):
        p = self.k(minor, "exec", name, "--", "sh", "-c", "echo out; echo err >&2; exit 3",
                   env=env, rc=3)
        self.assertEqual(p.stdout, b"out\n")
        self.assertEqual(CLIENT_RACE.sub(b"", p.stderr),
                         b"err\ncommand terminated with exit code 3\n")
        p = self.k(minor, "exec", "-i", name, "--", "wc", "-c", stdin=b"x" * 100000, env=env)
        self.assertEqual(p.stdout.strip(), b"100000")
        src = os.path.join(WORK, "src-%d.bin" % minor)
        data = bytes(range(256)) * 1000
        with open(src, "wb") as f:
            f.write(data)
        self.k(minor, "cp", src, "%s:copied.bin" % name, env=env)
        p = self.k(minor, "exec", name, "--", "cat", "copied.bin", env=env)
        self.assertEqual(p.stdout, data)
        back = os.path.join(WORK, "back-%d.bin" % minor)
        self.k(minor, "cp", "%s:copied.bin" % name, back, env=env)
        with open(back, "rb") as f:
            self.assertEqual(f.read(), data)

    @unittest.skipUnless(os.path.exists(BIN % 27), "kubectl 1.27 is not installed")
    def test_kubectl_1_27_rest(self):
        self.delete(27, self.lifecycle(27))

    @unittest.skipUnless(os.path.exists(BIN % 29), "kubectl 1.29 is not installed")
    def test_kubectl_1_29_websocket(self):
        name = self.lifecycle(29)
        self.exec_and_cp(29, name, env={"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "true"})
        self.delete(29, name)

    @unittest.skipUnless(os.path.exists(BIN % 33), "kubectl 1.33 is not installed")
    def test_kubectl_1_33_full(self):
        name = self.lifecycle(33)
        self.exec_and_cp(33, name)
        self.delete(33, name)


if __name__ == "__main__":
    WORK = os.path.abspath(sys.argv.pop(1))
    os.makedirs(WORK, exist_ok=True)
    unittest.main(verbosity=2)
