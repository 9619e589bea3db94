import asyncio
import tempfile
import unittest
from dataclasses import dataclass, field
from pathlib import Path

from sbx.adapters.nemo_gym import SandboxExecResult, SandboxStatus, SbxProvider


@dataclass(frozen=True)
class Spec:
    image: str = "unused"
    ttl_s: int = 0
    workdir: str = None
    env: dict = field(default_factory=dict)
    files: dict = field(default_factory=dict)


class NemoGymTest(unittest.TestCase):
    def test_provider_protocol(self):
        async def main():
            p = SbxProvider({"data_source": {"sandbox": {"type": "local"}}})
            h = await p.create(Spec(env={"A": "1"}, files={"in/hello.txt": "hi there"}))
            try:
                r = await p.exec(h, "cat in/hello.txt; echo $A; exit 4")
                self.assertEqual(r, SandboxExecResult("hi there1\n", "", 4, None))
                t = await p.exec(h, "sleep 10", timeout_s=0.3)
                self.assertEqual((t.return_code, t.error_type), (125, "timeout"))
                self.assertEqual(await p.status(h), SandboxStatus.RUNNING)
                with tempfile.TemporaryDirectory() as d:
                    src = Path(d) / "up.bin"
                    src.write_bytes(b"\x00\xff")
                    await p.upload_file(h, src, "up.bin")
                    await p.download_file(h, "up.bin", Path(d) / "down" / "x.bin")
                    self.assertEqual((Path(d) / "down" / "x.bin").read_bytes(), b"\x00\xff")
                desc = p.serialize_handle(h)
                again = p.connect(desc)
                self.assertEqual(again.sandbox_id, h.sandbox_id)
                r2 = await p.exec(again, "cat up.bin | wc -c")
                self.assertEqual(r2.stdout.strip(), "2")
            finally:
                await p.close(h)
            await p.close(h)  # safe from cleanup paths
            self.assertEqual(await p.status(h), SandboxStatus.STOPPED)
            r3 = await p.exec(h, "true")
            self.assertEqual((r3.return_code, r3.error_type), (125, "sandbox"))
            await p.aclose()
        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
