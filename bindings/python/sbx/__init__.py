"""sbx: run commands in sandboxes of any backend through libsbx.

    from sbx import Host
    with Host({"data_source": {"sandbox": {"type": "local"}}}) as h:
        sid = h.create()
        print(h.exec(sid, "echo hi").stdout)
        h.destroy(sid)
"""
from .errors import (BackendError, BackendUnreachable, BadId, ConfigError, InfrastructureError,
                     InvalidArgument, PathError, PluginCrashed, PluginError, SandboxNotFound,
                     SbxError, Unsupported)
from .host import AsyncHost, ExecResult, FileEntry, Host, PluginState, Session

__all__ = ["Host", "AsyncHost", "ExecResult", "FileEntry", "PluginState", "Session", "SbxError",
           "InfrastructureError", "SandboxNotFound", "BackendUnreachable", "BackendError",
           "ConfigError", "PluginError", "BadId", "Unsupported", "PathError", "InvalidArgument",
           "PluginCrashed"]
