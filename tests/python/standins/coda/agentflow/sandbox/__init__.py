"""Stand-in for coda.agentflow.sandbox (LoongSage): the sandbox registry, holding its two
built-in names, and create_sandbox_client (type none or empty: no client)."""
from coda.agentflow.sandbox.base import SandboxClient
from coda.utils.registry import Registry

SANDBOX_REGISTRY = Registry("sandbox")
register_sandbox = SANDBOX_REGISTRY.register
get_sandbox_class = SANDBOX_REGISTRY.get
list_sandboxes = SANDBOX_REGISTRY.keys


class _BuiltIn(SandboxClient):  # LoongSage's docker and k8s clients, by name only
    def create(self, **kwargs):
        raise NotImplementedError

    def execute(self, sandbox_id, command, **kwargs):
        raise NotImplementedError

    def delete(self, sandbox_id, **kwargs):
        raise NotImplementedError


register_sandbox("docker")(_BuiltIn)
register_sandbox("k8s")(_BuiltIn)


def create_sandbox_client(sandbox_config, **kwargs):
    cfg = dict(sandbox_config or {})
    kind = str(cfg.get("type", "none")).strip().lower()
    if kind in ("", "none"):
        return None
    return get_sandbox_class(kind).from_config(cfg, **kwargs)
