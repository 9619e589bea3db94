"""A NeMo Gym sandbox provider backed by sbx (async; timeouts in seconds)."""
import asyncio
import enum
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

from ..errors import InfrastructureError, SandboxNotFound, SbxError
from ..host import AsyncHost


class SandboxStatus(str, enum.Enum):
    STARTING = "starting"
    RUNNING = "running"
    STOPPED = "stopped"
    PAUSED = "paused"
    ERROR = "error"
    UNKNOWN = "unknown"


class SandboxCreateError(RuntimeError):
    pass


@dataclass
class SandboxHandle:
    sandbox_id: str
    provider_name: str
    raw: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SandboxExecResult:
    stdout: Optional[str]
    stderr: Optional[str]
    return_code: int
    error_type: Optional[str] = None


ExecResult = SandboxExecResult
_STATES = {"running": SandboxStatus.RUNNING, "paused": SandboxStatus.PAUSED,
           "gone": SandboxStatus.STOPPED, "creating": SandboxStatus.STARTING}


class SbxProvider:
    """Provider protocol: create/exec/upload_file/download_file/status/close/aclose, plus
    serialize_handle/connect, pause/resume and read_file/write_file."""

    name = "sbx"

    def __init__(self, config: Any = None, *, data_source: Optional[str] = None,
                 default_timeout_s: Optional[float] = None, max_workers: int = 64,
                 host: Optional[AsyncHost] = None):
        self._host = host or AsyncHost(config, max_workers=max_workers)
        self._data_source = data_source
        self._default_timeout_s = default_timeout_s

    async def create(self, spec: Any) -> SandboxHandle:
        image = getattr(spec, "image", None)
        env = dict(getattr(spec, "env", None) or {})
        ttl = int(getattr(spec, "ttl_s", 0) or 0)
        try:
            sid = await self._host.create(self._data_source, image=image, env=env, ttl=ttl)
        except SbxError as e:
            raise SandboxCreateError(str(e)) from e
        handle = SandboxHandle(sid, self.name, {"workdir": getattr(spec, "workdir", None)})
        try:
            for path, text in (getattr(spec, "files", None) or {}).items():
                await self._host.write_file(sid, path, text.encode())
        except BaseException:
            await self.close(handle)  # half-created sandboxes are cleaned up
            raise
        return handle

    async def exec(self, handle: SandboxHandle, command: str, *, cwd: Optional[str] = None,
                   env: Optional[Mapping[str, str]] = None, timeout_s: Optional[float] = None,
                   user: Optional[str] = None) -> SandboxExecResult:
        if timeout_s is None:
            timeout_s = self._default_timeout_s
        try:
            r = await self._host.exec(handle.sandbox_id, command,
                                      cwd=cwd or handle.raw.get("workdir"), env=env,
                                      timeout=timeout_s, user=user)
        except InfrastructureError as e:
            return SandboxExecResult(None, str(e), 125, "sandbox")
        if r.timed_out:
            return SandboxExecResult(r.stdout, r.stderr, 125, "timeout")
        return SandboxExecResult(r.stdout, r.stderr, r.exit_code, None)

    async def upload_file(self, handle: SandboxHandle, source_path: Path,
                          target_path: str) -> None:
        data = await asyncio.get_running_loop().run_in_executor(None, Path(source_path).read_bytes)
        await self._host.write_file(handle.sandbox_id, target_path, data)

    async def download_file(self, handle: SandboxHandle, source_path: str,
                            target_path: Path) -> None:
        data = await self._host.read_file(handle.sandbox_id, source_path)
        target = Path(target_path)

        def save():
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, target)
        await asyncio.get_running_loop().run_in_executor(None, save)

    async def read_file(self, handle: SandboxHandle, path: str) -> bytes:
        return await self._host.read_file(handle.sandbox_id, path)

    async def write_file(self, handle: SandboxHandle, path: str, data: bytes) -> None:
        await self._host.write_file(handle.sandbox_id, path, data)

    async def status(self, handle: SandboxHandle) -> SandboxStatus:
        try:
            return _STATES.get(await self._host.status(handle.sandbox_id), SandboxStatus.UNKNOWN)
        except SandboxNotFound:
            return SandboxStatus.STOPPED
        except SbxError:
            return SandboxStatus.UNKNOWN  # transient problems do not raise

    async def pause(self, handle: SandboxHandle) -> None:
        await self._host.pause(handle.sandbox_id)

    async def resume(self, handle: SandboxHandle) -> None:
        await self._host.resume(handle.sandbox_id)

    def serialize_handle(self, handle: SandboxHandle, *, scope: Any = None) -> Dict[str, Any]:
        return {"provider": self.name, "sandbox_id": handle.sandbox_id,
                "workdir": handle.raw.get("workdir")}

    def connect(self, descriptor: Mapping[str, Any]) -> SandboxHandle:
        return SandboxHandle(descriptor["sandbox_id"], self.name,
                             {"workdir": descriptor.get("workdir")})

    async def close(self, handle: SandboxHandle) -> None:
        await self._host.destroy(handle.sandbox_id)  # already gone counts as success

    async def aclose(self) -> None:
        await self._host.aclose()
