from .base import (ConnectableProvider, ExecResult, SandboxCreateError,  # noqa: F401
                   SandboxExecResult, SandboxHandle, SandboxSpec, SandboxStatus)
from .registry import (create_provider, get_provider_class, list_providers,  # noqa: F401
                       register_provider)
