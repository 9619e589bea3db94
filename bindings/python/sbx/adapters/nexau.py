"""NexAU's sandbox interface over sbx: execute_bash and the file methods, returning NexAU's
result types with the same field names. Timeouts are in milliseconds, as in NexAU."""
import enum
import fnmatch
import posixpath
import stat as stat_mod
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Union

from ..errors import PathError, SbxError
from ..host import Host


class SandboxStatus(enum.Enum):
    RUNNING = "running"
    STOPPED = "stopped"
    ERROR = "error"
    TIMEOUT = "timeout"
    SUCCESS = "success"


class SandboxError(Exception):
    pass


class SandboxFileError(SandboxError):
    pass


@dataclass
class CommandResult:
    status: SandboxStatus
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    duration_ms: int = 0
    error: Optional[str] = None
    truncated: bool = False
    original_stdout_length: Optional[int] = None
    original_stderr_length: Optional[int] = None
    background_pid: Optional[int] = None
    output_dir: Optional[str] = None
    stdout_file: Optional[str] = None
    stderr_file: Optional[str] = None


@dataclass
class FileOperationResult:
    status: SandboxStatus
    file_path: str
    content: Union[str, bytes, None] = None
    size: int = 0
    error: Optional[str] = None
    truncated: bool = False


@dataclass
class FileInfo:
    path: str
    exists: bool = False
    is_file: bool = False
    is_directory: bool = False
    size: int = 0
    mode: Optional[int] = None
    permissions: Optional[str] = None
    modified_time: Optional[str] = None
    symlink_target: Optional[str] = None
    readable: bool = True
    writable: bool = True
    encoding: Optional[str] = None


class SbxSandbox:
    """A NexAU-style sandbox. The sandbox is created on first use (thread-safe)."""

    def __init__(self, sandbox_config: Optional[Dict[str, Any]] = None, *,
                 host: Optional[Host] = None, envs: Optional[Dict[str, str]] = None,
                 sandbox_id: Optional[str] = None):
        cfg = dict(sandbox_config or {"type": "local"})
        self._host = host or Host({"sandbox_config": cfg})
        self.envs = dict(envs or {})
        self.sandbox_id = sandbox_id
        self._lock = threading.Lock()

    def start(self) -> str:
        with self._lock:
            if self.sandbox_id is None:
                self.sandbox_id = self._host.create(env=self.envs)
            return self.sandbox_id

    def stop(self) -> bool:
        with self._lock:
            if self.sandbox_id is not None:
                self._host.destroy(self.sandbox_id)
                self.sandbox_id = None
        return True

    def execute_bash(self, command: str, timeout: Optional[int] = None, cwd: Optional[str] = None,
                     user: Optional[str] = None, envs: Optional[Dict[str, str]] = None,
                     background: bool = False) -> CommandResult:
        sid = self.start()
        if background:
            return CommandResult(SandboxStatus.ERROR, exit_code=-1,
                                 error="background execution is not supported by this adapter")
        t0 = time.monotonic()
        try:
            r = self._host.exec(sid, command, cwd=cwd, env=envs, user=user,
                                timeout=None if timeout is None else timeout / 1000.0)
        except SbxError as e:
            return CommandResult(SandboxStatus.ERROR, exit_code=-1,
                                 duration_ms=int((time.monotonic() - t0) * 1000),
                                 error=f"Execution failed: {e}")
        if r.timed_out:
            status = SandboxStatus.TIMEOUT
        else:
            status = SandboxStatus.SUCCESS if r.exit_code == 0 else SandboxStatus.ERROR
        return CommandResult(status, stdout=r.stdout, stderr=r.stderr,
                             exit_code=r.exit_code if not r.timed_out else -1,
                             duration_ms=int(r.duration * 1000),
                             error="Command timed out" if r.timed_out else None,
                             truncated=r.truncated,
                             original_stdout_length=r.original_stdout_length,
                             original_stderr_length=r.original_stderr_length,
                             output_dir=r.output_dir, stdout_file=r.stdout_file,
                             stderr_file=r.stderr_file)

    execute_shell = execute_bash

    def read_file(self, file_path: str, encoding: str = "utf-8",
                  binary: bool = False) -> FileOperationResult:
        try:
            data = self._host.read_file(self.start(), file_path)
        except PathError:
            return FileOperationResult(SandboxStatus.ERROR, file_path,
                                       error=f"File does not exist: {file_path}")
        except SbxError as e:
            return FileOperationResult(SandboxStatus.ERROR, file_path, error=str(e))
        content = data if binary else data.decode(encoding, "replace")
        return FileOperationResult(SandboxStatus.SUCCESS, file_path, content, len(data))

    def write_file(self, file_path: str, content: Union[str, bytes], encoding: str = "utf-8",
                   binary: bool = False, create_directories: bool = True,
                   user: Optional[str] = None) -> FileOperationResult:
        raw = content if isinstance(content, bytes) else content.encode(encoding)
        try:
            sid = self.start()
            parent = posixpath.dirname(file_path)
            if create_directories and parent:
                self._host.mkdir(sid, parent, parents=True)
            self._host.write_file(sid, file_path, raw)
        except SbxError as e:
            return FileOperationResult(SandboxStatus.ERROR, file_path, error=str(e))
        return FileOperationResult(SandboxStatus.SUCCESS, file_path, size=len(raw))

    def delete_file(self, file_path: str) -> FileOperationResult:
        try:
            self._host.remove(self.start(), file_path, recursive=True)
        except SbxError as e:
            return FileOperationResult(SandboxStatus.ERROR, file_path, error=str(e))
        return FileOperationResult(SandboxStatus.SUCCESS, file_path)

    def file_exists(self, path: str) -> bool:
        try:
            self._host.stat(self.start(), path)
            return True
        except SbxError:
            return False

    def get_file_info(self, path: str) -> FileInfo:
        try:
            e = self._host.stat(self.start(), path)
        except PathError:
            return FileInfo(path=path, exists=False)
        except SbxError as err:
            raise SandboxFileError(str(err)) from err
        return FileInfo(path=path, exists=True, is_file=e.kind == "file",
                        is_directory=e.kind == "dir", size=e.size, mode=e.mode,
                        permissions=stat_mod.filemode(e.mode)[1:],
                        modified_time=time.strftime("%Y-%m-%d %H:%M:%S",
                                                    time.localtime(e.mtime)))

    def list_files(self, directory_path: str, recursive: bool = False,
                   pattern: Optional[str] = None) -> List[FileInfo]:
        out: List[FileInfo] = []
        try:
            self._walk(directory_path, recursive, pattern, out)
        except SbxError as e:
            raise SandboxFileError(str(e)) from e
        return out

    def _walk(self, path: str, recursive: bool, pattern: Optional[str],
              out: List[FileInfo]) -> None:
        for e in sorted(self._host.list_dir(self.start(), path), key=lambda x: x.name):
            full = posixpath.join(path, e.name)
            if pattern is None or fnmatch.fnmatch(e.name, pattern):
                out.append(FileInfo(path=full, exists=True, is_file=e.kind == "file",
                                    is_directory=e.kind == "dir", size=e.size, mode=e.mode,
                                    permissions=stat_mod.filemode(e.mode)[1:]))
            if recursive and e.kind == "dir":
                self._walk(full, recursive, pattern, out)

    def create_directory(self, path: str, parents: bool = True, user: Optional[str] = None) -> bool:
        try:
            self._host.mkdir(self.start(), path, parents=parents)
        except SbxError as e:
            raise SandboxFileError(str(e)) from e
        return True

    def glob(self, pattern: str, recursive: bool = True, user: Optional[str] = None) -> List[str]:
        """Paths relative to the work dir matching pattern (`**` spans directories)."""
        found: List[FileInfo] = []
        try:
            self._walk(".", True, None, found)
        except SbxError as e:
            raise SandboxFileError(str(e)) from e
        names = [f.path[2:] if f.path.startswith("./") else f.path for f in found]
        regex = fnmatch.translate(pattern.replace("**/", "\x00").replace("**", "*"))
        regex = regex.replace("\x00", "(?:.*/)?")
        import re
        rx = re.compile(regex)
        return sorted(n for n in names if rx.match(n))

    def edit_file(self, file_path: str, old_string: str, new_string: str) -> FileOperationResult:
        """NexAU's three modes: create (old empty), remove (new empty), update; old_string
        must match exactly once."""
        exists = self.file_exists(file_path)
        if old_string == "" and new_string != "":
            if exists:
                return FileOperationResult(SandboxStatus.ERROR, file_path,
                                           error=f"File already exists: {file_path}")
            return self.write_file(file_path, new_string)
        if not exists:
            return FileOperationResult(SandboxStatus.ERROR, file_path,
                                       error=f"File does not exist: {file_path}")
        current = self.read_file(file_path)
        if current.status is not SandboxStatus.SUCCESS:
            return current
        text = current.content
        count = text.count(old_string)
        if count == 0:
            unescaped = old_string.replace("\\n", "\n").replace("\\t", "\t").replace("\\r", "\r")
            if unescaped != old_string and text.count(unescaped) == 1:
                old_string, count = unescaped, 1
        if count != 1:
            return FileOperationResult(SandboxStatus.ERROR, file_path,
                                       error=f"old_string must match exactly once; found {count} matches")
        return self.write_file(file_path, text.replace(old_string, new_string, 1))
