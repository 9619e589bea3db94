"""The sbx provider without NeMo Gym installed: its own types with NeMo's fields, driven the
way NeMo's facade drives a provider."""
import asyncio
import dataclasses
import tempfile
import unittest
from dataclasses import dataclass, field
from pathlib import Path

from sbx.adapters import nemo_gym as adapter
from sbx.adapters.nemo_gym import SandboxExecResult, SandboxHandle, SandboxStatus, SbxProvider


@dataclass(frozen=True)
class Spec:  # the SandboxSpec fields the provider reads
    image: str = None
    ttl_s: float = None
    workdir: str = None
    env: dict = field(default_factory=dict)
    files: dict = field(default_factory=dict)
    entrypoint: list = None
    provider_options: dict = field(default_factory=dict)


class FallbackTest(unittest.TestCase):
    def test_own_types_have_nemos_fields(self):
        self.assertFalse(adapter.UPSTREAM)
        self.assertEqual([f.name for f in dataclasses.fields(SandboxExecResult)],
                         ["stdout", "stderr", "return_code", "error_type"])
        self.assertEqual([f.name for f in dataclasses.fields(SandboxHandle)],
                         ["sandbox_id", "provider_name", "raw"])
        self.assertEqual([s.value for s in SandboxStatus],
                         ["starting", "running", "stopped", "error", "unknown"])

    def test_provider_protocol(self):
        async def main():
            p = SbxProvider(sandbox={"type": "local"})
            h = await p.create(Spec(env={"A": "1"}, workdir="w"))
            try:
                with tempfile.TemporaryDirectory() as d:
                    src = Path(d) / "up.bin"
                    src.write_bytes(b"\x00\xff")
                    await p.upload_file(h, src, "w/in/up.bin")
                    await p.download_file(h, "w/in/up.bin", Path(d) / "down" / "x.bin")
                    self.assertEqual((Path(d) / "down" / "x.bin").read_bytes(), b"\x00\xff")
                r = await p.exec(h, "wc -c < in/up.bin; echo $A; exit 4")
                self.assertEqual(r, SandboxExecResult("2\n1\n", "", 4, None))
                self.assertEqual(await p.status(h), SandboxStatus.RUNNING)
                desc = await p.serialize_handle(h)
                self.assertEqual(desc, {"provider": "sbx", "sandbox_id": h.sandbox_id,
                                        "workdir": "w"})
                again = await p.connect(desc)
                self.assertEqual((again.sandbox_id, again.raw), (h.sandbox_id, {"workdir": "w"}))
            finally:
                await p.close(h)
            await p.close(h)  # safe from cleanup paths
            self.assertEqual(await p.status(h), SandboxStatus.STOPPED)
            r3 = await p.exec(h, "true")
            self.assertEqual((r3.return_code, r3.error_type), (125, "sandbox"))
            await p.aclose()
            h2 = await p.create(Spec())  # the provider serves on after aclose()
            self.assertEqual((await p.exec(h2, "echo ok")).stdout, "ok\n")
            await p.close(h2)
            await p.aclose()
        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
