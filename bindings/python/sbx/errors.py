"""Exceptions for infrastructure failures. A command that ran and failed is never one of
these: it is an ExecResult with its exit code."""
from . import _lib


class SbxError(Exception):
    """Base of every sbx failure: .status (int), .name ("SBX_E_NOT_FOUND"), .message."""

    def __init__(self, status, message):
        self.status = status
        self.name = _lib.lib().sbx_status_name(status).decode()
        self.message = message
        super().__init__(f"{message} ({self.name})")


class InfrastructureError(SbxError):
    """The backend or the host failed; the command's outcome is unknown or it never ran."""


class SandboxNotFound(InfrastructureError):
    """The sandbox does not exist (any more)."""


class BackendUnreachable(InfrastructureError):
    """The backend could not be reached, or a call to it timed out."""


class BackendError(InfrastructureError):
    """The backend refused or failed the call."""


class PluginCrashed(InfrastructureError):
    """The plugin's runner process died (signal, exit, lost connection) or hung past the call's
    timeout; the call's outcome is unknown. The next call starts a fresh runner."""


class ConfigError(SbxError):
    """Bad config or registry."""


class PluginError(SbxError):
    """Unknown alias, ABI mismatch or a faulty plugin."""


class BadId(SbxError):
    """A malformed sandbox id."""


class Unsupported(SbxError):
    """The backend does not implement this operation."""


class PathError(SbxError):
    """A path that leaves the sandbox, or a file that does not exist."""


class InvalidArgument(SbxError):
    """An argument the host refused."""


_BY_NAME = {
    "SBX_E_NOT_FOUND": SandboxNotFound,
    "SBX_E_UNREACHABLE": BackendUnreachable,
    "SBX_E_TIMEOUT": BackendUnreachable,
    "SBX_E_RATE_LIMITED": BackendUnreachable,
    "SBX_E_BACKEND": BackendError,
    "SBX_E_CONFIG": ConfigError,
    "SBX_E_REGISTRY": ConfigError,
    "SBX_E_UNKNOWN_ALIAS": PluginError,
    "SBX_E_FAULTY": PluginError,
    "SBX_E_ABI": PluginError,
    "SBX_E_BAD_ID": BadId,
    "SBX_E_UNSUPPORTED": Unsupported,
    "SBX_E_PATH": PathError,
    "SBX_E_NO_FILE": PathError,
    "SBX_E_INVAL": InvalidArgument,
    "SBX_E_PLUGIN_CRASHED": PluginCrashed,
}


def from_status(status, message):
    name = _lib.lib().sbx_status_name(status).decode()
    return _BY_NAME.get(name, InfrastructureError)(status, message)


def from_error(status, err):
    """The exception for a failed call: its status and the message libsbx left in `err`."""
    return from_status(status, err.message.decode("utf-8", "replace"))
