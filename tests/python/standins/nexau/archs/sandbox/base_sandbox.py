"""Stand-in for nexau.archs.sandbox.base_sandbox: NexAU's sandbox types, its abstract
BaseSandbox and BaseSandboxManager, and its output truncation, as its interface describes
them (field names, defaults, messages). Written for sbx's tests."""
import abc
import enum
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Dict, Generic, List, Optional, TypeVar, Union

DEFAULT_OUTPUT_CHAR_THRESHOLD = 10_000
TRUNCATE_HEAD_CHARS = 5_000
TRUNCATE_TAIL_CHARS = 5_000
HEREDOC_PATTERN = re.compile(r"<<-?\s*['\"]?\w+['\"]?")
CALLS: List[str] = []  # what the adapter asked of this module, for the tests


class SandboxStatus(enum.Enum):
    RUNNING = "running"
    STOPPED = "stopped"
    ERROR = "error"
    TIMEOUT = "timeout"
    SUCCESS = "success"


class CodeLanguage(enum.Enum):
    PYTHON = "python"


class SandboxError(Exception):
    pass


class SandboxTimeoutError(SandboxError):
    pass


class SandboxExecutionError(SandboxError):
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
class CodeExecutionResult:
    status: SandboxStatus
    language: CodeLanguage
    outputs: Optional[List[Dict[str, Any]]] = None
    error_type: Optional[str] = None
    error_value: Optional[str] = None
    traceback: Optional[List[str]] = None
    duration_ms: int = 0
    truncated: bool = False

    def __post_init__(self):
        self.outputs = [] if self.outputs is None else self.outputs


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


@dataclass
class FileOperationResult:
    status: SandboxStatus
    file_path: str
    content: Union[str, bytes, bytearray, None] = None
    size: int = 0
    error: Optional[str] = None
    truncated: bool = False


def _clean(text: str) -> str:
    """NexAU's cleaning: escapes out, carriage-return overwrites resolved, runs of 4+ lines
    equal but for digits collapsed."""
    text = re.sub(r"\x1b\[[0-?]*[ -/]*[@-~]", "", text)
    text = re.sub(r"\x1b\].*?(?:\x1b\\|\x07)", "", text)
    text = re.sub(r"\x1b[^\[\]]", "", text)
    lines = [ln.split("\r")[-1] for ln in text.replace("\r\n", "\n").split("\n")]
    if len(lines) < 4:
        return "\n".join(lines)
    out, i = [], 0
    while i < len(lines):
        j = i
        key = re.sub(r"\d+", "N", lines[i])
        while j + 1 < len(lines) and re.sub(r"\d+", "N", lines[j + 1]) == key:
            j += 1
        run = j - i + 1
        out += ([lines[i], f"... [{run - 2} similar lines collapsed]", lines[j]] if run >= 4
                else lines[i:j + 1])
        i = j + 1
    return "\n".join(out)


def smart_truncate_output(stdout, stderr, output_dir, threshold=DEFAULT_OUTPUT_CHAR_THRESHOLD,
                          head_chars=TRUNCATE_HEAD_CHARS, tail_chars=TRUNCATE_TAIL_CHARS):
    CALLS.append("smart_truncate_output")
    stdout, stderr = _clean(stdout), _clean(stderr)
    if len(stdout) + len(stderr) < threshold:
        return stdout, stderr, False, None, None

    def one(s, name):
        if len(s) <= head_chars + tail_chars:
            return s
        gone = len(s) - head_chars - tail_chars
        return (s[:head_chars] + f"\n\n... [{gone:,} characters omitted] ...\n(Full output: "
                f"{output_dir}/{name}.txt)\n\n" + s[-tail_chars:])
    return one(stdout, "stdout"), one(stderr, "stderr"), True, len(stdout), len(stderr)


def extract_dataclass_init_kwargs(cls, m, *, ignore_extra=True):
    if not is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass type")
    names = {f.name for f in fields(cls) if f.init}
    if not ignore_extra and set(m) - names:
        raise TypeError(f"Unexpected keys: {sorted(set(m) - names)}")
    return {k: v for k, v in m.items() if k in names}


@dataclass(kw_only=True)
class BaseSandbox(abc.ABC):
    sandbox_id: Optional[str] = None
    envs: Dict[str, str] = field(default_factory=dict)
    work_dir: Union[str, Path, None] = None
    output_char_threshold: int = DEFAULT_OUTPUT_CHAR_THRESHOLD
    truncate_head_chars: int = TRUNCATE_HEAD_CHARS
    truncate_tail_chars: int = TRUNCATE_TAIL_CHARS
    _background_tasks: Dict[int, Any] = field(default_factory=dict, repr=False, init=False)

    def __post_init__(self):
        if self.work_dir is not None and not isinstance(self.work_dir, Path):
            self.work_dir = Path(self.work_dir)

    def list_background_tasks(self):
        return self._background_tasks

    def dict(self):
        return {f.name: (str(getattr(self, f.name)) if isinstance(getattr(self, f.name), Path)
                         else getattr(self, f.name)) for f in fields(self) if f.init}

    for _name in ("get_temp_dir", "execute_bash", "get_background_task_status",
                  "kill_background_task", "execute_code", "read_file", "write_file",
                  "delete_file", "list_files", "file_exists", "get_file_info",
                  "create_directory", "edit_file", "glob", "upload_file", "download_file",
                  "upload_directory", "download_directory"):
        locals()[_name] = abc.abstractmethod(lambda self, *a, **k: None)
    del _name


T = TypeVar("T")


@dataclass(kw_only=True)
class BaseSandboxManager(abc.ABC, Generic[T]):
    work_dir: Union[str, Path] = field(default_factory=lambda: str(Path.cwd()))
    _session_context: Dict[str, Any] = field(default_factory=dict, init=False)
    _executor: Any = field(default_factory=lambda: ThreadPoolExecutor(2), init=False,
                           repr=False)
    _start_lock: Any = field(default_factory=threading.Lock, init=False, repr=False)
    _instance: Any = field(default=None, init=False, repr=False)

    def __post_init__(self):
        self.work_dir = Path(self.work_dir)

    @property
    def session_context(self):
        return self._session_context

    @property
    def instance(self):
        if not self.is_running():
            if not self._session_context:
                raise SandboxError("Sandbox is not running. Please run `start_no_wait` first.")
            self.start_sync()
        return self._instance

    @abc.abstractmethod
    def start(self, session_manager, user_id, session_id, sandbox_config):
        ...

    @abc.abstractmethod
    def stop(self):
        ...

    @abc.abstractmethod
    def pause(self):
        ...

    @abc.abstractmethod
    def is_running(self):
        ...

    def on_run_complete(self):
        pass

    def persist_sandbox_state(self, session_manager, user_id, session_id, sandbox):
        if session_manager is not None:
            state = dict(sandbox.dict(), sandbox_type=type(sandbox).__name__)
            session_manager.states[(user_id, session_id)] = state

    def load_sandbox_state(self, session_manager, user_id, session_id):
        if session_manager is None:
            return None
        return session_manager.states.get((user_id, session_id))

    def prepare_session_context(self, session_manager, user_id, session_id, sandbox_config,
                                upload_assets=None):
        self._session_context = {"session_manager": session_manager, "user_id": user_id,
                                 "session_id": session_id, "sandbox_config": sandbox_config,
                                 "upload_assets": list(upload_assets or [])}

    def start_sync(self):
        if self._instance is not None and self.is_running():
            return self._instance
        with self._start_lock:
            if self._instance is not None and self.is_running():
                return self._instance
            ctx = self._session_context
            if not ctx:
                return None
            sb = self.start(ctx["session_manager"], ctx["user_id"], ctx["session_id"],
                            ctx["sandbox_config"])
            for src, dst in ctx.get("upload_assets", []):
                sb.upload_directory(src, dst)
            self._instance = sb
            return sb

    def add_upload_assets(self, upload_assets):
        with self._start_lock:
            if self._instance is not None:
                for src, dst in upload_assets:
                    self._instance.upload_directory(src, dst)
            else:
                self._session_context.setdefault("upload_assets", []).extend(upload_assets)
