"""NexAU's sandbox layer over sbx: `SbxSandbox` and `SbxSandboxManager`.

With NexAU importable, `SbxSandbox` is a subclass of its `BaseSandbox` and returns its own
result types (`CommandResult`, `FileOperationResult`, `FileInfo`, `CodeExecutionResult`,
`SandboxStatus`) and raises its own exceptions; `SbxSandboxManager` is a `BaseSandboxManager`,
so NexAU's `Agent(sandbox_manager=...)` takes it. Without NexAU the same names come from
`sbx.adapters._nexau_types` (same fields), so this module still imports.

Drop-in for `LocalSandbox`: `SbxSandbox(sandbox_id=..., work_dir=...)` runs on sbx's `local`
backend with `work_dir` as every command's directory and the base of relative paths (the
backend's `share_dir`: the host folder itself, as LocalSandbox uses it). Another backend is
chosen with `sandbox_config={"type": "docker", ...}` (the sbx config block) or an existing
`host=`; there `work_dir` is a path inside the sandbox. Timeouts are in milliseconds.
"""
import codecs
import fnmatch
import logging
import os
import posixpath
import re
import shlex
import shutil
import stat as stat_mod
import sys
import threading
import time
import uuid
import weakref
from dataclasses import InitVar, dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from ..errors import BadId, PathError, SandboxNotFound, SbxError
from ..host import Host

logger = logging.getLogger(__name__)

try:  # NexAU's own types when NexAU is there
    from nexau.archs.sandbox.base_sandbox import (  # type: ignore
        BaseSandbox, BaseSandboxManager, CodeExecutionResult, CodeLanguage, CommandResult,
        FileInfo, FileOperationResult, SandboxError, SandboxExecutionError, SandboxFileError,
        SandboxStatus, SandboxTimeoutError, extract_dataclass_init_kwargs)
    UPSTREAM = True
except ImportError:
    from ._nexau_types import (  # noqa: F401
        BaseSandbox, BaseSandboxManager, CodeExecutionResult, CodeLanguage, CommandResult,
        FileInfo, FileOperationResult, SandboxError, SandboxExecutionError, SandboxFileError,
        SandboxStatus, SandboxTimeoutError, extract_dataclass_init_kwargs)
    UPSTREAM = False

try:
    from nexau.archs.sandbox.output_utils import clean_shell_output  # type: ignore
except ImportError:
    from ._nexau_types import clean_shell_output

from ._nexau_types import HEREDOC_RE, smart_truncate

DEFAULT_TIMEOUT_MS = 120_000  # NexAU's execute_shell default
_STATUS_OK = ("running", "paused", "creating")


def _fmt_time(t: float) -> str:
    return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")


def _perm(mode: int) -> str:
    return stat_mod.filemode(mode)[1:]


def _decode_text(data: bytes, encoding: str) -> str:
    """Decodes as a text-mode open() would: strict, universal newlines."""
    text = data.decode(encoding)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _detect_encoding(data: bytes) -> str:
    try:
        import chardet  # type: ignore
        got = chardet.detect(data)
        if got.get("encoding") and got.get("confidence", 0) > 0.7:
            return got["encoding"]
    except ImportError:
        pass
    except Exception as e:  # chardet failing says nothing about the file
        logger.warning("encoding detection failed: %s", e)
    return "utf-8"


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
        self._owns = self._owns_host = self._home_mode = self._local_python = False
        self._tmp: Optional[str] = None
        self._lock = threading.RLock()
        self._finalizer = None
        if self.host is None:
            block = dict(self.sandbox_config or {"type": "local"})
            block.setdefault("type", "local")
            if block["type"] == "local" and self.work_dir is not None:
                Path(self.work_dir).mkdir(parents=True, exist_ok=True)
                block.setdefault("share_dir", os.path.abspath(str(self.work_dir)))
                self.work_dir = Path(block["share_dir"])
                self._home_mode = True
                self._local_python = True  # the host's own files and programs
            block.setdefault("output_char_threshold", self.output_char_threshold)
            block.setdefault("truncate_head_chars", self.truncate_head_chars)
            block.setdefault("truncate_tail_chars", self.truncate_tail_chars)
            self.host = Host({"sandbox_config": block})
            self._owns_host = True

    # ---- lifecycle -------------------------------------------------------------------

    def _ensure(self) -> str:
        """The sbx id, attaching to `sandbox_id` if it is live, else creating one."""
        if self._sbx_id is not None:
            return self._sbx_id
        with self._lock:
            if self._sbx_id is not None:
                return self._sbx_id
            h = self.host
            sid = None
            if self.sandbox_id:
                try:
                    st = h.status(self.sandbox_id)
                    if st == "paused":
                        h.resume(self.sandbox_id)
                    if st in _STATUS_OK:
                        sid = self.sandbox_id
                except (BadId, SandboxNotFound):
                    pass  # a name, not a live sandbox (LocalSandbox ids are labels)
            if sid is None:
                sid = h.create(self.data_source, env=dict(self.envs or {}))
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
        return self._ensure()

    def close(self) -> None:
        """Destroys the sandbox if this object made it; frees a host it made."""
        with self._lock:
            fin, self._finalizer = self._finalizer, None
            if fin is not None:
                fin()
            elif self._owns_host and self.host is not None:
                self.host.close()
            self._sbx_id = None

    def stop(self) -> bool:
        self.close()
        return True

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
            sid = self._sbx_id or self.sandbox_id
            self.detach()
            if sid:
                try:
                    self.host.destroy(sid)
                except (SandboxNotFound, BadId):
                    pass
            self._sbx_id = None
            if self._owns_host:
                self.host.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- paths and helpers -------------------------------------------------------------

    def get_temp_dir(self) -> str:
        """A temp folder the sandbox's file ops reach: /tmp where the backend allows it,
        else `.tmp` beneath the work dir (the local backend confines files there)."""
        if self._tmp is None:
            sid = self._ensure()
            try:
                self.host.stat(sid, "/tmp")
                self._tmp = "/tmp"
            except SbxError:
                self._tmp = self.join_path(str(self.work_dir), ".nexau_tmp")
        return self._tmp

    def join_path(self, base_path, *parts) -> str:
        p = PurePath_join(str(base_path), *[str(x) for x in parts])
        return p

    def get_bash_tool_results_base_path(self) -> str:
        return self.join_path(self.get_temp_dir(), "nexau_bash_tool_results")

    def get_tool_output_dir(self) -> str:
        return self.join_path(self.get_temp_dir(), "nexau_tool_outputs")

    def to_shell_path(self, path) -> str:
        return str(path)

    def get_python_command(self) -> str:
        """python3; on the local backend in LocalSandbox's mode this Python, as NexAU's
        LocalSandbox does."""
        return shlex.quote(sys.executable) if self._local_python and sys.executable else "python3"

    def _merge_envs(self, per_call: Optional[Dict[str, str]] = None) -> Optional[Dict[str, str]]:
        if not self.envs and not per_call:
            return None
        merged = dict(self.envs or {})
        merged.update(per_call or {})
        return merged or None

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

    def _abs(self, path: Union[str, Path]) -> str:
        p = str(path)
        if posixpath.isabs(p):
            return posixpath.normpath(p)
        base = str(self.work_dir) if self.work_dir is not None else "."
        return posixpath.normpath(posixpath.join(base, p))

    def _sb(self, path: Union[str, Path]) -> str:
        """The path as sbx gets it: beneath work_dir and work_dir the backend's own home, it
        goes relative (the local backend confines file ops to the sandbox's home)."""
        self._ensure()
        a = self._abs(path)
        if self._home_mode:
            w = posixpath.normpath(str(self.work_dir))
            if a == w:
                return "."
            if a.startswith(w.rstrip("/") + "/"):
                return a[len(w.rstrip("/")) + 1:]
        return a

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

    def _full(self, shown: str, truncated: bool, file: Optional[str]) -> str:
        if not truncated or not file:
            return shown
        try:
            return Path(file).read_bytes().decode("utf-8", "replace")
        except OSError:
            return shown

    def _shape_output(self, r) -> tuple:
        """(stdout, stderr, truncated, orig_out, orig_err) the way NexAU reports them."""
        if self.clean_output:
            out = self._full(r.stdout, r.truncated, r.stdout_file)
            err = self._full(r.stderr, r.truncated, r.stderr_file)
            return smart_truncate(clean_shell_output(out), clean_shell_output(err),
                                  r.output_dir or "", self.output_char_threshold,
                                  self.truncate_head_chars, self.truncate_tail_chars)
        if r.truncated:
            return (r.stdout, r.stderr, True, r.original_stdout_length,
                    r.original_stderr_length)
        return r.stdout, r.stderr, False, None, None

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
        try:
            sid = self._ensure()
            command = self.prepare_shell_command(command)
            where = self._sb(cwd) if cwd else self._sb(".")
            where = None if where == "." else where
            if background:
                return self._bg_start(sid, command, where, user, envs, t0)
            r = self.host.exec(sid, command, cwd=where, env=self._merge_envs(envs), user=user,
                               timeout=timeout / 1000.0 if timeout > 0 else 0)
        except (SbxError, SandboxError, OSError) as e:
            return CommandResult(status=SandboxStatus.ERROR, stdout="", stderr="", exit_code=-1,
                                 duration_ms=int((time.monotonic() - t0) * 1000),
                                 error=f"Execution failed: {e}", truncated=False)
        out, err, cut, o_out, o_err = self._shape_output(r)
        if r.timed_out:
            status, code = SandboxStatus.TIMEOUT, (-r.signal if r.signal else -1)
            error = f"Command timed out after {timeout}ms"
        elif r.exit_code == 0:
            status, code, error = SandboxStatus.SUCCESS, 0, None
        else:
            status, code = SandboxStatus.ERROR, r.exit_code
            error = f"Command failed with exit code {r.exit_code}"
        return CommandResult(status=status, stdout=out, stderr=err, exit_code=code,
                             duration_ms=int(r.duration * 1000), error=error, truncated=cut,
                             original_stdout_length=o_out, original_stderr_length=o_err,
                             output_dir=r.output_dir, stdout_file=r.stdout_file,
                             stderr_file=r.stderr_file)

    # ---- background tasks ----------------------------------------------------------------

    def _bg_start(self, sid, command, where, user, envs, t0) -> CommandResult:
        from ._bg import start_task
        task = start_task(self, sid, command, where, user, self._merge_envs(envs))
        self._background_tasks[task.pid] = task
        return CommandResult(
            status=SandboxStatus.SUCCESS,
            stdout=f"Background task started (pid: {task.pid})\n"
                   f"Output will be saved to {task.output_dir}/",
            stderr="", exit_code=0, duration_ms=int((time.monotonic() - t0) * 1000),
            background_pid=task.pid, output_dir=task.output_dir,
            stdout_file=f"{task.output_dir}/stdout.txt",
            stderr_file=f"{task.output_dir}/stderr.txt")

    @staticmethod
    def _not_found(pid: int) -> CommandResult:
        msg = f"Background task not found: pid={pid}"
        return CommandResult(status=SandboxStatus.ERROR, stderr=msg, exit_code=-1, error=msg)

    def get_background_task_status(self, pid: int) -> CommandResult:
        task = self._background_tasks.get(pid)
        if task is None:
            return self._not_found(pid)
        done, code, error = task.poll()
        out, err = task.output()
        if self.clean_output:
            out, err = clean_shell_output(out), clean_shell_output(err)
        out, err, cut, o_out, o_err = smart_truncate(
            out, err, task.output_dir, self.output_char_threshold, self.truncate_head_chars,
            self.truncate_tail_chars)
        files = dict(output_dir=task.output_dir, stdout_file=f"{task.output_dir}/stdout.txt",
                     stderr_file=f"{task.output_dir}/stderr.txt")
        ms = int((time.monotonic() - task.t0) * 1000)
        if done:
            return CommandResult(status=SandboxStatus.SUCCESS if code == 0 else SandboxStatus.ERROR,
                                 stdout=out, stderr=err, exit_code=code, duration_ms=ms,
                                 error=error, truncated=cut, original_stdout_length=o_out,
                                 original_stderr_length=o_err, background_pid=pid, **files)
        return CommandResult(status=SandboxStatus.RUNNING, stdout=out, stderr=err, exit_code=-1,
                             duration_ms=ms, truncated=cut, original_stdout_length=o_out,
                             original_stderr_length=o_err, background_pid=pid, **files)

    def kill_background_task(self, pid: int) -> CommandResult:
        task = self._background_tasks.get(pid)
        if task is None:
            return self._not_found(pid)
        try:
            task.kill()
        except (SbxError, OSError) as e:
            return CommandResult(status=SandboxStatus.ERROR, stderr=str(e), exit_code=-1,
                                 error=f"Failed to kill background task: {str(e)[:200]}",
                                 background_pid=pid)
        self._background_tasks.pop(pid, None)
        return CommandResult(status=SandboxStatus.SUCCESS,
                             stdout=f"Background task (pid={pid}) killed successfully",
                             exit_code=0, duration_ms=int((time.monotonic() - task.t0) * 1000),
                             background_pid=pid)

    def list_background_tasks(self) -> Dict[int, Any]:
        return self._background_tasks

    # ---- code ------------------------------------------------------------------------------

    def execute_code(self, code: str, language, timeout: Optional[int] = None,
                     user: Optional[str] = None,
                     envs: Optional[Dict[str, str]] = None) -> CodeExecutionResult:
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
        w = self.write_file(name, code)
        if w.status != SandboxStatus.SUCCESS:
            return CodeExecutionResult(status=SandboxStatus.ERROR, language=language,
                                       error_type="SandboxFileError", error_value=w.error)
        try:
            r = self.execute_shell(f"{self.get_python_command()} {shlex.quote(name)}", timeout,
                                   user=user, envs=envs)
        finally:
            self.delete_file(name)
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

    def _stat(self, path: str):
        """FileEntry, or None when the path does not exist."""
        try:
            return self.host.stat(self._ensure(), self._sb(path))
        except PathError as e:
            if e.name == "SBX_E_NO_FILE":
                return None
            raise

    def _fail(self, path, what, e) -> FileOperationResult:
        return FileOperationResult(status=SandboxStatus.ERROR, file_path=path,
                                   error=f"Failed to {what}: {e}")

    def read_file(self, file_path: str, encoding: str = "utf-8",
                  binary: bool = False) -> FileOperationResult:
        try:
            if self._stat(file_path) is None:
                return FileOperationResult(status=SandboxStatus.ERROR, file_path=file_path,
                                           error=f"File does not exist: {file_path}")
            data = self.host.read_file(self._ensure(), self._sb(file_path))
            content = data if binary else _decode_text(data, encoding)
        except (SbxError, UnicodeDecodeError, LookupError) as e:
            return self._fail(file_path, "read file", e)
        return FileOperationResult(status=SandboxStatus.SUCCESS, file_path=file_path,
                                   content=content, size=len(data))

    def write_file(self, file_path: str, content, encoding: str = "utf-8", binary: bool = False,
                   create_directories: bool = True,
                   user: Optional[str] = None) -> FileOperationResult:
        try:
            if isinstance(content, str):
                raw = content.encode(encoding)
            else:
                raw = bytes(content)
                if not binary:
                    raw.decode(encoding)  # text mode writes only what decodes
            sid = self._ensure()
            target = self._sb(file_path)
            parent = posixpath.dirname(target)
            if parent and parent != ".":
                if create_directories:
                    self.host.mkdir(sid, parent, parents=True)
                elif self._stat(parent) is None:
                    raise FileNotFoundError(f"[Errno 2] No such file or directory: "
                                            f"'{self._abs(file_path)}'")
            self.host.write_file(sid, target, raw)
        except (SbxError, OSError, UnicodeError, LookupError) as e:
            return self._fail(file_path, "write file", e)
        return FileOperationResult(status=SandboxStatus.SUCCESS, file_path=file_path,
                                   size=len(raw))

    def delete_file(self, file_path: str) -> FileOperationResult:
        try:
            if self._stat(file_path) is None:
                return FileOperationResult(status=SandboxStatus.ERROR, file_path=file_path,
                                           error=f"File does not exist: {file_path}")
            self.host.remove(self._ensure(), self._sb(file_path), recursive=True)
        except SbxError as e:
            return self._fail(file_path, "delete file", e)
        return FileOperationResult(status=SandboxStatus.SUCCESS, file_path=file_path)

    def file_exists(self, file_path: str) -> bool:
        try:
            return self._stat(file_path) is not None
        except SbxError:
            return False

    def _info(self, shown: str, e, encoding=None, with_mode=True) -> FileInfo:
        return FileInfo(path=shown, exists=True, is_file=e.kind == "file",
                        is_directory=e.kind == "dir",
                        size=e.size if (with_mode or e.kind == "file") else 0,
                        mode=e.mode if with_mode else None,
                        permissions=_perm(e.mode) if with_mode else None,
                        modified_time=_fmt_time(e.mtime), readable=bool(e.mode & 0o444),
                        writable=bool(e.mode & 0o222), encoding=encoding)

    def get_file_info(self, file_path: str) -> FileInfo:
        try:
            e = self._stat(file_path)
            if e is None:
                return FileInfo(path=file_path, exists=False)
            enc = None
            if e.kind == "file":
                enc = _detect_encoding(self.host.read_file(self._ensure(), self._sb(file_path)))
            return self._info(file_path, e, enc)
        except SbxError as err:
            raise SandboxFileError(f"Failed to get file info: {err}") from err

    def _walk(self, abs_dir: str, recursive: bool, out: List[tuple]) -> None:
        """(absolute path, entry, path relative to abs_dir) beneath abs_dir, sorted."""
        stack = [("", abs_dir)]
        while stack:
            rel, d = stack.pop(0)
            for e in sorted(self.host.list_dir(self._ensure(), self._sb(d)), key=lambda x: x.name):
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
            deep = recursive or (pattern is not None and "**" in pattern)
            self._walk(base, deep, found)
            if pattern:
                rx = _glob_regex(f"**/{pattern}" if recursive else pattern, True)
                found = [f for f in found if rx.fullmatch(f[2])]
            return [self._info(full, ent, with_mode=False) for full, ent, _ in found]
        except SandboxFileError as err:
            raise SandboxFileError(f"Failed to list files: {err}") from err
        except SbxError as err:
            raise SandboxFileError(f"Failed to list files: {err}") from err

    def create_directory(self, directory_path: str, parents: bool = True,
                         user: Optional[str] = None) -> bool:
        try:
            self.host.mkdir(self._ensure(), self._sb(directory_path), parents=parents)
        except SbxError as e:
            if self._stat(directory_path) is not None:
                return True
            raise SandboxFileError(f"Failed to create directory: {e}") from e
        return True

    def edit_file(self, file_path: str, old_string: str, new_string: str) -> FileOperationResult:
        """NexAU's three modes; the match must be unique. Only the matched bytes change:
        the rest of the file is written back exactly as it was read."""
        try:
            exists = self._stat(file_path) is not None
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
            encoding, text = "utf-8", ""
            if exists:
                raw = self.host.read_file(self._ensure(), self._sb(file_path))
                encoding = _detect_encoding(raw)
                text = raw.decode(encoding)
            if op != "CREATE":
                if old_string not in text:
                    def unescape(s):
                        return s.replace("\\n", "\n").replace("\\t", "\t").replace("\\r", "\r")
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
                text = text.replace(old_string, new_string, 1)
            else:
                text = new_string
            data = text.encode(encoding)
            sid = self._ensure()
            parent = posixpath.dirname(self._sb(file_path))
            if parent and parent != ".":
                self.host.mkdir(sid, parent, parents=True)
            self.host.write_file(sid, self._sb(file_path), data)
        except (SbxError, UnicodeError, LookupError) as e:
            return self._fail(file_path, "edit file", e)
        return FileOperationResult(status=SandboxStatus.SUCCESS, file_path=file_path,
                                   size=len(data))

    def glob(self, pattern: str, recursive: bool = True,
             user: Optional[str] = None) -> List[str]:
        """Python's glob semantics: `*` stays in one folder, `**` spans folders only with
        recursive; hidden names need an explicit dot; paths relative to work_dir."""
        try:
            if self.work_dir is None:
                self._ensure()
            absolute = posixpath.isabs(pattern)
            full = posixpath.normpath(pattern if absolute else
                                      posixpath.join(str(self.work_dir), pattern))
            parts = full.split("/")
            fixed = []
            for p in parts[1:]:
                if _MAGIC.search(p):
                    break
                fixed.append(p)
            base = "/" + "/".join(fixed)
            rest = "/".join(parts[1 + len(fixed):])
            if not rest:
                return [self._rel(base)] if self._stat(base) is not None else []
            found: List[tuple] = []
            if self._stat(base) is not None:
                self._walk(base, "**" in rest and recursive or "/" in rest, found)
            rx = _glob_regex(rest, recursive)
            res = [self._rel(f[0]) for f in found if rx.fullmatch(f[2])]
            return sorted(res)
        except SbxError as e:
            raise SandboxFileError(f"Failed to glob: {e}") from e

    def _rel(self, a: str) -> str:
        w = posixpath.normpath(str(self.work_dir))
        if a == w:
            return "."
        if a.startswith(w.rstrip("/") + "/"):
            return a[len(w.rstrip("/")) + 1:]
        return a

    # ---- transfer -------------------------------------------------------------------------

    def upload_file(self, local_path: str, sandbox_path: str,
                    create_directories: bool = True) -> FileOperationResult:
        src = Path(local_path)
        if not src.exists():
            return FileOperationResult(status=SandboxStatus.ERROR, file_path=sandbox_path,
                                       error=f"Source file does not exist: {local_path}")
        try:
            data = src.read_bytes()
        except OSError as e:
            return self._fail(sandbox_path, "upload file", e)
        w = self.write_file(sandbox_path, data, binary=True,
                            create_directories=create_directories)
        if w.status != SandboxStatus.SUCCESS:
            w.error = (w.error or "").replace("Failed to write file", "Failed to upload file")
        return w

    def download_file(self, sandbox_path: str, local_path: str,
                      create_directories: bool = True) -> FileOperationResult:
        try:
            if self._stat(sandbox_path) is None:
                return FileOperationResult(status=SandboxStatus.ERROR, file_path=local_path,
                                           error=f"Source file does not exist: {sandbox_path}")
            data = self.host.read_file(self._ensure(), self._sb(sandbox_path))
            dst = Path(local_path)
            if create_directories:
                dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(data)
        except (SbxError, OSError) as e:
            return self._fail(local_path, "download file", e)
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
            sid = self._ensure()
            dst = self._abs(sandbox_path)
            if self._stat(dst) is not None:
                self.host.remove(sid, self._sb(dst), recursive=True)
            self.host.mkdir(sid, self._sb(dst), parents=True)
            for root, dirs, files in os.walk(src):
                rel = os.path.relpath(root, src)
                here = dst if rel == "." else posixpath.join(dst, *Path(rel).parts)
                for d in sorted(dirs):
                    self.host.mkdir(sid, self._sb(posixpath.join(here, d)), parents=True)
                for f in sorted(files):
                    p = Path(root) / f
                    mode = p.stat().st_mode & 0o7777
                    self.host.write_file(sid, self._sb(posixpath.join(here, f)), p.read_bytes(),
                                         mode)
            return True
        except SandboxFileError as e:
            raise SandboxFileError(f"Failed to upload directory: {e}") from e
        except (SbxError, OSError) as e:
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
                    target.write_bytes(self.host.read_file(self._ensure(), self._sb(full)))
                    os.chmod(target, ent.mode & 0o7777)
            return True
        except SandboxFileError as err:
            raise SandboxFileError(f"Failed to download directory: {err}") from err
        except (SbxError, OSError) as err:
            raise SandboxFileError(f"Failed to download directory: {err}") from err


def PurePath_join(base: str, *parts: str) -> str:
    if not parts:
        return base
    if re.match(r"^[A-Za-z]:[\\/]", base) or "\\" in base:
        from pathlib import PureWindowsPath
        p = PureWindowsPath(base)
        for x in parts:
            p = p / x
        return str(p)
    from pathlib import PurePosixPath
    q = PurePosixPath(base)
    for x in parts:
        q = q / x
    return str(q)


_MAGIC = re.compile(r"[*?\[]")


def _glob_regex(pattern: str, recursive: bool):
    """Python glob's matching of a relative pattern against a relative path."""
    out = []
    segs = pattern.split("/")
    for i, seg in enumerate(segs):
        last = i == len(segs) - 1
        if seg == "**" and recursive:
            out.append("(?:[^/.][^/]*/)*" if not last else "(?:[^/.][^/]*(?:/[^/.][^/]*)*)?")
            continue
        if seg == "**":
            seg = "*"
        rx = fnmatch.translate(seg)
        rx = rx[4:-3] if rx.startswith("(?s:") else rx.rstrip("\\Z")
        rx = rx.replace(".*", "[^/]*")
        if not seg.startswith("."):
            rx = "(?=[^.])" + rx
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
    """NexAU's manager surface for SbxSandbox: start (lazy via start_sync / instance),
    stop, pause, is_running, upload assets, state persisted through NexAU's session manager
    and reconnected by id on the next start."""

    sandbox_config: Optional[Dict[str, Any]] = None
    data_source: Optional[str] = None
    host: Optional[Host] = field(default=None, repr=False, compare=False)
    _resume_id: Optional[str] = field(default=None, init=False, repr=False)

    def start(self, session_manager, user_id: str, session_id: str,
              sandbox_config=None) -> SbxSandbox:
        envs = dict(getattr(sandbox_config, "envs", None) or {})
        kw: Dict[str, Any] = dict(work_dir=str(self.work_dir), envs=envs,
                                  sandbox_config=self.sandbox_config,
                                  data_source=self.data_source, host=self.host)
        for k in ("output_char_threshold", "truncate_head_chars", "truncate_tail_chars"):
            v = getattr(sandbox_config, k, None)
            if v is not None:
                kw[k] = v
        state = self.load_sandbox_state(session_manager, user_id, session_id)
        if state and state.get("sandbox_id"):
            saved = extract_dataclass_init_kwargs(SbxSandbox, state)
            saved.pop("host", None)
            kw.update({k: v for k, v in saved.items() if v is not None})
        if self._resume_id:
            kw["sandbox_id"], self._resume_id = self._resume_id, None
        sb = SbxSandbox(**kw)
        sb.start()
        self._instance = sb
        self.persist_sandbox_state(session_manager, user_id, session_id, sb)
        return sb

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
            inst.host.pause(sid)
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
            return inst.host.status(inst._sbx_id) == "running"
        except SbxError:
            return False
