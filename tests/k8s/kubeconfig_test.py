#!/usr/bin/env python3
"""kubectl as the oracle for kubeconfig reading: for $KUBECONFIG lists (first file wins per
name and for current-context, missing files skipped, relative paths against each entry's own
file), named contexts, token files and exec credential plugins, what the k8s plugin resolved
(`sbx plugins --json`, the k8s backend's info) must be what `kubectl config view --flatten
--minify` shows, with the oldest and newest preinstalled kubectl. An exec credential plugin
must be run by the plugin exactly as kubectl runs it (argv, env, KUBERNETES_EXEC_INFO, stdin),
and the credential must open the stand-in apiserver to both.

usage: kubeconfig_test.py WORKDIR   (env SBX_BIN: the sbx command)"""
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import standin_ctl  # noqa: E402

BIN = "/usr/lib/google-cloud-sdk/bin/kubectl.1.%d"
MINORS = [m for m in (27, 33) if os.path.exists(BIN % m)]
SBX = os.environ.get("SBX_BIN")
WORK = None


def write(path, text, mode=0o600):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)


@unittest.skipUnless(MINORS and SBX, "kubectl 1.27/1.33 or SBX_BIN missing")
class Kubeconfig(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.standin = os.path.join(WORK, "standin")
        cls.port = standin_ctl.start(cls.standin)
        cls.token_file = os.path.join(cls.standin, "token")
        with open(cls.token_file) as f:
            cls.token = f.read().strip()
        # File a: the first in the lists. Relative paths: the CA is ../standin/ca.crt, the
        # token file a/tok.
        cls.a = os.path.join(WORK, "a")
        cls.b = os.path.join(WORK, "b")
        for d in (cls.a, cls.b):
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
        write(os.path.join(cls.a, "tok"), cls.token + "\n")
        write(os.path.join(cls.a, "config"), """apiVersion: v1
kind: Config
current-context: ctx-a
clusters:
- name: standin
  cluster:
    server: https://127.0.0.1:%d/
    certificate-authority: ../standin/ca.crt
    extensions:
    - name: client.authentication.k8s.io/exec
      extension: {audience: sbx, retries: 3, strict: true}
users:
- name: u-file
  user: {tokenFile: tok}
- name: shared
  user: {token: %s}
contexts:
- name: ctx-a
  context: {cluster: standin, user: u-file, namespace: ns-a}
- name: shared-ctx
  context: {cluster: standin, user: shared, namespace: from-a}
""" % (cls.port, cls.token))
        # File b: its current-context, its `standin` cluster, its `shared` user and
        # `shared-ctx` context lose to a's; its exec user and ctx-b context are its own.
        os.symlink(os.path.join(HERE, "exec_credential.py"), os.path.join(cls.b, "cred.py"))
        with open(os.path.join(cls.standin, "ca.crt"), "rb") as f:
            ca_b64 = base64.b64encode(f.read()).decode()
        cls.log = os.path.join(cls.b, "cred.log")
        write(os.path.join(cls.b, "config"), """apiVersion: v1
kind: Config
current-context: ctx-b
clusters:
- name: standin
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
- name: other
  cluster: {server: "https://127.0.0.1:%d", certificate-authority-data: %s}
users:
- name: shared
  user: {token: from-b, tokenFile: /nonexistent}
- name: u-exec
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./cred.py
      args: [--region, eu west]
      env:
      - {name: CRED_LOG, value: %s}
      - {name: CRED_TOKEN_FILE, value: %s}
      - {name: CRED_EXPIRY, value: "3600"}
      interactiveMode: IfAvailable
      provideClusterInfo: true
      installHint: not needed here
contexts:
- name: ctx-b
  context: {cluster: standin, user: u-exec, namespace: ns-b}
- name: shared-ctx
  context: {cluster: other, user: u-exec}
- name: other-ctx
  context: {cluster: other, user: shared}
""" % (cls.port, ca_b64, cls.log, cls.token_file))

    @classmethod
    def tearDownClass(cls):
        standin_ctl.stop(cls.standin)

    def kubectl(self, minor, kubeconfig, *args):
        env = dict(os.environ, KUBECONFIG=kubeconfig)
        p = subprocess.run([BIN % minor, "--cache-dir", os.path.join(WORK, "cache%d" % minor)]
                           + list(args), capture_output=True, env=env, timeout=60,
                           stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, "kubectl 1.%d %s: %s" % (minor, args, p.stderr))
        return p.stdout

    def sbx(self, kubeconfig, context, *args):
        cfg = os.path.join(WORK, "sbx.yaml")
        write(cfg, "data_source:\n  sandbox:\n    type: k8s\n    image: busybox\n%s"
              % ("    context: %s\n" % context if context else ""))
        env = dict(os.environ, KUBECONFIG=kubeconfig,
                   SBX_STATE_DIR=os.path.join(WORK, "state"))
        p = subprocess.run([SBX, "--config", cfg] + list(args), capture_output=True, env=env,
                           timeout=120, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, "sbx %s: %s" % (args, p.stderr))
        return p.stdout

    def resolved(self, kubeconfig, context):
        """What the plugin resolved, from its info."""
        for e in json.loads(self.sbx(kubeconfig, context, "plugins", "--json")):
            if e["alias"] == "k8s":
                return e["backend"]["backend"]
        self.fail("no k8s entry")

    def oracle(self, minor, kubeconfig, context):
        """The same facts from kubectl config view --flatten --minify."""
        args = ["config", "view", "--flatten", "--minify", "-o", "json"]
        if context:
            args += ["--context", context]
        v = json.loads(self.kubectl(minor, kubeconfig, *args))
        ctx = v["contexts"][0]
        cl = v["clusters"][0]["cluster"]
        user = v["users"][0]["user"] if v.get("users") else {}
        auth = ("tokenFile" if user.get("tokenFile") else "token" if user.get("token")
                else "exec" if user.get("exec") else "none")
        ca = cl.get("certificate-authority-data")
        got = {"context": ctx["name"], "cluster": ctx["context"]["cluster"],
               "user": ctx["context"]["user"], "server": cl["server"].rstrip("/"),
               "namespace": ctx["context"].get("namespace", "default"), "auth": auth,
               "ca_sha256": hashlib.sha256(base64.b64decode(ca)).hexdigest() if ca else ""}
        if auth == "tokenFile":
            # kubectl shows the path as written; the only relative one is in file a.
            got["token_file"] = os.path.join(self.a, user["tokenFile"])
        return got

    def check(self, kubeconfig, context):
        mine = self.resolved(kubeconfig, context)
        for minor in MINORS:
            want = self.oracle(minor, kubeconfig, context)
            self.assertEqual({k: mine.get(k) for k in want}, want, "kubectl 1.%d" % minor)
        return mine

    def test_merged_list_first_file_wins(self):
        missing = os.path.join(WORK, "missing", "config")
        kc = ":".join([os.path.join(self.a, "config"), missing, "",
                       os.path.join(self.b, "config"), os.path.join(self.a, "config")])
        mine = self.check(kc, None)
        self.assertEqual((mine["context"], mine["auth"], mine["namespace"]),
                         ("ctx-a", "tokenFile", "ns-a"))
        self.assertEqual(mine["token_file"], os.path.join(self.a, "tok"))
        mine = self.check(kc, "shared-ctx")
        self.assertEqual((mine["cluster"], mine["user"], mine["auth"]),
                         ("standin", "shared", "token"))
        mine = self.check(kc, "ctx-b")
        self.assertEqual((mine["auth"], mine["namespace"]), ("exec", "ns-b"))
        self.check(kc, "other-ctx")

    def test_list_order_decides(self):
        kc = os.path.join(self.b, "config") + ":" + os.path.join(self.a, "config")
        mine = self.check(kc, None)
        self.assertEqual((mine["context"], mine["server"]),
                         ("ctx-b", "https://127.0.0.1:1"))
        mine = self.check(kc, "shared-ctx")
        self.assertEqual((mine["cluster"], mine["namespace"]), ("other", "default"))

    def test_exec_plugin_runs_as_kubectl_runs_it(self):
        kc = os.path.join(self.a, "config") + ":" + os.path.join(self.b, "config")
        records = {}
        for minor in MINORS:
            if os.path.exists(self.log):
                os.unlink(self.log)
            out = self.kubectl(minor, kc, "--context", "ctx-b", "get", "pods", "-o", "name")
            self.assertEqual(out, b"")
            with open(self.log) as f:
                records["kubectl 1.%d" % minor] = [json.loads(line) for line in f]
        os.unlink(self.log)
        sid = self.sbx(kc, "ctx-b", "create").decode().strip()
        self.assertTrue(sid.startswith("k8s:"), sid)
        self.sbx(kc, "ctx-b", "exec", sid, "--", "true")
        self.sbx(kc, "ctx-b", "rm", sid)
        with open(self.log) as f:
            mine = [json.loads(line) for line in f]
        # One run per sbx process, as per kubectl process: the credential (an hour left)
        # serves every API call of create, exec and rm.
        self.assertEqual(len(mine), 3)
        info = mine[0]["exec_info"]
        self.assertEqual(info["spec"]["cluster"]["config"],
                         {"audience": "sbx", "retries": 3, "strict": True})
        self.assertEqual(info["spec"]["cluster"]["server"], "https://127.0.0.1:%d/" % self.port)
        self.assertEqual(mine[0]["argv"], ["--region", "eu west"])
        self.assertEqual((mine[0]["stdin_tty"], mine[0]["stdin"]), (False, ""))
        for who, recs in records.items():
            self.assertEqual(len(recs), 1, who)
            for m in mine:
                self.assertEqual(m, recs[0], who)


if __name__ == "__main__":
    WORK = os.path.abspath(sys.argv.pop(1))
    os.makedirs(WORK, exist_ok=True)
    unittest.main(verbosity=2)
