"""Background jobs: Host.exec(..., background=True) returns a Job.

A job runs in the sandbox under a supervisor that records its pid, output files and exit
status there, so a Job made from its id in any other process (Host.job(job_id)) sees, waits
for and kills the same job; it survives the process that started it.
"""
import ctypes
import signal as _signal
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from . import _lib
from .errors import SbxError

if TYPE_CHECKING:  # host.py imports this module
    from .host import AsyncHost, Host


@dataclass
class JobStatus:
    """What the sandbox says of a job. state: running, exited, killed or lost."""
    id: str
    sandbox_id: str
    state: str
    exit_code: int  # -1 unless exited (128+N as the shell reports a signal death)
    signal: int  # the signal it died of when killed, else 0
    pid: int
    started: float  # unix seconds
    duration: float  # seconds, so far while running
    stdout_bytes: int
    stderr_bytes: int
    command: str  # first line, cut

    @property
    def running(self) -> bool:
        return self.state == "running"


class JobTimeout(SbxError, TimeoutError):
    """Job.wait ran out of time; the job keeps running. .job_status holds its last state."""

    def __init__(self, status, message, job_status):
        super().__init__(status, message)
        self.job_status = job_status


def _status_of(info) -> JobStatus:
    return JobStatus(
        id=info.id.decode(), sandbox_id=info.sandbox_id.decode(),
        state=_lib.JOB_STATES.get(info.state, "unknown"), exit_code=info.exit_code,
        signal=info.signal, pid=info.pid, started=info.started, duration=info.duration,
        stdout_bytes=info.stdout_bytes, stderr_bytes=info.stderr_bytes,
        command=info.command.decode("utf-8", "replace"))


class Job:
    """A handle on one background job; holds nothing but its id and the host."""

    def __init__(self, host: "Host", job_id: str):
        if "\0" in job_id:
            raise ValueError("sbx: NUL byte in job id %r: C strings end at NUL" % (job_id,))
        self._host = host
        self.id = job_id
        self.sandbox_id = job_id.split("@", 1)[1] if "@" in job_id else ""

    def __repr__(self):
        return f"Job({self.id!r})"

    def status(self) -> JobStatus:
        info = _lib.init_header(_lib.JobInfo())
        self._host._call(self._host._L.sbx_job_status, self._host._h, self.id.encode(),
                         ctypes.byref(info))
        return _status_of(info)

    def wait(self, timeout: Optional[float] = None) -> JobStatus:
        """Until the job is no longer running; raises JobTimeout after `timeout` seconds
        (None: no bound), leaving the job running."""
        info = _lib.init_header(_lib.JobInfo())
        err = _lib.Error()
        rc = self._host._L.sbx_job_wait(self._host._h, self.id.encode(),
                                        -1.0 if timeout is None else float(timeout),
                                        ctypes.byref(info), ctypes.byref(err))
        if rc == 12:  # SBX_E_TIMEOUT: info holds the running state
            raise JobTimeout(rc, err.message.decode("utf-8", "replace"), _status_of(info))
        if rc != 0:
            from .errors import from_error
            raise from_error(rc, err)
        return _status_of(info)

    def kill(self, sig: int = _signal.SIGTERM) -> None:
        """Sends sig to the job's whole tree; a job already over is left alone."""
        self._host._call(self._host._L.sbx_job_kill, self._host._h, self.id.encode(), int(sig))

    def read_output_bytes(self, stderr: bool = False, offset: int = 0,
                          max_bytes: int = 0, tail: int = 0) -> bytes:
        """Bytes of stdout (or stderr) from `offset`, at most max_bytes (0: 64 MiB), or its
        last `tail` lines."""
        data, n = ctypes.c_void_p(), ctypes.c_size_t()
        self._host._call(self._host._L.sbx_job_read, self._host._h, self.id.encode(),
                         2 if stderr else 1, int(offset), int(max_bytes), int(tail),
                         ctypes.byref(data), ctypes.byref(n))
        try:
            return ctypes.string_at(data, n.value) if n.value else b""
        finally:
            self._host._L.sbx_free(data)

    def read_output(self, stderr: bool = False, offset: int = 0, max_bytes: int = 0,
                    tail: int = 0) -> str:
        """read_output_bytes decoded as UTF-8 (invalid bytes become U+FFFD)."""
        return self.read_output_bytes(stderr, offset, max_bytes, tail).decode("utf-8",
                                                                              "replace")


def list_jobs(host, sandbox_id: str, cached: bool = False):
    got = []

    def one(ctx, info):
        got.append(_status_of(info.contents))
        return 0

    fn = _lib.JOB_FN(one)
    host._call(host._L.sbx_job_list, host._h, _lib.cstr(sandbox_id), 1 if cached else 0, fn,
               None)
    return got


class AsyncJob:
    """The awaitable forms of Job, run on the AsyncHost's pool."""

    def __init__(self, ahost: "AsyncHost", job: Job):
        self._ahost = ahost
        self.job = job
        self.id = job.id
        self.sandbox_id = job.sandbox_id

    def __repr__(self):
        return f"AsyncJob({self.id!r})"

    async def status(self) -> JobStatus:
        return await self._ahost._run(self.job.status)

    async def wait(self, timeout: Optional[float] = None) -> JobStatus:
        return await self._ahost._run(self.job.wait, timeout)

    async def kill(self, sig: int = _signal.SIGTERM) -> None:
        return await self._ahost._run(self.job.kill, sig)

    async def read_output(self, *a, **k) -> str:
        return await self._ahost._run(self.job.read_output, *a, **k)

    async def read_output_bytes(self, *a, **k) -> bytes:
        return await self._ahost._run(self.job.read_output_bytes, *a, **k)
