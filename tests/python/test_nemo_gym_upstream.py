"""The sbx provider with NeMo Gym importable (stand-ins at its import paths): its own types,
the entry point pyproject.toml declares, the AsyncSandbox round trip through the facade,
failures as results, and cancellation by the facade's timeouts."""
import asyncio
import inspect
import os
import sys
import tempfile
import time
import tomllib
import unittest
from pathlib import Path

from proctable import alive
import standins  # noqa: F401  (first: NeMo Gym's import paths)
from nemo_gym.sandbox import (AsyncSandbox, ConnectableProvider, SandboxSpec, create_provider,
                              list_providers)
from nemo_gym.sandbox.providers import base as nb

from sbx.adapters import nemo_gym as adapter
from sbx.adapters.nemo_gym import SbxProvider

PYPROJECT = Path(__file__).resolve().parents[2] / "bindings" / "python" / "pyproject.toml"
LOCAL = {"sbx": {"sandbox": {"type": "local"}}}


def setUpModule():
    """Installs the package's metadata as pip would: its entry points from pyproject.toml."""
    global _site
    _site = tempfile.TemporaryDirectory()
    meta = tomllib.loads(PYPROJECT.read_text())["project"]
    info = Path(_site.name, f"sbx-{meta['version']}.dist-info")
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sbx\nVersion: "
                                   f"{meta['version']}\n")
    lines = []
    for group, eps in meta["entry-points"].items():
        lines.append(f"[{group}]")
        lines += [f"{k} = {v}" for k, v in eps.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    sys.path.append(_site.name)


def tearDownModule():
    sys.path.remove(_site.name)
    _site.cleanup()


def run(coro):
    return asyncio.run(coro)


class ProviderTest(unittest.TestCase):
    def test_upstream_types_and_capabilities(self):
        self.assertTrue(adapter.UPSTREAM)
        for name in ("SandboxHandle", "SandboxExecResult", "SandboxStatus", "SandboxCreateError"):
            self.assertIs(getattr(adapter, name), getattr(nb, name), name)
        self.assertTrue(inspect.iscoroutinefunction(SbxProvider.serialize_handle))
        self.assertTrue(inspect.iscoroutinefunction(SbxProvider.connect))
        self.assertIsInstance(SbxProvider(sandbox={"type": "local"}), ConnectableProvider)

    def test_entry_point_and_config_keys(self):
        self.assertIn("sbx", list_providers())
        p = create_provider(LOCAL)
        self.assertIsInstance(p, SbxProvider)
        with self.assertRaises(TypeError):
            create_provider({"sbx": {"sandbox": {"type": "local"}, "sandbx": 1}})
        with self.assertRaises(ValueError):
            create_provider({"sbx": {"sandbox": {"type": "local"}, "default_timeout_s": 0}})

    def test_create_error_is_nemos(self):
        async def main():
            p = create_provider({"sbx": {"sandbox": {"type": "local"}, "data_source": "none"}})
            with self.assertRaises(nb.SandboxCreateError):
                await p.create(SandboxSpec())
            with self.assertRaises(ValueError) as cm:
                await p.create(SandboxSpec(provider_options={"template": "x"}))
            self.assertEqual(str(cm.exception), "Unknown sbx provider_options keys: template. "
                                                "Expected keys: data_source")
        run(main())


class RoundTripTest(unittest.TestCase):
    def test_create_exec_serialize_connect_stop_second(self):
        async def main():
            provider = create_provider(LOCAL)
            spec = SandboxSpec(workdir="w", env={"A": "1"}, files={"in/hello.txt": "hi"})
            box = await AsyncSandbox(provider, spec).start()
            r = await box.exec("cat ../in/hello.txt; echo $A; exit 3")
            self.assertEqual(r, nb.SandboxExecResult("hi1\n", "", 3, None))
            desc = await box.serialize()
            self.assertEqual(desc, {"provider": "sbx", "sandbox_id": desc["sandbox_id"],
                                    "workdir": "w"})
            again = await AsyncSandbox.connect(desc, provider=provider)
            self.assertEqual((await again.exec("pwd")).stdout.rstrip()[-2:], "/w")
            with tempfile.TemporaryDirectory() as d:
                await again.upload(__file__, "deep/dir/t.py")
                await again.download("deep/dir/t.py", Path(d, "back.py"))
                self.assertEqual(Path(d, "back.py").read_bytes(), Path(__file__).read_bytes())
            await box.stop()
            self.assertEqual(await box.status(), nb.SandboxStatus.STOPPED)
            gone = await again.exec("true")
            self.assertEqual((gone.return_code, gone.error_type), (125, "sandbox"))
            with self.assertRaises(RuntimeError):
                await AsyncSandbox.connect(desc, provider=provider)
            second = await AsyncSandbox(provider, SandboxSpec()).start()  # after stop()
            self.assertEqual((await second.exec("echo 2")).stdout, "2\n")
            self.assertEqual(await second.status(), nb.SandboxStatus.RUNNING)
            await second.stop()
        run(main())

    def test_failures_are_results_and_output_is_whole(self):
        async def main():
            provider = create_provider(LOCAL)
            box = await AsyncSandbox(provider, SandboxSpec()).start()
            try:
                miss = await box.exec("true", cwd="/no/such/dir")
                self.assertEqual((miss.return_code, miss.error_type), (125, "sandbox"))
                self.assertIn("/no/such/dir", miss.stderr)
                t = await box.exec("echo part; sleep 60", timeout_s=5)
                self.assertEqual((t.return_code, t.error_type, t.stdout),
                                 (125, "timeout", "part\n"))
                big = await box.exec("head -c 50000 /dev/zero | tr '\\0' a")
                self.assertEqual(big.stdout, "a" * 50000)
            finally:
                await box.stop()
        run(main())

    def test_facade_timeout_stops_the_command(self):
        async def main():
            provider = create_provider(LOCAL)
            box = await AsyncSandbox(provider, SandboxSpec()).start()
            other = await AsyncSandbox(provider, SandboxSpec()).start()
            try:
                marker = f"sbx-nemo-{os.getpid()}-{time.monotonic_ns()}"
                slow = asyncio.ensure_future(other.exec("sleep 2; echo other"))
                t0 = time.monotonic()
                with self.assertRaises(asyncio.TimeoutError):
                    await asyncio.wait_for(box.exec(f"exec -a {marker} sleep 60"), 0.5)
                while alive(marker) and time.monotonic() - t0 < 20:
                    await asyncio.sleep(0.02)
                self.assertEqual(alive(marker), [])
                await box.stop()  # aclose() while `other` runs leaves it running
                self.assertEqual((await slow).stdout, "other\n")
            finally:
                await box.stop()
                await other.stop()
        run(main())


if __name__ == "__main__":
    unittest.main()
