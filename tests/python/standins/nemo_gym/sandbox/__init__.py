from .api import AsyncSandbox  # noqa: F401
from .providers import (ConnectableProvider, ExecResult, SandboxCreateError,  # noqa: F401
                        SandboxExecResult, SandboxHandle, SandboxSpec, SandboxStatus,
                        create_provider, get_provider_class, list_providers, register_provider)
