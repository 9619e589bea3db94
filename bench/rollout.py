"""N tasks of create -> `echo hi` -> delete, for bench_rollout (see bench_rollout.c).

    rollout.py asynchost N T          sbx.AsyncHost: N coroutines, at most T at once
    rollout.py nexau N T CHECKOUT     NexAU's LocalSandboxManager on T threads
    rollout.py nexau-sbx N T CHECKOUT the same tasks with sbx's drop-in for it
                                      (sbx.adapters.nexau.SbxSandboxManager)

Each task runs $SBX_BENCH_COMMANDS (default 1) commands. Prints "elapsed SECONDS" for the
tasks alone (the interpreter's start and the imports are left out, as a harness pays them
once), and "cpu HOST COMMANDS": the CPU milliseconds per task of this process and of the
commands it reaped over the same span. Exits 1 when a task's output is not "hi\n".
"""
import asyncio
import os
import resource
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

COMMANDS = max(int(os.environ.get("SBX_BENCH_COMMANDS", "1") or "1"), 1)


def run_asynchost(n, t):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                    "bindings", "python"))
    import sbx

    async def main():
        host = sbx.AsyncHost(os.environ.get("SBX_BENCH_CONFIG") or None,
                             max_workers=max(t, 1) * 3)
        gate = asyncio.Semaphore(t)
        bad = 0

        async def task():
            nonlocal bad
            async with gate:
                sid = await host.create()
                try:
                    for _ in range(COMMANDS):
                        r = await host.exec(sid, "echo hi")
                        bad += r.stdout != "hi\n"
                finally:
                    await host.destroy(sid)

        t0 = time.monotonic()
        await asyncio.gather(*(task() for _ in range(n)))
        return time.monotonic() - t0, bad

    elapsed, bad = asyncio.run(main())
    return elapsed, bad


def run_nexau(n, t, checkout, on_sbx=False):
    sys.path.insert(0, checkout)
    from nexau.archs.sandbox.local_sandbox import LocalSandboxManager
    from nexau.archs.sandbox.base_sandbox import LocalSandboxConfig
    if on_sbx:  # the one-line swap a NexAU user makes
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        "bindings", "python"))
        from sbx.adapters.nexau import SbxSandboxManager as LocalSandboxManager

    root = tempfile.mkdtemp(prefix="bench-nexau-", dir=os.environ.get("SBX_STATE_DIR"))
    # NexAU's output folders (and the drop-in's) go to the temp dir: this run's own, removed
    # with it, not the host's /tmp, where a folder per command piles up run after run.
    tempfile.tempdir = root

    def task(i):
        work = os.path.join(root, f"task-{i}")
        manager = LocalSandboxManager(work_dir=work)
        sandbox = manager.start(None, "bench", f"s{i}", LocalSandboxConfig(work_dir=work))
        try:
            bad = 0
            for _ in range(COMMANDS):
                r = sandbox.execute_bash("echo hi")
                bad += r.stdout != "hi\n" and r.stdout != "hi"
            return bad
        finally:
            manager.stop()
            shutil.rmtree(work, ignore_errors=True)

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=t) as pool:
        bad = sum(pool.map(task, range(n)))
    elapsed = time.monotonic() - t0
    shutil.rmtree(root, ignore_errors=True)
    return elapsed, bad


def cpu_seconds():
    """CPU seconds of this process and of the children it reaped."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def main():
    kind, n, t = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if kind not in ("asynchost", "nexau", "nexau-sbx"):
        sys.exit(f"rollout.py: unknown kind {kind}")
    if kind.startswith("nexau"):
        # NexAU's imports, before the span measured (run_nexau imports them again: cached).
        sys.path.insert(0, sys.argv[4])
        import nexau.archs.sandbox.local_sandbox  # noqa: F401
    host0, kids0 = cpu_seconds()
    if kind == "asynchost":
        elapsed, bad = run_asynchost(n, t)
    else:
        elapsed, bad = run_nexau(n, t, sys.argv[4], kind == "nexau-sbx")
    host1, kids1 = cpu_seconds()
    print(f"elapsed {elapsed:.3f}")
    print(f"cpu {(host1 - host0) * 1000 / n:.3f} {(kids1 - kids0) * 1000 / n:.3f}")
    if bad:
        print(f"rollout.py: {bad} tasks printed something else", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
