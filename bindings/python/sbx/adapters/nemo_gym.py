"""A NeMo Gym sandbox provider backed by sbx (async; timeouts in seconds).

With NeMo Gym importable the provider takes and returns its own types (`SandboxHandle`,
`SandboxExecResult`, `SandboxStatus`) and raises its `SandboxCreateError`; without it the same
names come from this module (same fields), so it still imports. NeMo finds the provider by
the `nemo_gym.sandbox_providers` entry point `sbx` this package ships, so a harness swaps
`{"docker": {...}}` for `{"sbx": {...}}` and nothing else:

    AsyncSandbox({"sbx": {"sandbox": {"type": "docker", "image": "python:3.12"}}}, spec)

Keys: `config` (an sbx config file or mapping), `sandbox` (one inline sbx sandbox block,
shorthand for `{"data_source": {"sandbox": ...}}`), `data_source` (which data source of the
config), `default_timeout_s` (180, NeMo's), `max_workers` (threads for calls in flight).
Unknown keys are a TypeError, as for NeMo's own providers.

As NeMo's contract asks, a command that fails is a result, and so is every failure around it
(a missing cwd, a gone sandbox, a backend error): return code 125 with `error_type`
"sandbox", or "timeout" when the timeout ended it (partial output kept). Output comes back
whole, never cut for display.
"""
import asyncio
import enum
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

from ..errors import BadId, SandboxNotFound, SbxError
from ..host import AsyncHost

logger = logging.getLogger(__name__)

try:  # NeMo Gym's own types when it is there
    from nemo_gym.sandbox.providers.base import (  # type: ignore
        SandboxCreateError, SandboxExecResult, SandboxHandle, SandboxStatus)
    UPSTREAM = True
except ImportError:
    UPSTREAM = False

    class SandboxStatus(str, enum.Enum):  # type: ignore[no-redef]
        STARTING = "starting"
        RUNNING = "running"
        STOPPED = "stopped"
        ERROR = "error"
        UNKNOWN = "unknown"

    class SandboxCreateError(RuntimeError):  # type: ignore[no-redef]
        """Raised when a provider cannot create a sandbox."""

    @dataclass
    class SandboxHandle:  # type: ignore[no-redef]
        sandbox_id: str
        provider_name: str
        raw: Any

    @dataclass(frozen=True)
    class SandboxExecResult:  # type: ignore[no-redef]
        stdout: Optional[str]
        stderr: Optional[str]
        return_code: int
        error_type: Optional[str] = None

ExecResult = SandboxExecResult
DEFAULT_TIMEOUT_S = 180.0  # NeMo's facade and docker provider default
SENTINEL_RC = 125
PROVIDER_OPTIONS = ("data_source",)


def _states() -> Dict[str, Any]:
    # NeMo main has no PAUSED (its pause/resume PR adds one): a paused sandbox is UNKNOWN there.
    return {"running": SandboxStatus.RUNNING, "creating": SandboxStatus.STARTING,
            "gone": SandboxStatus.STOPPED,
            "paused": getattr(SandboxStatus, "PAUSED", SandboxStatus.UNKNOWN)}


def _whole(shown: str, truncated: bool, file: Optional[str]) -> str:
    """The command's whole output: sbx's display copy, or its stored file when that was cut."""
    if not truncated or not file:
        return shown
    try:
        return Path(file).read_bytes().decode("utf-8", "replace")
    except OSError:
        return shown


class SbxProvider:
    """NeMo Gym's SandboxProvider protocol on sbx, with its optional capabilities
    ConnectableProvider (serialize_handle/connect) and pause/resume, plus
    read_file/write_file."""

    name = "sbx"

    def __init__(self, config: Any = None, *, sandbox: Optional[Mapping[str, Any]] = None,
                 data_source: Optional[str] = None,
                 default_timeout_s: Optional[float] = DEFAULT_TIMEOUT_S, max_workers: int = 64,
                 host: Optional[AsyncHost] = None):
        if sandbox is not None:
            if config is not None:
                raise ValueError("sbx provider: give `config` or `sandbox`, not both")
            config = {"data_source": {"sandbox": dict(sandbox)}}
        if default_timeout_s is not None and not default_timeout_s > 0:
            raise ValueError(f"sbx provider: default_timeout_s must be > 0, got "
                             f"{default_timeout_s!r}")
        self._config = config
        self._max_workers = int(max_workers)
        self._ahost = host
        self._owns_host = host is None
        self._data_source = data_source
        self._default_timeout_s = default_timeout_s
        self._busy = 0  # calls in flight: aclose() leaves a host in use alone
        if host is None:
            self._host()  # a bad config fails here, at construction, as NeMo's providers do

    def _host(self) -> AsyncHost:
        if self._ahost is None:
            self._ahost = AsyncHost(self._config, max_workers=self._max_workers)
        return self._ahost

    async def _call(self, name: str, *args, **kwargs):
        self._busy += 1
        try:
            return await getattr(self._host(), name)(*args, **kwargs)
        finally:
            self._busy -= 1

    async def create(self, spec: Any) -> SandboxHandle:
        opts = dict(getattr(spec, "provider_options", None) or {})
        unknown = sorted(set(opts) - set(PROVIDER_OPTIONS))
        if unknown:
            raise ValueError(f"Unknown sbx provider_options keys: {', '.join(unknown)}. "
                             f"Expected keys: {', '.join(PROVIDER_OPTIONS)}")
        if getattr(spec, "entrypoint", None):
            logger.warning("sbx provider: SandboxSpec.entrypoint is not supported; ignored")
        ttl = getattr(spec, "ttl_s", None) or 0
        workdir = getattr(spec, "workdir", None)
        try:
            sid = await self._call("create", opts.get("data_source", self._data_source),
                                   image=getattr(spec, "image", None),
                                   env=dict(getattr(spec, "env", None) or {}),
                                   ttl=int(-(-ttl // 1)))
        except SbxError as e:
            raise SandboxCreateError(str(e)) from e
        handle = SandboxHandle(sandbox_id=sid, provider_name=self.name,
                               raw={"workdir": workdir})
        if workdir:
            try:  # NeMo's docker provider starts containers in the workdir (-w makes it)
                await self._call("mkdir", sid, workdir, True)
            except SbxError as e:
                logger.warning("sbx provider: workdir %s: %s", workdir, e)
        return handle

    async def exec(self, handle: SandboxHandle, command: str, *, cwd: Optional[str] = None,
                   env: Optional[Mapping[str, str]] = None,
                   timeout_s: Optional[float] = None,
                   user: Any = None) -> SandboxExecResult:
        if timeout_s is None:
            timeout_s = self._default_timeout_s
        raw = handle.raw if isinstance(handle.raw, dict) else {}
        try:
            r = await self._call("exec", handle.sandbox_id, command,
                                 cwd=cwd or raw.get("workdir"), env=dict(env or {}),
                                 timeout=0 if timeout_s is None else float(timeout_s),
                                 user=None if user is None else str(user))
        except SbxError as e:
            return SandboxExecResult(stdout="", stderr=str(e), return_code=SENTINEL_RC,
                                     error_type="sandbox")
        out = _whole(r.stdout, r.truncated, r.stdout_file)
        err = _whole(r.stderr, r.truncated, r.stderr_file)
        if r.timed_out:
            return SandboxExecResult(stdout=out, stderr=err, return_code=SENTINEL_RC,
                                     error_type="timeout")
        return SandboxExecResult(stdout=out, stderr=err, return_code=r.exit_code,
                                 error_type=None)

    async def upload_file(self, handle: SandboxHandle, source_path: Path,
                          target_path: str) -> None:
        data = await asyncio.get_running_loop().run_in_executor(None, Path(source_path).read_bytes)
        parent = os.path.dirname(target_path.rstrip("/"))
        if parent and parent not in (".", "/"):
            await self._call("mkdir", handle.sandbox_id, parent, True)
        await self._call("write_file", handle.sandbox_id, target_path, data)

    async def download_file(self, handle: SandboxHandle, source_path: str,
                            target_path: Path) -> None:
        data = await self._call("read_file", handle.sandbox_id, source_path)
        target = Path(target_path)

        def save():
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, target)
        await asyncio.get_running_loop().run_in_executor(None, save)

    async def read_file(self, handle: SandboxHandle, path: str) -> bytes:
        return await self._call("read_file", handle.sandbox_id, path)

    async def write_file(self, handle: SandboxHandle, path: str, data: bytes) -> None:
        await self._call("write_file", handle.sandbox_id, path, data)

    async def status(self, handle: SandboxHandle) -> SandboxStatus:
        try:
            return _states().get(await self._call("status", handle.sandbox_id),
                                 SandboxStatus.UNKNOWN)
        except (SandboxNotFound, BadId):
            return SandboxStatus.STOPPED
        except SbxError:
            return SandboxStatus.UNKNOWN  # transient problems do not raise

    async def pause(self, handle: SandboxHandle) -> None:
        await self._call("pause", handle.sandbox_id)

    async def resume(self, handle: SandboxHandle) -> None:
        await self._call("resume", handle.sandbox_id)

    async def serialize_handle(self, handle: SandboxHandle, *,
                               scope: Optional[str] = None) -> Dict[str, Any]:
        """{provider, sandbox_id, workdir}: sbx ids stand alone, so any process with the
        same sbx state dir reaches the sandbox from this; `scope` has no meaning here."""
        raw = handle.raw if isinstance(handle.raw, dict) else {}
        return {"provider": self.name, "sandbox_id": handle.sandbox_id,
                "workdir": raw.get("workdir")}

    async def connect(self, descriptor: Mapping[str, Any]) -> SandboxHandle:
        sid = descriptor.get("sandbox_id") if isinstance(descriptor, Mapping) else None
        if not isinstance(sid, str) or not sid:
            raise ValueError("sbx provider: connect() needs a descriptor with a sandbox_id")
        try:
            gone = await self._call("status", sid) == "gone"
        except (SandboxNotFound, BadId):
            gone = True
        except SbxError:
            gone = False  # unreachable for now: the handle is still good
        if gone:
            raise RuntimeError(f"sbx provider: no such sandbox {sid!r}")
        return SandboxHandle(sandbox_id=sid, provider_name=self.name,
                             raw={"workdir": descriptor.get("workdir")})

    async def close(self, handle: SandboxHandle) -> None:
        """Ends the sandbox; one already gone counts as closed."""
        try:
            await self._call("destroy", handle.sandbox_id)
        except (SandboxNotFound, BadId):
            pass

    async def aclose(self) -> None:
        """Releases what is the provider's own: the sbx host it made, once no call is in
        flight (a shared provider keeps serving the other sandboxes). The next call opens a
        new one, so the provider goes on serving after a facade's stop()."""
        ahost = self._ahost
        if self._owns_host and ahost is not None and self._busy == 0:
            self._ahost = None
            await ahost.aclose()


def register(name: str = "sbx") -> None:
    """Registers the provider with NeMo Gym in this process (the entry point does it for an
    installed sbx package; this is for a source tree on PYTHONPATH)."""
    from nemo_gym.sandbox.providers.registry import register_provider  # type: ignore
    register_provider(name, SbxProvider, override=True)
