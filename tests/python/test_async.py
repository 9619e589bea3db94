import asyncio
import threading
import unittest

import sbx


class AsyncTest(unittest.TestCase):
    def test_two_hundred_sandboxes_on_one_loop_with_bounded_threads(self):
        peak = [0]

        async def one(h, i):
            sid = await h.create()
            try:
                r = await h.exec(sid, f"echo {i}")
                peak[0] = max(peak[0], threading.active_count())
                return r.stdout
            finally:
                await h.destroy(sid)

        async def main():
            async with sbx.AsyncHost({"data_source": {"sandbox": {"type": "local"}}},
                                     max_workers=16) as h:
                return await asyncio.gather(*(one(h, i) for i in range(200)))

        before = threading.active_count()
        outs = asyncio.run(main())
        self.assertEqual(outs, [f"{i}\n" for i in range(200)])
        self.assertLessEqual(peak[0], before + 16 + 2)

    def test_infra_error_is_an_exception_not_a_result(self):
        async def main():
            async with sbx.AsyncHost() as h:
                with self.assertRaises(sbx.SandboxNotFound):
                    await h.exec("local:0123456789abcdef", "true")
        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
