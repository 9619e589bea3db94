"""NexAU's sandbox types for when NexAU is not installed: the same names, fields, defaults and
manager behaviour (written from NexAU's documented interface), plus the two output helpers the
adapter needs in both cases: NexAU's cleaning (ANSI, carriage returns, repeated lines) and its
head/tail truncation judged on both streams together."""
import asyncio
import enum
import logging
import re
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Union

logger = logging.getLogger(__name__)

DEFAULT_OUTPUT_CHAR_THRESHOLD = 10_000
TRUNCATE_HEAD_CHARS = 5_000
TRUNCATE_TAIL_CHARS = 5_000
HEREDOC_RE = re.compile(r"<<-?\s*['\"]?\w+['\"]?")


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
        if self.outputs is None:
            self.outputs = []


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


@dataclass(kw_only=True)
class BaseSandbox:
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


def extract_dataclass_init_kwargs(cls, m: Mapping[str, Any], *, ignore_extra: bool = True):
    if not is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass type")
    names = {f.name for f in fields(cls) if f.init}
    extra = set(m) - names
    if extra and not ignore_extra:
        raise TypeError(f"Unexpected keys: {sorted(extra)}")
    return {k: v for k, v in m.items() if k in names}


def _run_sync(coro_fn):
    """Runs an async function to completion from sync code, also under a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro_fn())
    box: Dict[str, Any] = {}

    def runner():
        try:
            box["v"] = asyncio.run(coro_fn())
        except BaseException as e:  # handed to the caller below
            box["e"] = e
    t = threading.Thread(target=runner)
    t.start()
    t.join()
    if "e" in box:
        raise box["e"]
    return box.get("v")


@dataclass(kw_only=True)
class BaseSandboxManager:
    """NexAU's manager behaviour: lazy start from a stored session context, start_sync with
    double-checked locking, deferred asset uploads, pause in a thread, state persistence
    through the session manager. Subclasses give start/stop/pause/is_running."""

    work_dir: Union[str, Path] = field(default_factory=lambda: str(Path.cwd()))
    start_future: Optional[Future] = field(default=None, init=False)
    pause_future: Optional[Future] = field(default=None, init=False)
    _session_context: Dict[str, Any] = field(default_factory=dict, init=False)
    _executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=4), init=False, repr=False)
    _start_lock: Any = field(default_factory=threading.Lock, init=False, repr=False)
    _instance: Any = field(default=None, init=False, repr=False)

    def __post_init__(self):
        if not isinstance(self.work_dir, Path):
            self.work_dir = Path(self.work_dir)

    def __class_getitem__(cls, item):
        return cls

    @property
    def session_context(self) -> Dict[str, Any]:
        return self._session_context

    @property
    def instance(self):
        if self.start_future is not None:
            self.start_future.result()
        if not self.is_running():
            if self._session_context:
                self.start_no_wait(**self._session_context)
                if self.start_future is not None:
                    self.start_future.result()
            else:
                raise SandboxError("Sandbox is not running. Please run `start_no_wait` first.")
        return self._instance

    def on_run_complete(self) -> None:
        pass

    def persist_sandbox_state(self, session_manager, user_id: str, session_id: str, sandbox):
        if session_manager is None:
            return None

        async def persist():
            state = sandbox.dict()
            state["sandbox_type"] = sandbox.__class__.__name__
            await session_manager.update_session_sandbox(user_id=user_id, session_id=session_id,
                                                         sandbox_state=state)
        return _run_sync(persist)

    def load_sandbox_state(self, session_manager, user_id: str, session_id: str):
        if session_manager is None:
            return None

        async def load():
            s = await session_manager.get_session(user_id=user_id, session_id=session_id)
            return s.sandbox_state if s is not None and s.sandbox_state else None
        return _run_sync(load)

    def prepare_session_context(self, session_manager, user_id: str, session_id: str,
                                sandbox_config, upload_assets=None):
        self._session_context = {"session_manager": session_manager, "user_id": user_id,
                                 "session_id": session_id, "sandbox_config": sandbox_config,
                                 "upload_assets": list(upload_assets or [])}

    def start_no_wait(self, session_manager, user_id: str, session_id: str, sandbox_config,
                      upload_assets=None):
        self.prepare_session_context(session_manager, user_id, session_id, sandbox_config,
                                     upload_assets)

        def inner():
            sb = self.start(session_manager=session_manager, user_id=user_id,
                            session_id=session_id, sandbox_config=sandbox_config)
            for src, dst in upload_assets or []:
                sb.upload_directory(src, dst)
            self._instance = sb
        self.start_future = self._executor.submit(inner)
        return self.start_future

    def start_sync(self):
        inst = self._instance
        if inst is not None:
            if self.is_running():
                return inst
            self._instance = None
        with self._start_lock:
            if self._instance is not None:
                return self._instance
            ctx = self._session_context
            if not ctx:
                logger.warning("No session context available for sandbox start")
                return None
            sb = self.start(session_manager=ctx.get("session_manager"),
                            user_id=ctx.get("user_id", ""), session_id=ctx.get("session_id", ""),
                            sandbox_config=ctx.get("sandbox_config"))
            for src, dst in ctx.get("upload_assets", []):
                sb.upload_directory(src, dst)
            self._instance = sb
            return sb

    def add_upload_assets(self, upload_assets) -> None:
        if not upload_assets:
            return
        with self._start_lock:
            if self._instance is not None:
                for src, dst in upload_assets:
                    self._instance.upload_directory(src, dst)
            else:
                self._session_context.setdefault("upload_assets", []).extend(upload_assets)

    def pause_no_wait(self):
        self.pause_thread = threading.Thread(target=self.pause)
        self.pause_thread.start()
        return self.pause_thread


# ---- output -------------------------------------------------------------------------------

_CSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
_OSC = re.compile(r"\x1b\].*?(?:\x1b\\|\x07)")
_ESC_OTHER = re.compile(r"\x1b[^\[\]]")
_DIGITS = re.compile(r"\d+")


def clean_shell_output(text: str) -> str:
    """NexAU's cleaning: escape sequences removed, carriage-return overwrites resolved, runs of
    four or more lines equal but for their digits collapsed to first, marker, last."""
    if not text:
        return text
    for rx in (_CSI, _OSC, _ESC_OTHER):
        text = rx.sub("", text)
    lines = []
    for line in text.replace("\r\n", "\n").split("\n"):
        lines.append(line.rsplit("\r", 1)[-1] if "\r" in line else line)
    if len(lines) < 4:
        return "\n".join(lines)
    out: List[str] = []
    i = 0
    while i < len(lines):
        key = _DIGITS.sub("N", lines[i])
        j = i + 1
        while j < len(lines) and _DIGITS.sub("N", lines[j]) == key:
            j += 1
        if j - i >= 4:
            out += [lines[i], f"... [{j - i - 2} similar lines collapsed]", lines[j - 1]]
        else:
            out += lines[i:j]
        i = j
    return "\n".join(out)


def smart_truncate_output(stdout: str, stderr: str, output_dir: str,
                          threshold: int = DEFAULT_OUTPUT_CHAR_THRESHOLD,
                          head_chars: int = TRUNCATE_HEAD_CHARS,
                          tail_chars: int = TRUNCATE_TAIL_CHARS):
    """NexAU's rule: both streams cleaned first; under `threshold` characters for both
    together nothing more changes and the lengths are None; else each stream longer than
    head + tail keeps its head and tail around a marker naming its file."""
    stdout, stderr = clean_shell_output(stdout), clean_shell_output(stderr)
    if len(stdout) + len(stderr) < threshold:
        return stdout, stderr, False, None, None

    def cut(text: str, name: str) -> str:
        if len(text) <= head_chars + tail_chars:
            return text
        omitted = len(text) - head_chars - tail_chars
        return (f"{text[:head_chars]}\n\n... [{omitted:,} characters omitted] ...\n"
                f"(Full output: {output_dir}/{name}.txt)\n\n{text[len(text) - tail_chars:]}")
    return cut(stdout, "stdout"), cut(stderr, "stderr"), True, len(stdout), len(stderr)
