"""Synchronous and asyncio APIs over libsbx.

ctypes releases the GIL around every C call, so Host methods run concurrently from threads;
AsyncHost runs them on a bounded thread pool so thousands of sandboxes on one event loop need
only as many threads as calls actually in flight.
"""
import asyncio
import concurrent.futures
import ctypes
import itertools
import json
import os
import re
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _lib
from .errors import from_error
from .jobs import AsyncJob, Job, JobStatus, list_jobs


def _b(s):
    """A C string for libsbx. A NUL byte would end it early and silently cut what follows
    (read_file("a.txt\\0../..") read a.txt, exec("echo hi\\0; ...") ran echo hi): ValueError."""
    if type(s) is str:  # the common case first: every call passes a few
        b = s.encode("utf-8", "surrogateescape")
    elif s is None:
        return None
    elif isinstance(s, bytes):
        b = s
    elif isinstance(s, os.PathLike):
        b = os.fsencode(s)
    else:
        b = str(s).encode("utf-8", "surrogateescape")
    if b"\0" in b:
        raise ValueError("sbx: NUL byte in %r: C strings end at NUL" % (s,))
    return b


def _s(b):
    return None if b is None else b.decode("utf-8", "surrogateescape")


# What write_file takes (any other bytes-like object, an array.array say, goes too).
Data = Union[str, bytes, bytearray, memoryview]


def _data(data):
    """A file's content for write_file: str as UTF-8, or any bytes-like object (bytes,
    bytearray, memoryview, array) as its bytes; anything else is a TypeError naming it."""
    if isinstance(data, str):
        return data.encode("utf-8", "surrogateescape")
    try:
        return memoryview(data).tobytes()
    except TypeError:
        raise TypeError("sbx: write_file data must be str or bytes-like, not %s"
                        % type(data).__name__) from None


class _Tokens:
    """Cancel tokens for AsyncHost.exec: a random prefix for this process and a counter, so
    a token costs no system call; a forked child draws a prefix of its own."""

    def __init__(self):
        self._renew()
        os.register_at_fork(after_in_child=self._renew)

    def _renew(self):
        self._prefix = os.urandom(8).hex() + "-"
        self._next = itertools.count(1).__next__

    def __call__(self) -> str:
        return "%s%x" % (self._prefix, self._next())


_new_token = _Tokens()


def _kv_array(pairs, env: bool = True, extra: Optional[Tuple[bytes, bytes]] = None):
    """(sbx_kv array, count) for a mapping, `extra` (a checked pair) appended; (None, 0)
    when there is nothing, as libsbx takes a NULL array of none."""
    items = list(pairs.items()) if pairs else []
    n = len(items) + (extra is not None)
    if not n:
        return None, 0
    arr = (_lib.KV * n)()
    for i, (k, v) in enumerate(items):
        key = _b(k)
        if not key and not env:
            raise ValueError("sbx: a label key must not be empty")
        if env and (not key or b"=" in key):
            # "A=B" would set another variable (A) than the one named.
            raise ValueError("sbx: environment variable name %r must be non-empty without '='"
                             % (k,))
        arr[i].key = key
        arr[i].value = _b(v)
    if extra is not None:
        arr[n - 1].key, arr[n - 1].value = extra
    return arr, n


@dataclass
class ExecResult:
    """One command's outcome, with NexAU's field names."""
    exit_code: int
    signal: int
    timed_out: bool
    truncated: bool
    duration: float
    stdout: str
    stderr: str
    stdout_raw: bytes
    stderr_raw: bytes
    original_stdout_length: int
    original_stderr_length: int
    stdout_bytes: int
    stderr_bytes: int
    output_dir: Optional[str]
    stdout_file: Optional[str]
    stderr_file: Optional[str]
    oom_killed: bool = False  # the sandbox's memory limit killed a process of the command

    @property
    def success(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass
class FileEntry:
    name: str
    kind: str  # file, dir, symlink, other
    mode: int
    size: int
    mtime: int


@dataclass
class PluginState:
    alias: str
    path: str
    state: str  # unloaded, loaded, faulty
    reason: Optional[str]
    version: Optional[str]


@dataclass
class Session:
    """A session record: (user, session) -> sandbox, with the assets uploaded into it."""
    user_id: str
    session_id: str
    sandbox_id: str
    data_source: str
    image: str
    state: str
    ttl: int
    created: int
    updated: int
    assets: Dict[str, str] = field(default_factory=dict)


def _create_opts(data_source, image, labels, env, ttl, wait,
                 share_dir=None) -> _lib.CreateOpts:
    """sbx_create_opts; the struct keeps the arrays and strings it points to alive. A field
    left at its default is not set (every create builds one: each set costs)."""
    opts = _lib.new(_lib.CreateOpts)
    if data_source is not None:
        opts.data_source = _b(data_source)
    if image is not None:
        opts.image = _b(image)
    if labels:
        opts.labels, opts.n_labels = _kv_array(labels, env=False)
    if env:
        opts.env, opts.n_env = _kv_array(env)
    if ttl:
        opts.ttl_seconds = int(ttl)
    if wait:
        opts.wait_seconds = float(wait)
    if share_dir is not None:
        opts.share_dir = _b(os.fspath(share_dir))
    return opts


def _exec_opts(command, cwd, env, timeout, stdin, user, cancel_token,
               background, stdout_path=None, stderr_path=None) -> _lib.ExecOpts:
    """sbx_exec_opts; the struct keeps the arrays and strings it points to alive. As in
    _create_opts, a field left at its default is not set."""
    opts = _lib.new(_lib.ExecOpts)
    if isinstance(command, (str, bytes)):
        opts.shell = _b(command)
    else:
        opts.argv = (ctypes.c_char_p * (len(command) + 1))(*[_b(a) for a in command], None)
    if cwd is not None:
        opts.cwd = _b(cwd)
    if cancel_token is not None:
        if env and CANCEL_ENV in env:  # the token given here is the one cancel() looks for
            env = {k: v for k, v in env.items() if k != CANCEL_ENV}
        opts.env, opts.n_env = _kv_array(env, extra=(_CANCEL_KEY, _b(cancel_token)))
    elif env:
        opts.env, opts.n_env = _kv_array(env)
    if stdin is not None:
        data = stdin if isinstance(stdin, bytes) else _b(stdin)
        opts.has_stdin = 1
        opts.stdin_data = data
        opts.stdin_len = len(data)
    opts.timeout = -1.0 if timeout is None else float(timeout)
    if user is not None:
        opts.user = _b(user)
    if background:
        opts.background = 1
    if stdout_path is not None:
        opts.stdout_path = _b(stdout_path)
    if stderr_path is not None:
        opts.stderr_path = _b(stderr_path)
    return opts


def _exec_result(r: _lib.ExecResult) -> ExecResult:
    out = ctypes.string_at(r.stdout_text, r.stdout_text_len) if r.stdout_text else b""
    err = ctypes.string_at(r.stderr_text, r.stderr_text_len) if r.stderr_text else b""
    return ExecResult(
        exit_code=r.exit_code, signal=r.signal, timed_out=bool(r.timed_out),
        truncated=bool(r.truncated), duration=r.duration,
        stdout=out.decode("utf-8", "replace"), stderr=err.decode("utf-8", "replace"),
        stdout_raw=out, stderr_raw=err,
        original_stdout_length=r.original_stdout_length,
        original_stderr_length=r.original_stderr_length,
        stdout_bytes=r.stdout_bytes, stderr_bytes=r.stderr_bytes,
        output_dir=_s(r.output_dir), stdout_file=_s(r.stdout_file),
        stderr_file=_s(r.stderr_file), oom_killed=bool(r.oom_killed))


# Hosts alive in this process. A libsbx host cannot cross a fork (its calls fail in the child
# with SBX_E_INVAL): after os.fork() (multiprocessing's default start method on Linux) each one
# makes a new libsbx host with the same options at its next call, and the old one is left to
# the parent.
_hosts: "weakref.WeakSet[Host]" = weakref.WeakSet()
_async_hosts: "weakref.WeakSet[AsyncHost]" = weakref.WeakSet()
_fork_lock = threading.RLock()


def _forked() -> None:
    global _fork_lock
    _fork_lock = threading.RLock()  # a parent's thread may have held the old one
    for h in list(_hosts):
        h._stale = True
    for a in list(_async_hosts):
        a._stale = True


os.register_at_fork(after_in_child=_forked)


class Host:
    """A libsbx host. Thread-safe; close() (or the context manager) frees it. Usable in a
    forked child too: it makes a libsbx host of its own there at its first call."""

    def __init__(self, config: Union[str, os.PathLike, Mapping, None] = None, *,
                 registry: Optional[str] = None, state_dir: Optional[str] = None,
                 run_id: Optional[str] = None):
        self._L = _lib.lib()
        self._keep = []
        self._queues: List["_Queue"] = []  # freed before the host they run calls on
        self._args = (config, registry, state_dir, run_id)
        self._stale = False
        self._handle = None
        self._handle = self._new_handle()
        _hosts.add(self)

    def _new_handle(self) -> ctypes.c_void_p:
        config, registry, state_dir, run_id = self._args
        opts = _lib.init_header(_lib.HostOptions())
        if isinstance(config, Mapping):
            # JSON is YAML: the config block goes through the same parser as a file.
            opts.config_text = json.dumps(config).encode()
        elif config is not None:
            opts.config_path = _b(config)
        opts.registry_path = _b(registry)
        opts.state_dir = _b(state_dir)
        opts.run_id = _b(run_id)
        h = ctypes.c_void_p()
        self._call(self._L.sbx_host_new, ctypes.byref(opts), ctypes.byref(h))
        return h

    @property
    def _h(self) -> Optional[ctypes.c_void_p]:
        if self._stale:
            with _fork_lock:
                if self._stale and self._handle is not None:
                    # The parent's host (and its queues) stay the parent's: not freed here.
                    self._queues = []
                    self._handle = self._new_handle()
                self._stale = False
        return self._handle

    @_h.setter
    def _h(self, value) -> None:
        self._handle = value

    @staticmethod
    def _call(fn, *args):
        err = _lib.Error()
        rc = fn(*args, ctypes.byref(err))
        if rc != 0:
            raise from_error(rc, err)
        return rc

    def close(self) -> None:
        if getattr(self, "_stale", False):
            # A fork's copy of the parent's host: nothing of it is this process's to free.
            self._queues = []
            self._handle = None
            self._stale = False
            return
        for q in list(getattr(self, "_queues", ())):
            q.close()
        if getattr(self, "_handle", None):
            self._L.sbx_host_free(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def plugins(self) -> List[PluginState]:
        out = []
        names = {0: "unloaded", 1: "loaded", 2: "faulty"}
        for i in range(self._L.sbx_plugin_count(self._h)):
            info = _lib.init_header(_lib.PluginInfo())
            self._call(self._L.sbx_plugin_get, self._h, i, ctypes.byref(info))
            out.append(PluginState(_s(info.alias), _s(info.path), names.get(info.state, "?"),
                                   _s(info.reason), _s(info.version)))
        return out

    def create(self, data_source: Optional[str] = None, *, image: Optional[str] = None,
               labels: Optional[Mapping[str, str]] = None,
               env: Optional[Mapping[str, str]] = None, ttl: int = 0,
               wait: float = 0, share_dir: Optional[str] = None) -> str:
        """Creates a sandbox and returns its id. `wait`: seconds to wait for a place under
        the data source's caps (max_concurrency, max_starting, create_rate), which hold across
        every process sharing the state dir; 0 raises SbxError SBX_E_LIMIT at once.
        `share_dir`: an existing host folder, by its absolute path, that is this sandbox's
        work dir (backends that can share one: local); destroy leaves it."""
        opts = _create_opts(data_source, image, labels, env, ttl, wait, share_dir)
        buf = ctypes.create_string_buffer(_lib.ID_MAX)
        self._call(self._L.sbx_create, self._h, ctypes.byref(opts), buf)
        return buf.value.decode()

    def destroy(self, sandbox_id: str) -> None:
        self._call(self._L.sbx_destroy, self._h, _b(sandbox_id))

    def exec(self, sandbox_id: str, command: Union[str, Sequence[str]], *,
             cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
             timeout: Optional[float] = None, stdin: Optional[bytes] = None,
             user: Optional[str] = None, cancel_token: Optional[str] = None,
             background: bool = False, stdout_path: Optional[str] = None,
             stderr_path: Optional[str] = None) -> Union[ExecResult, Job]:
        """Runs a shell string (bash -c) or an argv list. timeout in seconds; None: the
        config's default; 0: none. With cancel_token the command carries
        SBX_CANCEL_TOKEN=<token> in its environment and cancel(sandbox_id, token) ends it.
        background=True starts it as a job and returns a Job at once (the timeout does not
        apply to it). stdout_path / stderr_path: files in the sandbox that take the stream
        instead (as `>PATH` would, from cwd; its text in the result is then empty); one
        that cannot be opened raises PathError before the command runs."""
        opts = _exec_opts(command, cwd, env, timeout, stdin, user, cancel_token, background,
                          stdout_path, stderr_path)
        res = ctypes.POINTER(_lib.ExecResult)()
        self._call(self._L.sbx_exec, self._h, _b(sandbox_id), ctypes.byref(opts),
                   ctypes.byref(res))
        try:
            r = res.contents
            if background:
                return Job(self, r.job_id.decode())
            return _exec_result(r)
        finally:
            self._L.sbx_exec_result_free(res)

    def job(self, job_id: str) -> Job:
        """A handle on a job by its id, e.g. one another process started."""
        return Job(self, job_id)

    def jobs(self, sandbox_id: str, cached: bool = False) -> List[JobStatus]:
        """Every job of the sandbox, oldest first; cached=True reads the ledger's last
        seen states without asking the sandbox."""
        return list_jobs(self, sandbox_id, cached)

    def cancel(self, sandbox_id: str, token: str) -> int:
        """Kills, inside the sandbox, every process whose environment holds the token an
        exec was started with (its whole tree, also children that left its process group),
        repeating until none is left. Returns how many were killed."""
        if not _TOKEN_OK.fullmatch(token or ""):
            raise ValueError(f"cancel token {token!r}: want 8 to 64 letters, digits, - or _")
        r = self.exec(sandbox_id, ["/bin/sh", "-c", _KILLER, "sbx-cancel", f"{CANCEL_ENV}={token}"],
                      timeout=30)
        try:
            return int(r.stdout.strip() or 0)
        except ValueError:
            return 0

    def sandbox(self, data_source: Optional[str] = None, **create_kwargs) -> "Sandbox":
        """Creates a sandbox and returns it bound to this host; `with host.sandbox() as sb:`
        destroys it when the block ends."""
        return Sandbox(self, self.create(data_source, **create_kwargs))

    def attach(self, sandbox_id: str) -> "Sandbox":
        """An existing sandbox bound to this host (the `with` block destroys it too)."""
        return Sandbox(self, sandbox_id)

    def read_file(self, sandbox_id: str, path: str) -> bytes:
        data, n = ctypes.c_void_p(), ctypes.c_size_t()
        self._call(self._L.sbx_read_file, self._h, _b(sandbox_id), _b(path),
                   ctypes.byref(data), ctypes.byref(n))
        try:
            return ctypes.string_at(data, n.value) if n.value else b""
        finally:
            self._L.sbx_free(data)

    def write_file(self, sandbox_id: str, path: str, data: Data, mode: int = 0) -> None:
        raw = _data(data)
        self._call(self._L.sbx_write_file, self._h, _b(sandbox_id), _b(path), raw, len(raw),
                   mode)

    def stat(self, sandbox_id: str, path: str) -> FileEntry:
        info = _lib.init_header(_lib.FileInfo())
        self._call(self._L.sbx_stat, self._h, _b(sandbox_id), _b(path), ctypes.byref(info))
        return FileEntry(_s(info.name), _lib.FILE_KINDS.get(info.kind, "other"), info.mode,
                         info.size, info.mtime)

    def list_dir(self, sandbox_id: str, path: str) -> List[FileEntry]:
        ents, n = ctypes.POINTER(_lib.FileInfo)(), ctypes.c_size_t()
        self._call(self._L.sbx_list_dir, self._h, _b(sandbox_id), _b(path), ctypes.byref(ents),
                   ctypes.byref(n))
        try:
            return [FileEntry(_s(ents[i].name), _lib.FILE_KINDS.get(ents[i].kind, "other"),
                              ents[i].mode, ents[i].size, ents[i].mtime) for i in range(n.value)]
        finally:
            self._L.sbx_free(ctypes.cast(ents, ctypes.c_void_p))

    def mkdir(self, sandbox_id: str, path: str, parents: bool = True) -> None:
        self._call(self._L.sbx_mkdir, self._h, _b(sandbox_id), _b(path), int(parents))

    def remove(self, sandbox_id: str, path: str, recursive: bool = False) -> None:
        self._call(self._L.sbx_remove, self._h, _b(sandbox_id), _b(path), int(recursive))

    def pause(self, sandbox_id: str) -> None:
        self._call(self._L.sbx_pause, self._h, _b(sandbox_id))

    def resume(self, sandbox_id: str) -> None:
        self._call(self._L.sbx_resume, self._h, _b(sandbox_id))

    def status(self, sandbox_id: str) -> str:
        st = ctypes.c_uint32()
        self._call(self._L.sbx_status, self._h, _b(sandbox_id), ctypes.byref(st))
        return _lib.STATE_NAMES.get(st.value, "unknown")

    def session_start(self, user_id: str, session_id: str, data_source: Optional[str] = None,
                      *, image: Optional[str] = None,
                      env: Optional[Mapping[str, str]] = None, ttl: int = 0,
                      assets: Optional[Mapping[str, str]] = None) -> Tuple[str, str]:
        """Starts or reconnects (user_id, session_id); assets map host files to sandbox
        paths. Returns (sandbox id, outcome): created, reused, resumed or recreated."""
        opts = _lib.init_header(_lib.CreateOpts())
        opts.data_source = _b(data_source)
        opts.image = _b(image)
        ea, ne = _kv_array(env)
        opts.env, opts.n_env = ea, ne
        opts.ttl_seconds = int(ttl)
        aa, na = _kv_array(assets)
        buf = ctypes.create_string_buffer(_lib.ID_MAX)
        how = ctypes.c_uint32()
        self._call(self._L.sbx_session_start, self._h, _b(user_id), _b(session_id),
                   ctypes.byref(opts), aa, na, buf, ctypes.byref(how))
        return buf.value.decode(), _lib.SESSION_OUTCOMES.get(how.value, "unknown")

    def session_pause(self, user_id: str, session_id: str) -> None:
        self._call(self._L.sbx_session_pause, self._h, _b(user_id), _b(session_id))

    def session_end(self, user_id: str, session_id: str) -> None:
        self._call(self._L.sbx_session_end, self._h, _b(user_id), _b(session_id))

    def session_get(self, user_id: str, session_id: str) -> Session:
        got = []

        def one(ctx, rec):
            r = rec.contents
            got.append(Session(_s(r.user_id), _s(r.session_id), _s(r.sandbox_id),
                               _s(r.data_source), _s(r.image), _s(r.state), r.ttl_seconds,
                               r.created, r.updated,
                               {_s(r.assets[i].key): _s(r.assets[i].value)
                                for i in range(r.n_assets)}))
            return 0

        fn = _lib.SESSION_FN(one)
        self._call(self._L.sbx_session_get, self._h, _b(user_id), _b(session_id), fn, None)
        return got[0]


CANCEL_ENV = "SBX_CANCEL_TOKEN"
_CANCEL_KEY = CANCEL_ENV.encode()
KILL_RETRY_S = 60.0  # how long a cancelled command is hunted for before giving up
_TOKEN_OK = re.compile(r"[A-Za-z0-9_-]{8,64}")
# $1 is NAME=token. One grep lists every process whose environment holds it (the killer's
# own environment does not); rounds repeat while a fork could still add one.
_KILLER = r"""n=0
for round in 1 2 3 4 5 6 7 8; do
  found=$(grep -lxzF -- "$1" /proc/[0-9]*/environ 2>/dev/null | sed 's#^/proc/##; s#/environ$##')
  [ -n "$found" ] || break
  for p in $found; do kill -KILL "$p" 2>/dev/null && n=$((n+1)); done
done
echo $n"""


class Sandbox:
    """One sandbox bound to its host: the Host calls without the id. A context manager that
    destroys the sandbox when the block ends (an already gone one counts as destroyed)."""

    def __init__(self, host: "Host", sandbox_id: str):
        self.host = host
        self.id = sandbox_id

    def exec(self, command: Union[str, Sequence[str]], **kw) -> ExecResult:
        return self.host.exec(self.id, command, **kw)

    def read_file(self, path: str) -> bytes:
        return self.host.read_file(self.id, path)

    def write_file(self, path: str, data: Data, mode: int = 0) -> None:
        self.host.write_file(self.id, path, data, mode)

    def stat(self, path: str) -> FileEntry:
        return self.host.stat(self.id, path)

    def list_dir(self, path: str) -> List[FileEntry]:
        return self.host.list_dir(self.id, path)

    def mkdir(self, path: str, parents: bool = True) -> None:
        self.host.mkdir(self.id, path, parents)

    def remove(self, path: str, recursive: bool = False) -> None:
        self.host.remove(self.id, path, recursive)

    def status(self) -> str:
        return self.host.status(self.id)

    def pause(self) -> None:
        self.host.pause(self.id)

    def resume(self) -> None:
        self.host.resume(self.id)

    def destroy(self) -> None:
        from .errors import SandboxNotFound
        try:
            self.host.destroy(self.id)
        except SandboxNotFound:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()

    def __repr__(self):
        return f"Sandbox({self.id!r})"


class AsyncSandbox:
    """Sandbox for AsyncHost: awaitable calls; `async with` destroys it at the end."""

    def __init__(self, host: "AsyncHost", sandbox_id: str):
        self.host = host
        self.id = sandbox_id

    async def exec(self, command: Union[str, Sequence[str]], **kw) -> ExecResult:
        return await self.host.exec(self.id, command, **kw)

    async def read_file(self, path: str) -> bytes:
        return await self.host.read_file(self.id, path)

    async def write_file(self, path: str, data: Data, mode: int = 0) -> None:
        await self.host.write_file(self.id, path, data, mode)

    async def status(self) -> str:
        return await self.host.status(self.id)

    async def destroy(self) -> None:
        from .errors import SandboxNotFound
        try:
            await self.host.destroy(self.id)
        except SandboxNotFound:
            pass

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.destroy()


def _created(c) -> str:
    return c.id.decode()


def _executed(c) -> Optional[ExecResult]:
    if not c.exec:
        return None
    try:
        return _exec_result(c.exec.contents)
    finally:
        _lib.lib().sbx_exec_result_free(c.exec)


def _read(c) -> bytes:
    if not c.data:
        return b""
    try:
        return ctypes.string_at(c.data, c.len) if c.len else b""
    finally:
        _lib.lib().sbx_free(c.data)


class _Queue:
    """libsbx's completion queue (sbx_queue_*) on one event loop. A call runs on one of the
    library's own threads; the loop hears of its end through the queue's descriptor
    (add_reader) and takes every completion waiting at that wake. No Python thread waits on a
    blocked call, and nothing but the loop's thread runs Python for it: a call costs the loop
    one wake, where a thread pool costs a pool thread's wake, its turn at the GIL and a
    wake of the loop through call_soon_threadsafe."""
    BATCH = 64

    def __init__(self, host: Host, workers: int):
        self._host = host
        self._L = host._L
        q = ctypes.c_void_p()
        host._call(self._L.sbx_queue_new, host._h, workers, ctypes.byref(q))
        self._q = q
        self._fd = self._L.sbx_queue_fd(q)
        self._loop = None
        # tag -> (future, the sbx_call with what it points to, convert)
        self._calls: Dict[int, tuple] = {}
        self._tag = 0
        self._buf = (_lib.Completion * self.BATCH)()
        _lib.init_header(self._buf[0])
        self._n = ctypes.c_size_t()
        self._err = _lib.Error()
        host._queues.append(self)

    def usable(self, loop) -> bool:
        """Whether `loop` may submit: the queue serves the loop that used it first, and moves to
        another once nothing is in flight or its loop has closed."""
        if self._loop is loop:
            return True
        if self._q is None or (self._calls and not self._loop.is_closed()):
            return False
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._fd)
        loop.add_reader(self._fd, self._ready)
        self._loop = loop
        return True

    def submit(self, op: int, convert, *, sandbox_id=None, create=None, exec_opts=None,
               path=None, data=None, mode=0) -> "asyncio.Future":
        self._tag = tag = self._tag + 1
        call = _lib.new(_lib.Call, op, 0, tag)
        if sandbox_id is not None:
            call.id = _b(sandbox_id)
        if create is not None:
            call.create = ctypes.pointer(create)
        if exec_opts is not None:
            call.exec = ctypes.pointer(exec_opts)
        if path is not None:
            call.path = _b(path)
        if data is not None:
            call.data = data
            call.len = len(data)
        call.mode = mode
        # Only the loop's thread submits and takes: one error struct serves every call.
        rc = self._L.sbx_queue_submit(self._q, ctypes.byref(call), self._err)
        if rc:
            raise from_error(rc, self._err)
        fut = self._loop.create_future()
        self._calls[tag] = (fut, call, convert)
        return fut

    def running(self, tag: int) -> bool:
        """Whether the call `tag` has not completed yet (its future may be cancelled)."""
        return tag in self._calls

    def _ready(self):
        n = self._n
        while True:
            rc = self._L.sbx_queue_take(self._q, self._buf, self.BATCH, ctypes.byref(n),
                                        self._err)
            if rc:
                raise from_error(rc, self._err)
            k = n.value
            for i in range(k):
                self._settle(self._buf[i])
            if k < self.BATCH:
                return

    def _settle(self, c: _lib.Completion):
        fut, _, convert = self._calls.pop(c.tag)
        try:
            # convert frees what the completion owns, so it runs whoever still waits.
            value = convert(c)
            error = None if c.status == 0 else from_error(c.status, c.err)
        except BaseException as e:  # a conversion that failed fails the call
            value, error = None, e
        if fut.cancelled() and c.op == _lib.CALL_CREATE and error is None:
            # No one will learn of this sandbox: delete it rather than leave it running.
            orphan = self.submit(_lib.CALL_DESTROY, _no_value, sandbox_id=value)
            orphan.add_done_callback(_quiet)
        if fut.done() or fut.get_loop().is_closed():
            return
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(value)

    def close(self):
        """Frees the queue; it waits for calls still running (kill commands first)."""
        if self._q is None:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._fd)
        q, self._q = self._q, None
        self._L.sbx_queue_free(q)
        if self in self._host._queues:
            self._host._queues.remove(self)


def _no_value(c):
    return None


def _quiet(fut):
    if not fut.cancelled():
        fut.exception()


class AsyncHost:
    """asyncio API. create, exec, destroy, read_file and write_file go through libsbx's
    completion queue (its threads run them; the loop watches one descriptor); the other calls
    run on a bounded thread pool. Nothing runs on the event loop but the conversions."""

    def __init__(self, config: Union[str, os.PathLike, Mapping, None] = None, *,
                 max_workers: int = 64, **kwargs):
        self.host = Host(config, **kwargs)
        self._workers = max_workers
        self._stale = False
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max_workers,
                                                           thread_name_prefix="sbx")
        self._queue = _Queue(self.host, max_workers)
        self._inflight: Dict[tuple, "asyncio.Future"] = {}
        _async_hosts.add(self)

    def _renew(self) -> None:
        """In a forked child (an event loop of its own, say in a multiprocessing worker): the
        pool's threads and the queue's stayed in the parent, so both are made anew."""
        with _fork_lock:
            if self._stale:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=self._workers, thread_name_prefix="sbx")
                self._inflight = {}
                self.host._h  # the host's own libsbx host first
                self._queue = _Queue(self.host, self._workers)
                self._stale = False

    async def _run(self, fn, *args, **kwargs):
        if self._stale:
            self._renew()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))

    def _queued(self) -> Optional[_Queue]:
        """The completion queue, when this loop may use it (else the calls take the pool)."""
        if self._stale:
            self._renew()
        q = self._queue
        return q if q.usable(asyncio.get_running_loop()) else None

    async def create(self, data_source: Optional[str] = None, *, image: Optional[str] = None,
                     labels: Optional[Mapping[str, str]] = None,
                     env: Optional[Mapping[str, str]] = None, ttl: int = 0,
                     wait: float = 0, share_dir: Optional[str] = None) -> str:
        """Host.create. A create whose await is cancelled still completes in the library; the
        sandbox it made is then destroyed, since no one holds its id."""
        q = self._queued()
        if q is None:
            return await self._run(self.host.create, data_source, image=image, labels=labels,
                                   env=env, ttl=ttl, wait=wait, share_dir=share_dir)
        opts = _create_opts(data_source, image, labels, env, ttl, wait, share_dir)
        return await q.submit(_lib.CALL_CREATE, _created, create=opts)

    async def destroy(self, sandbox_id: str) -> None:
        q = self._queued()
        if q is None:
            return await self._run(self.host.destroy, sandbox_id)
        return await q.submit(_lib.CALL_DESTROY, _no_value, sandbox_id=sandbox_id)

    async def exec(self, sandbox_id: str, command: Union[str, Sequence[str]], *,
                   cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                   timeout: Optional[float] = None, stdin: Optional[bytes] = None,
                   user: Optional[str] = None, cancel_token: Optional[str] = None,
                   background: bool = False, stdout_path: Optional[str] = None,
                   stderr_path: Optional[str] = None) -> Union[ExecResult, AsyncJob]:
        """Host.exec without a thread of this process waiting on it. Cancelling the await
        (asyncio.CancelledError, a wait_for timeout) kills the command in the sandbox."""
        if background:
            return await self.exec_background(sandbox_id, command, cwd=cwd, env=env,
                                              timeout=timeout, stdin=stdin, user=user,
                                              cancel_token=cancel_token,
                                              stdout_path=stdout_path,
                                              stderr_path=stderr_path)
        token = cancel_token or _new_token()
        q = self._queued()
        if q is None:
            fut = asyncio.get_running_loop().run_in_executor(
                self._pool, lambda: self.host.exec(sandbox_id, command, cwd=cwd, env=env,
                                                   timeout=timeout, stdin=stdin, user=user,
                                                   cancel_token=token,
                                                   stdout_path=stdout_path,
                                                   stderr_path=stderr_path))
            # Shielded: a cancelled await leaves the call's own future to tell when it ends.
            running, waited = (lambda: not fut.done()), asyncio.shield(fut)
        else:
            opts = _exec_opts(command, cwd, env, timeout, stdin, user, token, False,
                              stdout_path, stderr_path)
            fut = q.submit(_lib.CALL_EXEC, _executed, sandbox_id=sandbox_id, exec_opts=opts)
            # The queue knows when the call ends, so the await needs no shield (one turn of
            # the loop fewer per exec).
            tag = q._tag
            running, waited = (lambda: q.running(tag)), fut
        key = (sandbox_id, token)
        self._inflight[key] = running
        try:
            return await waited
        except asyncio.CancelledError:
            self._kill_soon(sandbox_id, token, running)
            raise
        finally:
            self._inflight.pop(key, None)

    def _kill_soon(self, sandbox_id: str, token: str, running) -> threading.Thread:
        """Kills the command on a thread of its own (the pool may be full of running
        commands, the kill must not queue behind them), again and again while `running()`
        says its call has not returned: a cancel that comes before the command has started
        finds nothing to kill the first time."""
        def kill():
            pause, deadline = 0.02, time.monotonic() + KILL_RETRY_S
            while running() and time.monotonic() < deadline:
                try:
                    self.host.cancel(sandbox_id, token)
                except Exception:  # a gone sandbox has nothing left to kill
                    return
                if running():
                    time.sleep(pause)
                    pause = min(pause * 2, 0.5)
        t = threading.Thread(target=kill, name="sbx-cancel", daemon=True)
        t.start()
        return t

    def sandbox_of(self, sandbox_id: str) -> AsyncSandbox:
        return AsyncSandbox(self, sandbox_id)

    async def sandbox(self, data_source: Optional[str] = None, **kw) -> AsyncSandbox:
        """`async with await host.sandbox() as sb:` destroys it when the block ends."""
        return AsyncSandbox(self, await self.create(data_source, **kw))

    async def exec_background(self, sandbox_id: str, command: Union[str, Sequence[str]],
                              **kw) -> AsyncJob:
        """Starts a background job; its methods are awaitables."""
        kw["background"] = True
        return AsyncJob(self, await self._run(self.host.exec, sandbox_id, command, **kw))

    def job(self, job_id: str) -> AsyncJob:
        return AsyncJob(self, self.host.job(job_id))

    async def jobs(self, *a, **k) -> List[JobStatus]:
        return await self._run(self.host.jobs, *a, **k)

    async def read_file(self, sandbox_id: str, path: str) -> bytes:
        q = self._queued()
        if q is None:
            return await self._run(self.host.read_file, sandbox_id, path)
        return await q.submit(_lib.CALL_READ_FILE, _read, sandbox_id=sandbox_id, path=path)

    async def write_file(self, sandbox_id: str, path: str, data: Data,
                         mode: int = 0) -> None:
        q = self._queued()
        if q is None:
            return await self._run(self.host.write_file, sandbox_id, path, data, mode)
        raw = _data(data)
        return await q.submit(_lib.CALL_WRITE_FILE, _no_value, sandbox_id=sandbox_id,
                              path=path, data=raw, mode=mode)

    async def stat(self, *a, **k) -> FileEntry:
        return await self._run(self.host.stat, *a, **k)

    async def list_dir(self, *a, **k) -> List[FileEntry]:
        return await self._run(self.host.list_dir, *a, **k)

    async def mkdir(self, *a, **k) -> None:
        return await self._run(self.host.mkdir, *a, **k)

    async def remove(self, *a, **k) -> None:
        return await self._run(self.host.remove, *a, **k)

    async def pause(self, *a, **k) -> None:
        return await self._run(self.host.pause, *a, **k)

    async def resume(self, *a, **k) -> None:
        return await self._run(self.host.resume, *a, **k)

    async def status(self, *a, **k) -> str:
        return await self._run(self.host.status, *a, **k)

    async def session_start(self, *a, **k) -> Tuple[str, str]:
        return await self._run(self.host.session_start, *a, **k)

    async def session_pause(self, *a, **k) -> None:
        return await self._run(self.host.session_pause, *a, **k)

    async def session_end(self, *a, **k) -> None:
        return await self._run(self.host.session_end, *a, **k)

    async def session_get(self, *a, **k) -> Session:
        return await self._run(self.host.session_get, *a, **k)

    async def aclose(self) -> None:
        """Kills the commands still running, then waits for their workers and frees the host:
        it never waits on a command longer than killing it takes."""
        if self._stale:
            # A fork's copy: the commands, workers and host are the parent's.
            self._stale = False
            self._inflight = {}
            self.host.close()
            return
        kills = [self._kill_soon(sid, tok, running)
                 for (sid, tok), running in list(self._inflight.items())]
        loop = asyncio.get_running_loop()
        for t in kills:
            await loop.run_in_executor(None, t.join)
        if self._queue._loop is loop:
            # Every call settles, those whose await was cancelled too: a completion may have
            # work left (a cancelled create deletes its sandbox).
            while self._queue._calls:
                await asyncio.sleep(0.01)
        await loop.run_in_executor(None, self._queue.close)
        await loop.run_in_executor(None, lambda: self._pool.shutdown(wait=True))
        self.host.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.aclose()
