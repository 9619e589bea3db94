"""LoongSage's SandboxClient over sbx: one client per data source, ids passed explicitly.

    from sbx.adapters.loongsage import create_sandbox_client
    client = create_sandbox_client(cfg["data_source"]["sandbox"])
"""
from typing import Any, Dict, Mapping, Optional

from ..errors import SandboxNotFound
from ..host import Host

# LoongSage's own key names, mapped onto sbx's.
_RENAMED = {"command_exec_timeout_seconds": "timeout"}
# Keys sbx has no use for (its create waits for readiness itself).
_IGNORED = {"sandbox_creation_timeout_seconds"}


class SandboxClient:
    """Creates, executes in and deletes sandboxes of one backend. Keeps no current sandbox."""

    def __init__(self, type: str = "local", host: Optional[Host] = None, **config: Any):
        block: Dict[str, Any] = {"type": type}
        for key, value in config.items():
            if key in _IGNORED:
                continue
            block[_RENAMED.get(key, key)] = value
        self._host = host or Host({"data_source": {"sandbox": block}})

    @classmethod
    def from_config(cls, sandbox_config: Mapping[str, Any], **kwargs: Any) -> "SandboxClient":
        return cls(**dict(sandbox_config))

    def create(self, **kwargs: Any) -> str:
        return self._host.create(image=kwargs.get("image"))

    def execute(self, sandbox_id: str, command: str, workdir: Optional[str] = None,
                timeout: Optional[float] = None, **kwargs: Any) -> Dict[str, Any]:
        r = self._host.exec(sandbox_id, command, cwd=workdir, timeout=timeout)
        # A timeout reports 124, as LoongSage's `timeout N cmd` wrapping did.
        code = 124 if r.timed_out else r.exit_code
        return {"stdout": r.stdout, "stderr": r.stderr, "exit_code": code,
                "success": code == 0}

    def delete(self, sandbox_id: str, **kwargs: Any) -> None:
        try:
            self._host.destroy(sandbox_id)
        except SandboxNotFound:
            pass  # a missing resource is a success


def create_sandbox_client(sandbox_config: Optional[Mapping[str, Any]],
                          **kwargs: Any) -> Optional[SandboxClient]:
    """None for `type: none` or an empty type, as LoongSage does."""
    cfg = dict(sandbox_config or {})
    kind = str(cfg.get("type", "none")).strip().lower()
    if kind in ("", "none"):
        return None
    cfg["type"] = kind
    return SandboxClient.from_config(cfg, **kwargs)
