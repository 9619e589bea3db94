"""A minimal rollout loop as a harness author writes it: one sandbox per trajectory, many
tool calls, delete guaranteed, infrastructure failures kept apart from command failures.

    SBX_LIBRARY=build/core/libsbx.so PYTHONPATH=bindings/python python3 examples/python_rollout.py

(after `cmake --install` and `pip install bindings/python`: python3 examples/python_rollout.py)
"""
import asyncio

import sbx

TASKS = [{"id": f"t{i}", "commands": ["echo hello > f.txt", "cat f.txt", f"test {i} -lt 6"]}
         for i in range(8)]


async def trajectory(host, task):
    sid = await host.create()
    try:
        results = [await host.exec(sid, cmd, timeout=30) for cmd in task["commands"]]
        return {"id": task["id"], "ok": all(r.success for r in results),
                "exit_codes": [r.exit_code for r in results]}
    except sbx.InfrastructureError as e:
        return {"id": task["id"], "infra_error": str(e)}  # mask out of the loss
    finally:
        await host.destroy(sid)


async def main():
    async with sbx.AsyncHost({"data_source": {"sandbox": {"type": "local"}}},
                             max_workers=8) as host:
        for row in await asyncio.gather(*(trajectory(host, t) for t in TASKS)):
            print(row)


if __name__ == "__main__":
    asyncio.run(main())
