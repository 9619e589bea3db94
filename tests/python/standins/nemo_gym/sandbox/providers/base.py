"""Stand-in for nemo_gym.sandbox.providers.base: NeMo Gym's provider-neutral types and the
ConnectableProvider capability (written from its interface for sbx's tests)."""
import enum
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Protocol, runtime_checkable


class SandboxStatus(str, enum.Enum):
    STARTING = "starting"
    RUNNING = "running"
    STOPPED = "stopped"
    ERROR = "error"
    UNKNOWN = "unknown"


class SandboxCreateError(RuntimeError):
    pass


@dataclass(frozen=True)
class SandboxSpec:
    image: Optional[str] = None
    ttl_s: Optional[float] = None
    ready_timeout_s: Optional[float] = None
    workdir: Optional[str] = None
    env: Dict[str, str] = field(default_factory=dict)
    files: Dict[str, str] = field(default_factory=dict)
    metadata: Dict[str, str] = field(default_factory=dict)
    entrypoint: Optional[list] = None
    provider_options: Dict[str, Any] = field(default_factory=dict)


@dataclass
class SandboxHandle:
    sandbox_id: str
    provider_name: str
    raw: Any


@dataclass(frozen=True)
class SandboxExecResult:
    stdout: Optional[str]
    stderr: Optional[str]
    return_code: int
    error_type: Optional[str] = None


ExecResult = SandboxExecResult


@runtime_checkable
class ConnectableProvider(Protocol):
    async def serialize_handle(self, handle, *, scope=None): ...

    async def connect(self, descriptor): ...
