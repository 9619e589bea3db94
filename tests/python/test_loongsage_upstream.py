"""The LoongSage client with coda importable (stand-ins at its import paths): registered in
coda's registry, built by coda's own factory with the config's type swapped, its keys, and
every outcome a dict."""
import json
import tempfile
import unittest
from pathlib import Path

import standins  # noqa: F401  (first: LoongSage's import paths)
from coda.agentflow.sandbox import SANDBOX_REGISTRY, SandboxClient, create_sandbox_client

from sbx.adapters import loongsage as ls


class RegistryTest(unittest.TestCase):
    def test_registered_beside_loongsages_own(self):
        self.assertTrue(ls.UPSTREAM)
        self.assertEqual(SANDBOX_REGISTRY.keys(),
                         ["docker", "k8s", "sbx", "sbx-local", "sbx-docker", "sbx-e2b",
                          "sbx-k8s", "sbx-custom"])
        self.assertTrue(issubclass(ls.SbxSandboxClient, SandboxClient))
        self.assertIsNone(create_sandbox_client({"type": "none"}))
        with self.assertRaises(KeyError) as cm:
            create_sandbox_client({"type": "sbx-dockr"})
        self.assertEqual(cm.exception.args[0], "[sandbox] 'sbx-dockr' is not registered. "
                         "Available: ['docker', 'k8s', 'sbx', 'sbx-local', 'sbx-docker', "
                         "'sbx-e2b', 'sbx-k8s', 'sbx-custom']")

    def test_sbx_factory_lists_backends(self):
        with self.assertRaises(KeyError) as cm:
            ls.create_sandbox_client({"type": "dockr"})
        self.assertRegex(cm.exception.args[0],
                         r"^\[sandbox\] 'dockr' is not registered\. Available: \[.*'docker'.*\]$")
        self.assertIsNone(ls.create_sandbox_client({"type": " None "}))


class KeysTest(unittest.TestCase):
    def test_timeouts_and_workdirs(self):
        c = create_sandbox_client({"type": "sbx"})
        self.assertEqual((c.type, c.timeout, c.working_dir), ("local", 120, None))
        c = create_sandbox_client({"type": "sbx-local", "command_exec_timeout_seconds": 321})
        self.assertEqual(c.timeout, 321)
        self.assertEqual(
            ls.SbxSandboxClient.from_config({"type": "docker", "timeout": 7}).timeout, 7)
        self.assertEqual(ls.SbxSandboxClient.from_config({"type": "sbx-docker"}).working_dir,
                         "/testbed")

    def test_k8s_manifest_and_ignored_keys(self):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d, "pod_manifest.yaml")
            path.write_text(json.dumps({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"namespace": "rl", "labels": {"app": "rl-sandbox"}},
                "spec": {"restartPolicy": "Never", "activeDeadlineSeconds": 86400,
                         "nodeSelector": {"pool": "cpu"},
                         "containers": [{"name": "sandbox", "imagePullPolicy": "Always",
                                         "resources": {"limits": {"cpu": 2, "memory": "4Gi"}},
                                         "command": ["sleep", "infinity"]}]}}))
            c = create_sandbox_client({"type": "sbx-k8s", "pod_manifest_path": str(path),
                                       "sandbox_creation_timeout_seconds": 600,
                                       "kubeconfig": "k8s/kubeconfig.yaml"})
        self.assertEqual(c.ignored_keys, ["pod_manifest.metadata.labels",
                                          "pod_manifest.spec.restartPolicy",
                                          "pod_manifest.spec.containers[0].imagePullPolicy",
                                          "pod_manifest.spec.containers[0].command"])
        self.assertEqual((c.working_dir, c.timeout), ("/rl-sandbox", 120))
        local = create_sandbox_client({"type": "sbx-local", "kubeconfig": "k",
                                       "sandbox_creation_timeout_seconds": 5})
        self.assertEqual(local.ignored_keys, ["sandbox_creation_timeout_seconds", "kubeconfig"])


class ContractTest(unittest.TestCase):
    def test_one_client_many_sandboxes_and_dict_outcomes(self):
        client = create_sandbox_client({"type": "sbx-local", "working_dir": "ws",
                                        "command_exec_timeout_seconds": 5})
        first, second = client.create(image="img:1"), client.create(image="img:2")
        try:
            for sid in (first, second):
                client.execute(sid, "mkdir ws", workdir=".")
            a = client.execute(first, "pwd; echo one > f; echo err >&2; exit 3")
            self.assertEqual(sorted(a), ["exit_code", "stderr", "stdout", "success"])
            self.assertTrue(a["stdout"].rstrip().endswith("/ws"))
            self.assertEqual((a["stderr"], a["exit_code"], a["success"]), ("err\n", 3, False))
            self.assertEqual(client.execute(second, "cat f || echo none")["stdout"], "none\n")
            self.assertFalse(hasattr(client, "_sandbox_id"))
            miss = client.execute(first, "true", workdir="/no/such/dir")
            self.assertEqual((miss["exit_code"], miss["success"], miss["stdout"]), (1, False, ""))
            self.assertIn("/no/such/dir", miss["stderr"])
            t = client.execute(first, "echo part; sleep 60")
            self.assertEqual((t["exit_code"], t["stdout"]), (124, "part\n"))
            big = client.execute(first, "head -c 40000 /dev/zero | tr '\\0' b")
            self.assertEqual(big["stdout"], "b" * 40000)
        finally:
            client.delete(first)
            client.delete(second)
        client.delete(first)  # a missing sandbox is a success
        gone = client.execute(first, "true")
        self.assertEqual((gone["exit_code"], gone["success"]), (1, False))
        self.assertIn("not found", gone["stderr"])


if __name__ == "__main__":
    unittest.main()
