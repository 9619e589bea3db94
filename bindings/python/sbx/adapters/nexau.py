"""NexAU's sandbox layer over sbx: `SbxSandbox` and `SbxSandboxManager`.

With NexAU importable, `SbxSandbox` is a subclass of its `BaseSandbox`, returns its own result
types (`CommandResult`, `FileOperationResult`, `FileInfo`, `CodeExecutionResult`,
`SandboxStatus`), raises its own exceptions and truncates with its own
`smart_truncate_output`; `SbxSandboxManager` is a `BaseSandboxManager`, so NexAU's
`Agent(sandbox_manager=...)` takes it. Without NexAU the same names come from
`sbx.adapters._nexau_types` (same fields), so this module still imports.

Drop-in for `LocalSandbox`: `SbxSandbox(sandbox_id=..., work_dir=...)` runs on sbx's `local`
backend with `work_dir` as the host folder every command starts in (the sandbox's
`share_dir`, given at create); paths outside it are the host's, as they are for LocalSandbox
(the host temp dir holds NexAU's output folders). Such sandboxes with the same config share
one sbx Host per process, whatever their work dirs. Another backend is chosen with
`sandbox_config={"type": "docker", ...}` (an sbx config block) or an existing `host=`; there
every path is inside the sandbox, `work_dir` is a folder in it and the temp dir is its /tmp,
as for NexAU's E2BSandbox. Timeouts are in milliseconds.

Output: every command writes NexAU's output folder (`<temp>/nexau_bash_tool_results/<hex>/`
with command.txt, stdout.txt, stderr.txt) inside the sandbox and the result is cleaned and cut
as NexAU does. `clean_output=False` opts out: the output is sbx's own (no cleaning, cut only
where sbx cut it, the full files in sbx's per-call folder on the host).
"""
import codecs
import fnmatch
import json
import logging
import os
import posixpath
import re
import shlex
import shutil
import signal
import stat as stat_mod
import sys
import tempfile
import threading
import time
import uuid
import weakref
from dataclasses import InitVar, dataclass, field, fields
from datetime import datetime
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Dict, List, Optional, Tuple, Union

from ..errors import BadId, SandboxNotFound, SbxError
from ..host import Host
from ..jobs import JobTimeout
from ._nexau_io import HostFiles, SbxFiles

logger = logging.getLogger(__name__)

try:  # NexAU's own types when NexAU is there
    from nexau.archs.sandbox.base_sandbox import (  # type: ignore
        BaseSandbox, BaseSandboxManager, CodeExecutionResult, CodeLanguage, CommandResult,
        FileInfo, FileOperationResult, SandboxError, SandboxExecutionError, SandboxFileError,
        SandboxStatus, SandboxTimeoutError, extract_dataclass_init_kwargs,
        smart_truncate_output)
    UPSTREAM = True
except ImportError:
    from ._nexau_types import (  # noqa: F401
        BaseSandbox, BaseSandboxManager, CodeExecutionResult, CodeLanguage, CommandResult,
        FileInfo, FileOperationResult, SandboxError, SandboxExecutionError, SandboxFileError,
        SandboxStatus, SandboxTimeoutError, extract_dataclass_init_kwargs,
        smart_truncate_output)
    UPSTREAM = False

from ._nexau_types import HEREDOC_RE

DEFAULT_TIMEOUT_MS = 120_000  # NexAU's execute_shell default
KILL_GRACE_S = 5.0  # LocalSandbox's SIGTERM -> SIGKILL grace
_LIVE = ("running", "paused", "creating")
_SHARED_HOSTS: Dict[Tuple[int, str], Host] = {}
_SHARED_LOCK = threading.Lock()
_ISOLATING_KEYS = ("isolation", "rootfs", "image")

# argv: OUTDIR COMMAND. Runs the command with its streams in NexAU's output folder, which
# _WRAP makes first (with command.txt) and _WRAP_MADE finds made.
_RUN = r"""
if command -v bash >/dev/null 2>&1; then
  exec bash -c "$c" >"$d/stdout.txt" 2>"$d/stderr.txt" </dev/null
fi
exec sh -c "$c" >"$d/stdout.txt" 2>"$d/stderr.txt" </dev/null"""
_WRAP = r"""d=$1 c=$2
{ mkdir -p "$d" && printf '%s' "$c" > "$d/command.txt"; } 2>/dev/null ||
  { echo "sbx-nexau: cannot make the output folder $d" >&2; exit 125; }""" + _RUN
_WRAP_MADE = 'd=$1 c=$2' + _RUN


def _shared_host(block: Dict[str, Any]) -> Host:
    """The Host of this process for a sandbox_config block. LocalSandbox-mode sandboxes each
    name their folder at create, so one Host (one plugin state, one ledger handle) serves
    them all; a forked child makes its own."""
    try:  # flat blocks (the usual ones) key by their items, cheaper than JSON per sandbox
        spec: Any = tuple(sorted(block.items()))
        hash(spec)
    except TypeError:  # a nested value (a dict, a list)
        spec = json.dumps(block, sort_keys=True, default=str)
    key = (os.getpid(), spec)
    with _SHARED_LOCK:
        h = _SHARED_HOSTS.get(key)
        if h is None:
            h = _SHARED_HOSTS[key] = Host({"sandbox_config": block})
        return h


def _fmt_time(t: float) -> str:
    return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")


def _decode_text(data: bytes, encoding: str) -> str:
    """Decodes as a text-mode open() would: strict, universal newlines."""
    text = data.decode(encoding)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _detect_encoding(data: bytes) -> str:
    """NexAU's rule: chardet's answer above 0.7 confidence, else utf-8."""
    try:
        import chardet  # type: ignore
        got = chardet.detect(data)
        if got.get("encoding") and got.get("confidence", 0) > 0.7:
            return got["encoding"]
    except ImportError:
        pass
    except Exception as e:  # chardet failing says nothing about the file
        logger.warning("Error detecting encoding: %s", e)
    return "utf-8"


def _splice(raw: bytes, text: str, encoding: str, start: int, old: str, new: str) -> bytes:
    """raw with the encoded `old` at text offset `start` replaced by `new`, every other byte
    kept as it was read; a codec whose bytes do not line up gets the text re-encoded."""
    enc = codecs.getincrementalencoder(encoding)()
    head = enc.encode(text[:start])
    old_b = enc.encode(old)
    enc2 = codecs.getincrementalencoder(encoding)()
    enc2.encode(text[:start])
    new_b = enc2.encode(new)
    end = len(head) + len(old_b)
    if raw[:len(head)] == head and raw[len(head):end] == old_b:
        return raw[:len(head)] + new_b + raw[end:]
    return (text[:start] + new + text[start + len(old):]).encode(encoding)


# An absolute POSIX path that PurePosixPath keeps as it is (no empty or "." component, at most
# a trailing slash), and a part it appends as it is (one plain name).
_PLAIN_BASE = re.compile(r"/(?:(?!\.?/)[^/\\]+/)*(?:(?!\.?/?\Z)[^/\\]+/?)?\Z")
_PLAIN_PART = re.compile(r"(?!\.\Z)[^/\\]+\Z")


def _host_join(base: str, *parts: str) -> str:
    """NexAU's join_path: Windows rules for a drive or backslash base, else POSIX."""
    if _PLAIN_BASE.match(base) and all(_PLAIN_PART.match(x) for x in parts):
        # What PurePosixPath gives here, without building one (every command joins twice).
        return base.rstrip("/") + "/" + "/".join(parts)
    if re.match(r"^[A-Za-z]:[\\/]", base) or "\\" in base:
        wp = PureWindowsPath(base)
        for x in parts:
            wp = wp / str(x)
        return str(wp)
    pp = PurePosixPath(base)
    for x in parts:
        pp = pp / str(x)
    return str(pp)


@dataclass(kw_only=True)
class SbxSandbox(BaseSandbox):
    """A NexAU sandbox on any sbx backend. The sbx sandbox is made (or attached, when
    `sandbox_id` names a live one) on first use; one this object made is destroyed by
    close(), by the `with` block's end, or at exit."""

    sandbox_config: Optional[Dict[str, Any]] = None
    data_source: Optional[str] = None
    clean_output: bool = True
    host: InitVar[Optional[Host]] = None

    def __post_init__(self, host: Optional[Host] = None):
        super().__post_init__()
        # Plain attributes, not dataclass fields: asdict()/dict() see only NexAU's state.
        self.host = host
        self._sbx_id: Optional[str] = None
        self._owns = False
        self._owns_host = host is None
        self._host_paths = False  # LocalSandbox mode (module doc)
        self._home_mode = False  # work_dir is the backend's own home: paths go relative
        self._tmp: Optional[str] = None
        self._work_seen: Any = None  # the work_dir that _work_str was made from
        self._work_str = ""
        self._lock = threading.RLock()
        self._finalizer = None
        self._block = None
        self._jobs_started = False  # whether _sweep_jobs has folders to look for
        if host is None:
            block = dict(self.sandbox_config or {"type": "local"})
            block.setdefault("type", "local")
            if (block["type"] == "local" and self.work_dir is not None and
                    not any(k in block for k in _ISOLATING_KEYS + ("share_dir",))):
                self.work_dir = Path(os.path.abspath(str(self.work_dir)))
                self._host_paths = self._home_mode = True
                self._owns_host = False  # a shared one, kept for the next sandbox
            for k in ("output_char_threshold", "truncate_head_chars", "truncate_tail_chars"):
                block.setdefault(k, getattr(self, k))
            self._block = block

    # ---- lifecycle -------------------------------------------------------------------

    def _host(self) -> Host:
        if self.host is None:
            with self._lock:
                if self.host is None:
                    self.host = (_shared_host(self._block) if self._host_paths else
                                 Host({"sandbox_config": self._block}))
        return self.host

    def _ensure(self) -> str:
        """The sbx id, attaching to `sandbox_id` if it is live, else creating one."""
        if self._sbx_id is not None:
            return self._sbx_id
        with self._lock:
            if self._sbx_id is not None:
                return self._sbx_id
            h = self._host()
            sid = None
            if self.sandbox_id:
                try:
                    st = h.status(self.sandbox_id)
                    if st == "paused":
                        h.resume(self.sandbox_id)
                    if st in _LIVE:
                        sid = self.sandbox_id
                except (BadId, SandboxNotFound):
                    pass  # a name, not a live sandbox (LocalSandbox ids are labels)
            if sid is None:
                share = None
                if self._host_paths:  # share_dir must exist before the create
                    share = str(self.work_dir)
                    HostFiles().mkdir(share, parents=True)
                sid = h.create(self.data_source, env=dict(self.envs or {}), share_dir=share)
                self._owns = True
                self.sandbox_id = sid
                self._finalizer = weakref.finalize(self, _destroy, h, sid, self._owns_host)
            self._sbx_id = sid
            if self.work_dir is None:
                r = h.exec(sid, "pwd", timeout=30)
                self.work_dir = Path(r.stdout.strip() or "/")
                self._home_mode = True
            elif not self._home_mode:
                try:
                    h.mkdir(sid, str(self.work_dir), parents=True)
                except SbxError as e:
                    logger.warning("work_dir %s: %s", self.work_dir, e)
            return sid

    def start(self) -> str:
        """Makes (or attaches) the sbx sandbox now; returns its id."""
        return self._ensure()

    def close(self) -> None:
        """Destroys the sandbox if this object made it; frees a host it made."""
        with self._lock:
            self._sweep_jobs()
            fin, self._finalizer = self._finalizer, None
            if fin is not None:
                fin()
            elif self._owns_host and self.host is not None:
                self.host.close()
            if self._owns_host:
                self.host = None
            self._sbx_id = None

    def stop(self) -> bool:
        self.close()
        return True

    def _sweep_jobs(self, force: bool = False) -> None:
        """In LocalSandbox mode the jobs' folders live in the user's work dir: a closing
        sandbox ends its tasks and leaves no `.sbx` behind there (kept if others use it)."""
        if not (self._host_paths and self._sbx_id and (self._owns or force) and
                self._jobs_started):
            return
        for pid in list(self._background_tasks):
            task = self._background_tasks[pid]
            if not task["finished"]:
                try:
                    task["job"].kill(signal.SIGKILL)
                    task["job"].wait(10)
                except (SbxError, JobTimeout):
                    pass
            self._forget_job(task)
        for d in (".sbx/jobs", ".sbx"):
            try:
                os.rmdir(os.path.join(str(self.work_dir), d))
            except OSError:
                break

    def detach(self) -> Optional[str]:
        """Stops owning the sandbox (it outlives this object); returns its id."""
        with self._lock:
            fin, self._finalizer = self._finalizer, None
            if fin is not None:
                fin.detach()
            self._owns = False
            return self._sbx_id

    def destroy(self) -> None:
        """Destroys the sandbox whoever made it (a gone one counts as destroyed)."""
        with self._lock:
            self._sweep_jobs(force=True)
            sid = self._sbx_id or self.sandbox_id
            self.detach()
            if sid:
                try:
                    self._host().destroy(sid)
                except (SandboxNotFound, BadId):
                    pass
            self._sbx_id = None
            if self._owns_host and self.host is not None:
                self.host.close()
                self.host = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- paths and helpers -------------------------------------------------------------

    def get_temp_dir(self) -> str:
        """The host's temp dir in LocalSandbox mode (as LocalSandbox); else the sandbox's
        /tmp where its file operations reach it, else `.nexau_tmp` in the work dir."""
        if self._tmp is None:
            if self._host_paths:
                self._tmp = tempfile.gettempdir()
            else:
                sid = self._ensure()
                try:
                    self._host().stat(sid, "/tmp")
                    self._tmp = "/tmp"
                except SbxError:
                    self._tmp = self.join_path(str(self.work_dir), ".nexau_tmp")
        return self._tmp

    def join_path(self, base_path: Union[str, os.PathLike], *parts) -> str:
        return _host_join(str(base_path), *[str(x) for x in parts])

    def get_bash_tool_results_base_path(self) -> str:
        return self.join_path(self.get_temp_dir(), "nexau_bash_tool_results")

    def get_tool_output_dir(self) -> str:
        return self.join_path(self.get_temp_dir(), "nexau_tool_outputs")

    def to_shell_path(self, path: Union[str, os.PathLike]) -> str:
        return str(path)

    def get_python_command(self) -> str:
        """python3; in LocalSandbox mode this Python, as LocalSandbox does."""
        if self._host_paths and sys.executable:
            return shlex.quote(sys.executable)
        return "python3"

    def _merge_envs(self, per_call: Optional[Dict[str, str]] = None) -> Optional[Dict[str, str]]:
        if not self.envs and not per_call:
            return None
        merged = dict(self.envs or {})
        merged.update(per_call or {})
        return merged or None

    def _exec_env(self, per_call: Optional[Dict[str, str]]) -> Dict[str, str]:
        env = dict(self._merge_envs(per_call) or {})
        if self._host_paths and "HOME" in os.environ:
            env.setdefault("HOME", os.environ["HOME"])  # LocalSandbox keeps the user's HOME
        return env

    def prepare_shell_command(self, command: str, script_dir: Optional[str] = None) -> str:
        """A command with a heredoc is written to a script and run as `bash <script>`, so
        no wrapper can break its delimiter line (NexAU's rule)."""
        if not HEREDOC_RE.search(command):
            return command
        target = script_dir if script_dir is not None else self.get_temp_dir()
        path = f"{target}/_nexau_heredoc_{uuid.uuid4().hex[:8]}.sh"
        w = self.write_file(path, command, create_directories=True)
        if w.status != SandboxStatus.SUCCESS:
            raise SandboxError(f"cannot write heredoc script {path}: {w.error}")
        return f"bash {shlex.quote(self.to_shell_path(path))}"

    def scriptify_heredoc(self, command: str, script_dir: Optional[str] = None) -> str:
        return self.prepare_shell_command(command, script_dir)

    def _work(self) -> str:
        """work_dir as a normalised string, remade only when work_dir is another object
        (every command and file call asks, and str() of a Path is not free)."""
        w = self.work_dir
        if w is not self._work_seen:
            self._work_str = posixpath.normpath(str(w)) if w is not None else "."
            self._work_seen = w
        return self._work_str

    def _abs(self, path: Union[str, Path]) -> str:
        p = str(path)
        if posixpath.isabs(p):
            return posixpath.normpath(p)
        if p in (".", ""):
            return self._work()
        return posixpath.normpath(posixpath.join(self._work(), p))

    def _beneath_work(self, a: str) -> Optional[str]:
        """`a` relative to work_dir ("." for itself), or None when it is outside."""
        w = self._work()
        if a == w:
            return "."
        w = w.rstrip("/")
        if a.startswith(w + "/"):
            return a[len(w) + 1:]
        return None

    def _route(self, path: Union[str, Path]) -> Tuple[Any, str]:
        """(files, path as they take it) for a NexAU path."""
        sid = self._ensure()
        a = self._abs(path)
        if self._home_mode:
            rel = self._beneath_work(a)
            if rel is not None:
                return SbxFiles(self._host(), sid), rel
            if self._host_paths:
                return HostFiles(), a
        return SbxFiles(self._host(), sid), a

    def _cwd(self, cwd: Optional[str]) -> Optional[str]:
        if self._host_paths:  # the host folder itself, so pwd and $PWD say what LocalSandbox's do
            return self._abs(cwd or ".")
        if not cwd:
            return None
        a = self._abs(cwd)
        if self._home_mode:
            rel = self._beneath_work(a)
            if rel is not None:
                return None if rel == "." else rel
        return a

    def _stat(self, path: str):
        files, p = self._route(path)
        return files.stat(p)

    def dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for f in fields(self):
            if not f.init or f.name == "sandbox_config":  # may hold a backend's secrets
                continue
            v = getattr(self, f.name)
            out[f.name] = str(v) if isinstance(v, Path) else v
        return out

    def __str__(self):
        return f"{self.__class__.__name__}: {self.sandbox_id} ({self.work_dir})"

    def __repr__(self):
        return self.__str__()

    # ---- commands ----------------------------------------------------------------------

    def _out_dir(self) -> str:
        # Eight hex digits, as LocalSandbox's uuid4().hex[:8], without making a UUID.
        return self.join_path(self.get_bash_tool_results_base_path(), os.urandom(4).hex())

    def _wrap(self, out_dir: str, command: str) -> str:
        """The wrapper for a command whose output goes to out_dir. In LocalSandbox mode the
        folder and command.txt are made from here (host files, or `local`'s file calls: no
        process), which spares every command a `mkdir` process, a third of what `echo hi`
        cost through this class; a foreground command then needs no wrapper at all (exec's
        stdout_path and stderr_path, opened by the backend: the wrapper's /bin/sh was as
        dear as `bash -c 'echo hi'` itself, and the command's $0 is bash's full path, as
        LocalSandbox's is). Elsewhere a file call may be a round trip to the backend, so
        the wrapper makes them in the sandbox, in the same call as the command."""
        if not self._host_paths:
            return _WRAP
        files, p = self._route(out_dir)
        files.mkdir(p, parents=True)
        files.write(posixpath.join(p, "command.txt"),
                    command.encode("utf-8", "surrogateescape"))
        return _WRAP_MADE

    def _read_outputs(self, out_dir: str) -> Tuple[str, str]:
        got = []
        files, p = self._route(out_dir)  # both files are where their folder is
        for name in ("stdout.txt", "stderr.txt"):
            try:
                data = files.read(posixpath.join(p, name))
            except (SbxError, OSError):
                data = b""
            got.append(data.decode("utf-8", "replace"))
        return got[0], got[1]

    def _files_of(self, out_dir: Optional[str]) -> Dict[str, Optional[str]]:
        return dict(output_dir=out_dir,
                    stdout_file=f"{out_dir}/stdout.txt" if out_dir else None,
                    stderr_file=f"{out_dir}/stderr.txt" if out_dir else None)

    def _cut(self, out: str, err: str, out_dir: str):
        return smart_truncate_output(out, err, out_dir, threshold=self.output_char_threshold,
                                     head_chars=self.truncate_head_chars,
                                     tail_chars=self.truncate_tail_chars)

    def execute_bash(self, command: str, timeout: Optional[int] = None, cwd: Optional[str] = None,
                     user: Optional[str] = None, envs: Optional[Dict[str, str]] = None,
                     background: bool = False) -> CommandResult:
        return self.execute_shell(command, timeout=timeout, cwd=cwd, user=user, envs=envs,
                                  background=background)

    def execute_shell(self, command: str, timeout: Optional[int] = None,
                      cwd: Optional[str] = None, user: Optional[str] = None,
                      envs: Optional[Dict[str, str]] = None,
                      background: bool = False) -> CommandResult:
        t0 = time.monotonic()
        if timeout is None:
            timeout = DEFAULT_TIMEOUT_MS
        if user is not None and self._host_paths:
            logger.warning("User %s is not used in local sandbox.", user)
            user = None
        try:
            sid = self._ensure()
            command = self.prepare_shell_command(command)
            where = self._cwd(cwd)
            env = self._exec_env(envs)
            if background:
                return self._bg_start(sid, command, where, user, env, t0)
            secs = timeout / 1000.0 if timeout > 0 else 0
            if not self.clean_output:
                return self._run_plain(sid, command, where, user, env, secs, timeout)
            out_dir = self._out_dir()
            wrap = self._wrap(out_dir, command)
            if self._host_paths:  # _wrap made the folder: the backend opens the files
                r = self._host().exec(sid, command, cwd=where, env=env, user=user,
                                      timeout=secs, stdout_path=f"{out_dir}/stdout.txt",
                                      stderr_path=f"{out_dir}/stderr.txt")
            else:
                r = self._host().exec(sid, ["/bin/sh", "-c", wrap, "sbx-nexau", out_dir,
                                            command], cwd=where, env=env, user=user,
                                      timeout=secs)
        except (SbxError, SandboxError, OSError) as e:
            return CommandResult(status=SandboxStatus.ERROR, stdout="", stderr="", exit_code=-1,
                                 duration_ms=int((time.monotonic() - t0) * 1000),
                                 error=f"Execution failed: {e}", truncated=False)
        if r.exit_code == 125 and not r.timed_out and r.stderr.startswith("sbx-nexau:"):
            return CommandResult(status=SandboxStatus.ERROR, stdout="", stderr=r.stderr,
                                 exit_code=-1, duration_ms=int(r.duration * 1000),
                                 error=f"Execution failed: {r.stderr.strip()}")
        out, err, cut, o_out, o_err = self._cut(*self._read_outputs(out_dir), out_dir)
        return self._result(r, timeout, out, err, cut, o_out, o_err, out_dir)

    def _run_plain(self, sid, command, where, user, env, secs, timeout) -> CommandResult:
        """clean_output=False: sbx's own output, cut only where sbx cut it."""
        r = self._host().exec(sid, command, cwd=where, env=env, user=user, timeout=secs)
        lens = ((r.original_stdout_length, r.original_stderr_length) if r.truncated
                else (None, None))
        res = self._result(r, timeout, r.stdout, r.stderr, r.truncated, *lens, None)
        res.output_dir, res.stdout_file, res.stderr_file = (r.output_dir, r.stdout_file,
                                                            r.stderr_file)
        return res

    @staticmethod
    def _result(r, timeout, out, err, cut, o_out, o_err, out_dir) -> CommandResult:
        if r.timed_out:
            status, code = SandboxStatus.TIMEOUT, (-r.signal if r.signal else -1)
            error = f"Command timed out after {timeout}ms"
        else:
            code = -r.signal if r.signal else r.exit_code
            status = SandboxStatus.SUCCESS if code == 0 else SandboxStatus.ERROR
            error = None if code == 0 else f"Command failed with exit code {code}"
        return CommandResult(status=status, stdout=out, stderr=err, exit_code=code,
                             duration_ms=int(r.duration * 1000), error=error, truncated=cut,
                             original_stdout_length=o_out, original_stderr_length=o_err,
                             output_dir=out_dir,
                             stdout_file=f"{out_dir}/stdout.txt" if out_dir else None,
                             stderr_file=f"{out_dir}/stderr.txt" if out_dir else None)

    # ---- background tasks: sbx jobs ------------------------------------------------------

    def _bg_start(self, sid, command, where, user, env, t0) -> CommandResult:
        self._jobs_started = True
        out_dir = self._out_dir()
        wrap = self._wrap(out_dir, command)
        job = self._host().exec(sid, ["/bin/sh", "-c", wrap, "sbx-nexau", out_dir, command],
                                cwd=where, env=env, user=user, background=True)
        st = job.status()
        deadline = time.monotonic() + 30
        while st.pid <= 0 and st.running and time.monotonic() < deadline:
            time.sleep(0.01)  # the supervisor has not started the command yet
            st = job.status()
        pid = st.pid if st.pid > 0 else -len(self._background_tasks) - 1
        while pid in self._background_tasks:  # a pid the sandbox reused
            pid = -abs(pid) - 1
        self._background_tasks[pid] = {
            "job": job, "job_id": job.id, "command": command, "start_time": time.time(),
            "t0": t0, "finished": False, "exit_code": -1, "error": None,
            "std_output_dir": out_dir, "stdout_file": f"{out_dir}/stdout.txt",
            "stderr_file": f"{out_dir}/stderr.txt"}
        if not st.running:  # ended before its pid was seen (a loaded machine): keep its outcome
            self._finish(self._background_tasks[pid], st)
        return CommandResult(
            status=SandboxStatus.SUCCESS,
            stdout=f"Background task started (pid: {pid})\nOutput will be saved to {out_dir}/",
            stderr="", exit_code=0, duration_ms=int((time.monotonic() - t0) * 1000),
            background_pid=pid, **self._files_of(out_dir))

    @staticmethod
    def _not_found(pid: int) -> CommandResult:
        msg = f"Background task not found: pid={pid}"
        return CommandResult(status=SandboxStatus.ERROR, stderr=msg, exit_code=-1, error=msg)

    def get_background_task_status(self, pid: int) -> CommandResult:
        task = self._background_tasks.get(pid)
        if task is None:
            return self._not_found(pid)
        ms = int((time.monotonic() - task["t0"]) * 1000)
        out_dir = task["std_output_dir"]
        running = False
        if not task["finished"]:
            try:
                st = task["job"].status()
            except SbxError as e:
                return CommandResult(status=SandboxStatus.ERROR, stderr=str(e), exit_code=-1,
                                     duration_ms=ms, error=f"Background task status failed: {e}",
                                     background_pid=pid, **self._files_of(out_dir))
            running = st.running
            if not running:
                self._finish(task, st)
        out, err, cut, o_out, o_err = self._cut(*self._read_outputs(out_dir), out_dir)
        common = dict(stdout=out, stderr=err, duration_ms=ms, truncated=cut,
                      original_stdout_length=o_out, original_stderr_length=o_err,
                      background_pid=pid, **self._files_of(out_dir))
        if running:
            return CommandResult(status=SandboxStatus.RUNNING, exit_code=-1, **common)
        code = task["exit_code"]
        return CommandResult(status=SandboxStatus.SUCCESS if code == 0 else SandboxStatus.ERROR,
                             exit_code=code, error=task["error"], **common)

    def _finish(self, task, st) -> None:
        """Records an ended job's outcome from its status `st` and forgets the job."""
        if st.state == "lost":
            code, error = -1, "Background task lost: its supervisor in the sandbox is gone"
        else:
            code = -st.signal if st.signal else st.exit_code
            error = None if code == 0 else f"Command failed with exit code {code}"
        task.update(finished=True, exit_code=code, error=error)
        self._forget_job(task)

    def _forget_job(self, task) -> None:
        """Removes an ended job's folder (.sbx/jobs/<hex> beneath the backend's work dir, in
        LocalSandbox mode the user's own folder); its outcome stays in the task and its output
        in NexAU's output folder."""
        hexid = task["job_id"].split("@", 1)[0]
        try:
            SbxFiles(self._host(), self._ensure()).remove(f".sbx/jobs/{hexid}", recursive=True)
        except (SbxError, OSError) as e:
            logger.debug("job folder %s: %s", hexid, e)

    def kill_background_task(self, pid: int) -> CommandResult:
        """SIGTERM to the task's whole tree, SIGKILL after a grace (LocalSandbox's 5 s) if
        it is still there; the task is forgotten."""
        task = self._background_tasks.get(pid)
        if task is None:
            return self._not_found(pid)
        job = task["job"]
        try:
            job.kill(signal.SIGTERM)
            try:
                job.wait(KILL_GRACE_S)
            except JobTimeout:
                job.kill(signal.SIGKILL)
                try:
                    job.wait(10)
                except JobTimeout:
                    logger.warning("background task %s: still running after SIGKILL", pid)
        except SbxError as e:
            return CommandResult(status=SandboxStatus.ERROR, stderr=str(e), exit_code=-1,
                                 error=f"Failed to kill background task: {str(e)[:200]}",
                                 background_pid=pid)
        self._background_tasks.pop(pid, None)
        self._forget_job(task)
        return CommandResult(status=SandboxStatus.SUCCESS,
                             stdout=f"Background task (pid={pid}) killed successfully",
                             exit_code=0, duration_ms=int((time.monotonic() - task["t0"]) * 1000),
                             background_pid=pid)

    def list_background_tasks(self) -> Dict[int, Any]:
        return self._background_tasks

    # ---- code ------------------------------------------------------------------------------

    def execute_code(self, code: str, language: Union[CodeLanguage, str],
                     timeout: Optional[int] = None,
                     user: Optional[str] = None,
                     envs: Optional[Dict[str, str]] = None) -> CodeExecutionResult:
        t0 = time.monotonic()
        if isinstance(language, str):
            try:
                language = CodeLanguage(language.lower())
            except ValueError:
                return CodeExecutionResult(status=SandboxStatus.ERROR,
                                           language=CodeLanguage.PYTHON, error_type="ValueError",
                                           error_value=f"Unsupported language: {language}.",
                                           duration_ms=0)
        if language != CodeLanguage.PYTHON:
            return CodeExecutionResult(
                status=SandboxStatus.ERROR, language=language, error_type="ValueError",
                error_value=f"Unsupported language: {language}. Only Python is supported.",
                duration_ms=0)
        name = f"_nexau_code_{uuid.uuid4().hex[:12]}.py"
        try:
            w = self.write_file(name, code)
            if w.status != SandboxStatus.SUCCESS:
                raise SandboxFileError(w.error)
            try:
                r = self.execute_shell(f"{self.get_python_command()} {shlex.quote(name)}",
                                       timeout, user=user, envs=envs)
            finally:
                self.delete_file(name)
        except (SbxError, SandboxError, OSError) as e:
            return CodeExecutionResult(status=SandboxStatus.ERROR, language=language,
                                       error_type=type(e).__name__, error_value=str(e),
                                       duration_ms=int((time.monotonic() - t0) * 1000))
        outputs = []
        if r.stdout:
            outputs.append({"type": "stdout", "text": r.stdout})
        if r.stderr:
            outputs.append({"type": "stderr", "text": r.stderr})
        ok = r.status == SandboxStatus.SUCCESS
        return CodeExecutionResult(status=r.status, language=language, outputs=outputs,
                                   error_type=None if ok else "ExecutionError",
                                   error_value=r.error,
                                   traceback=[r.stderr] if r.stderr else None,
                                   duration_ms=r.duration_ms, truncated=r.truncated)

    # ---- files ------------------------------------------------------------------------------

    @staticmethod
    def _fail(path, what, e) -> FileOperationResult:
        return FileOperationResult(status=SandboxStatus.ERROR, file_path=path,
                                   error=f"Failed to {what}: {e}")

    def read_file(self, file_path: str, encoding: str = "utf-8",
                  binary: bool = False) -> FileOperationResult:
        try:
            files, p = self._route(file_path)
            e = files.stat(p)
            if e is None:
                return FileOperationResult(status=SandboxStatus.ERROR, file_path=file_path,
                                           error=f"File does not exist: {file_path}")
            data = files.read(p)
            content = data if binary else _decode_text(data, encoding)
        except (SbxError, OSError, UnicodeDecodeError, LookupError) as err:
            return self._fail(file_path, "read file", err)
        return FileOperationResult(status=SandboxStatus.SUCCESS, file_path=file_path,
                                   content=content, size=e.size)

    def write_file(self, file_path: str, content: Union[str, bytes], encoding: str = "utf-8",
                   binary: bool = False,
                   create_directories: bool = True,
                   user: Optional[str] = None) -> FileOperationResult:
        try:
            if isinstance(content, str):
                raw = content.encode(encoding)
            else:
                raw = bytes(content)
                if not binary:
                    raw = raw.decode(encoding).encode(encoding)  # text mode writes only text
            files, target = self._route(file_path)
            parent = posixpath.dirname(target)
            if parent and parent != ".":
                if create_directories:
                    files.mkdir(parent, parents=True)
                elif files.stat(parent) is None:
                    raise FileNotFoundError(f"[Errno 2] No such file or directory: "
                                            f"'{self._abs(file_path)}'")
            files.write(target, raw)
        except (SbxError, OSError, UnicodeError, LookupError) as e:
            return self._fail(file_path, "write file", e)
        return FileOperationResult(status=SandboxStatus.SUCCESS, file_path=file_path,
                                   size=len(raw))

    def delete_file(self, file_path: str) -> FileOperationResult:
        try:
            files, p = self._route(file_path)
            if files.stat(p) is None:
                return FileOperationResult(status=SandboxStatus.ERROR, file_path=file_path,
                                           error=f"File does not exist: {file_path}")
            files.remove(p, recursive=True)
        except (SbxError, OSError) as e:
            return self._fail(file_path, "delete file", e)
        return FileOperationResult(status=SandboxStatus.SUCCESS, file_path=file_path)

    def file_exists(self, file_path: str) -> bool:
        try:
            return self._stat(file_path) is not None
        except (SbxError, OSError, SandboxError):
            return False

    @staticmethod
    def _info(shown: str, e, encoding=None, listing=False) -> FileInfo:
        """NexAU's FileInfo: get_file_info gives mode and permissions, list_files does not
        and reports size 0 for folders."""
        return FileInfo(path=shown, exists=True, is_file=e.kind == "file",
                        is_directory=e.kind == "dir",
                        size=e.size if (not listing or e.kind == "file") else 0,
                        mode=None if listing else (e.mode | _IFMT.get(e.kind, 0)),
                        permissions=None if listing else stat_mod.filemode(e.mode)[1:],
                        modified_time=_fmt_time(e.mtime), readable=bool(e.mode & 0o444),
                        writable=bool(e.mode & 0o222), encoding=encoding)

    def get_file_info(self, file_path: str) -> FileInfo:
        try:
            files, p = self._route(file_path)
            e = files.stat(p)
            if e is None:
                return FileInfo(path=file_path, exists=False)
            enc = _detect_encoding(files.read(p)) if e.kind == "file" else None
            return self._info(file_path, e, enc)
        except (SbxError, OSError) as err:
            raise SandboxFileError(f"Failed to get file info: {err}") from err

    def _walk(self, abs_dir: str, recursive: bool, out: List[tuple]) -> None:
        """(absolute path, entry, path relative to abs_dir) beneath abs_dir, sorted."""
        stack = [("", abs_dir)]
        while stack:
            rel, d = stack.pop(0)
            files, p = self._route(d)
            for e in sorted(files.listdir(p), key=lambda x: x.name):
                full = posixpath.join(d, e.name)
                r = posixpath.join(rel, e.name) if rel else e.name
                out.append((full, e, r))
                if recursive and e.kind == "dir":
                    stack.append((r, full))

    def list_files(self, directory_path: str, recursive: bool = False,
                   pattern: Optional[str] = None) -> List[FileInfo]:
        try:
            e = self._stat(directory_path)
            if e is None:
                raise SandboxFileError(f"Directory does not exist: {directory_path}")
            if e.kind != "dir":
                raise SandboxFileError(f"Path is not a directory: {directory_path}")
            found: List[tuple] = []
            base = self._abs(directory_path)
            deep = recursive or (pattern is not None and ("**" in pattern or "/" in pattern))
            self._walk(base, deep, found)
            if pattern:
                # pathlib's Path.glob: wildcards match dot names too
                rx = _glob_regex(f"**/{pattern}" if recursive else pattern, True, hidden=True)
                found = [f for f in found if rx.fullmatch(f[2])]
            return [self._info(full, ent, listing=True) for full, ent, _ in found]
        except (SandboxFileError, SbxError, OSError) as err:
            raise SandboxFileError(f"Failed to list files: {err}") from err

    def create_directory(self, directory_path: str, parents: bool = True,
                         user: Optional[str] = None) -> bool:
        try:
            files, p = self._route(directory_path)
            e = files.stat(p)
            if e is not None and e.kind == "dir":
                return True
            files.mkdir(p, parents=parents)
        except (SbxError, OSError) as e:
            raise SandboxFileError(f"Failed to create directory: {e}") from e
        return True

    def edit_file(self, file_path: str, old_string: str, new_string: str) -> FileOperationResult:
        """NexAU's three modes; the match must be unique. Only the matched bytes change:
        the rest of the file is written back exactly as it was read."""
        try:
            files, p = self._route(file_path)
            exists = files.stat(p) is not None
            if old_string == "" and new_string != "":
                op = "CREATE"
            elif old_string != "" and new_string == "":
                op = "REMOVE_CONTENT"
            else:
                op = "UPDATE"
            if op == "CREATE" and exists:
                return FileOperationResult(
                    status=SandboxStatus.ERROR, file_path=file_path,
                    error=f"File already exists: {file_path}. Use UPDATE operation instead.")
            if op != "CREATE" and not exists:
                return FileOperationResult(
                    status=SandboxStatus.ERROR, file_path=file_path,
                    error=f"File does not exist: {file_path}. Use CREATE operation instead.")
            if op == "CREATE":
                data = new_string.encode("utf-8")
            else:
                raw = files.read(p)
                encoding = _detect_encoding(raw)
                text = raw.decode(encoding)
                if old_string not in text:
                    def unescape(s):
                        return (s.replace("\\\\n", "\\n").replace("\\\\t", "\\t")
                                .replace("\\\\r", "\\r"))
                    if unescape(old_string) != old_string and unescape(old_string) in text:
                        old_string, new_string = unescape(old_string), unescape(new_string)
                    else:
                        return FileOperationResult(
                            status=SandboxStatus.ERROR, file_path=file_path,
                            error=f"String to replace not found in file: {file_path}")
                n = text.count(old_string)
                if n > 1:
                    return FileOperationResult(
                        status=SandboxStatus.ERROR, file_path=file_path,
                        error=(f"Found {n} matches of the string to replace. For safety, this "
                               "tool only supports replacing exactly one occurrence at a "
                               "time. Add more lines of context to your edit and try again."))
                data = _splice(raw, text, encoding, text.index(old_string), old_string,
                               new_string if op == "UPDATE" else "")
            parent = posixpath.dirname(p)
            if parent and parent != ".":
                files.mkdir(parent, parents=True)
            files.write(p, data)
        except (SbxError, OSError, UnicodeError, LookupError) as e:
            return self._fail(file_path, "edit file", e)
        return FileOperationResult(status=SandboxStatus.SUCCESS, file_path=file_path,
                                   size=len(data))

    def glob(self, pattern: str, recursive: bool = True,
             user: Optional[str] = None) -> List[str]:
        """Python's glob semantics: `*` stays in one folder, `**` spans folders only with
        recursive; hidden names need an explicit dot; paths relative to work_dir."""
        try:
            self._ensure()
            absolute = posixpath.isabs(pattern)
            full = posixpath.normpath(pattern if absolute else
                                      posixpath.join(str(self.work_dir), pattern))
            parts = full.split("/")
            fixed = []
            for part in parts[1:]:
                if _MAGIC.search(part):
                    break
                fixed.append(part)
            base = "/" + "/".join(fixed)
            rest = "/".join(parts[1 + len(fixed):])
            if not rest:
                return [self._rel(base)] if self._stat(base) is not None else []
            found: List[tuple] = []
            e = self._stat(base)
            if e is not None and e.kind == "dir":
                self._walk(base, ("**" in rest and recursive) or "/" in rest, found)
            rx = _glob_regex(rest, recursive)
            return sorted(self._rel(f[0]) for f in found if rx.fullmatch(f[2]))
        except (SbxError, OSError) as e:
            raise SandboxFileError(f"Failed to glob: {e}") from e

    def _rel(self, a: str) -> str:
        rel = self._beneath_work(a)
        return a if rel is None else rel

    # ---- transfer -------------------------------------------------------------------------

    def upload_file(self, local_path: str, sandbox_path: str,
                    create_directories: bool = True) -> FileOperationResult:
        src = Path(local_path)
        if not src.exists():
            return FileOperationResult(status=SandboxStatus.ERROR, file_path=sandbox_path,
                                       error=f"Source file does not exist: {local_path}")
        try:
            data = src.read_bytes()
            files, p = self._route(sandbox_path)
            parent = posixpath.dirname(p)
            if create_directories and parent and parent != ".":
                files.mkdir(parent, parents=True)
            files.write(p, data, src.stat().st_mode & 0o7777)
        except (SbxError, OSError) as e:
            return self._fail(sandbox_path, "upload file", e)
        return FileOperationResult(status=SandboxStatus.SUCCESS, file_path=sandbox_path,
                                   size=len(data))

    def download_file(self, sandbox_path: str, local_path: str,
                      create_directories: bool = True) -> FileOperationResult:
        try:
            files, p = self._route(sandbox_path)
            e = files.stat(p)
            if e is None:
                return FileOperationResult(status=SandboxStatus.ERROR, file_path=local_path,
                                           error=f"Source file does not exist: {sandbox_path}")
            data = files.read(p)
            dst = Path(local_path)
            if create_directories:
                dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(data)
            os.chmod(dst, e.mode & 0o7777)
        except (SbxError, OSError) as err:
            return self._fail(local_path, "download file", err)
        return FileOperationResult(status=SandboxStatus.SUCCESS, file_path=local_path,
                                   size=len(data))

    def upload_directory(self, local_path: str, sandbox_path: str) -> bool:
        """Replaces an existing destination, as NexAU's LocalSandbox does."""
        src = Path(local_path)
        try:
            if not src.exists():
                raise SandboxFileError(f"Source directory does not exist: {local_path}")
            if not src.is_dir():
                raise SandboxFileError(f"Source path is not a directory: {local_path}")
            dst = self._abs(sandbox_path)
            if self._stat(dst) is not None:
                files, p = self._route(dst)
                files.remove(p, recursive=True)
            for root, dirs, names in os.walk(src):
                rel = os.path.relpath(root, src)
                here = dst if rel == "." else posixpath.join(dst, *Path(rel).parts)
                files, p = self._route(here)
                files.mkdir(p, parents=True)
                for n in sorted(names):
                    f = Path(root) / n
                    files.write(posixpath.join(p, n), f.read_bytes(), f.stat().st_mode & 0o7777)
            return True
        except (SandboxFileError, SbxError, OSError) as e:
            raise SandboxFileError(f"Failed to upload directory: {e}") from e

    def download_directory(self, sandbox_path: str, local_path: str) -> bool:
        try:
            e = self._stat(sandbox_path)
            if e is None:
                raise SandboxFileError(f"Source directory does not exist: {sandbox_path}")
            if e.kind != "dir":
                raise SandboxFileError(f"Source path is not a directory: {sandbox_path}")
            found: List[tuple] = []
            self._walk(self._abs(sandbox_path), True, found)
            dst = Path(local_path)
            if dst.exists():
                shutil.rmtree(dst)
            dst.mkdir(parents=True)
            for full, ent, rel in found:
                target = dst / rel
                if ent.kind == "dir":
                    target.mkdir(parents=True, exist_ok=True)
                elif ent.kind == "file":
                    target.parent.mkdir(parents=True, exist_ok=True)
                    files, p = self._route(full)
                    target.write_bytes(files.read(p))
                    os.chmod(target, ent.mode & 0o7777)
            return True
        except (SandboxFileError, SbxError, OSError) as err:
            raise SandboxFileError(f"Failed to download directory: {err}") from err


_IFMT = {"file": stat_mod.S_IFREG, "dir": stat_mod.S_IFDIR, "symlink": stat_mod.S_IFLNK}
_MAGIC = re.compile(r"[*?\[]")


def _glob_regex(pattern: str, recursive: bool, hidden: bool = False):
    """Python glob's matching of a relative pattern against a relative path (pathlib's when
    `hidden`: wildcards match dot names)."""
    dot = "" if hidden else "(?=[^.])"
    seg_any = "[^/]*" if hidden else "[^/.][^/]*"
    out = []
    segs = pattern.split("/")
    for i, seg in enumerate(segs):
        last = i == len(segs) - 1
        if seg == "**" and recursive:
            out.append(f"(?:{seg_any}/)*" if not last else f"(?:{seg_any}(?:/{seg_any})*)?")
            continue
        if seg == "**":
            seg = "*"
        rx = fnmatch.translate(seg)
        rx = rx[4:-3] if rx.startswith("(?s:") else rx.rstrip("\\Z")
        rx = rx.replace(".*", "[^/]*")
        if not seg.startswith("."):
            rx = dot + rx
        out.append(rx + ("" if last else "/"))
    return re.compile("".join(out), re.S)


def _destroy(host: Host, sid: str, close_host: bool) -> None:
    try:
        host.destroy(sid)
    except SbxError:
        pass
    finally:
        if close_host:
            host.close()


@dataclass(kw_only=True)
class SbxSandboxManager(BaseSandboxManager):
    """NexAU's manager surface for SbxSandbox: start (lazily through start_sync /
    instance, also with no session context prepared, as when handed to
    `Agent(sandbox_manager=...)`), stop, pause, is_running, upload assets, state persisted
    through NexAU's session manager and reconnected by id on the next start."""

    sandbox_config: Optional[Dict[str, Any]] = None
    data_source: Optional[str] = None
    clean_output: bool = True
    host: Optional[Host] = field(default=None, repr=False, compare=False)
    _resume_id: Optional[str] = field(default=None, init=False, repr=False)

    def start(self, session_manager, user_id: str, session_id: str,
              sandbox_config=None) -> SbxSandbox:
        envs = dict(_cfg(sandbox_config, "envs") or {})
        kw: Dict[str, Any] = dict(work_dir=str(self.work_dir), envs=envs,
                                  sandbox_config=self.sandbox_config,
                                  data_source=self.data_source, host=self.host,
                                  clean_output=self.clean_output)
        for k in ("output_char_threshold", "truncate_head_chars", "truncate_tail_chars"):
            v = _cfg(sandbox_config, k)
            if v is not None:
                kw[k] = v
        state = self.load_sandbox_state(session_manager, user_id, session_id)
        if state and state.get("sandbox_id"):
            saved = extract_dataclass_init_kwargs(SbxSandbox, state)
            kw.update({k: v for k, v in saved.items() if v is not None})
        if self._resume_id:
            kw["sandbox_id"], self._resume_id = self._resume_id, None
        sb = SbxSandbox(**kw)
        sb.start()
        self._instance = sb
        self.persist_sandbox_state(session_manager, user_id, session_id, sb)
        return sb

    def start_sync(self):
        if not self._session_context and self._instance is None:
            self.prepare_session_context(None, "", "", None)
        return super().start_sync()

    def stop(self) -> bool:
        inst = self._instance
        if inst is None:
            return False
        inst.destroy()
        self._instance = None
        return True

    def pause(self) -> bool:
        inst = self._instance
        if inst is None:
            return False
        try:
            sid = inst.start()
            inst._host().pause(sid)
        except SbxError as e:
            logger.warning("pause: %s", e)
            return False
        self._resume_id = inst.detach()  # the next start() resumes it
        self._instance = None
        return True

    def is_running(self) -> bool:
        inst = self._instance
        if inst is None or inst._sbx_id is None:
            return False
        try:
            return inst._host().status(inst._sbx_id) == "running"
        except SbxError:
            return False


def _cfg(cfg, key):
    """A key of NexAU's sandbox config, a pydantic model or a plain mapping."""
    if cfg is None:
        return None
    if isinstance(cfg, dict):
        return cfg.get(key)
    return getattr(cfg, key, None)
