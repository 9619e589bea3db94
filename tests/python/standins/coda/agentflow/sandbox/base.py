"""Stand-in for coda.agentflow.sandbox.base.SandboxClient (LoongSage): stateless, ids
explicit; from_config drops `type` and passes the rest to the constructor."""
import abc


class SandboxClient(abc.ABC):
    @classmethod
    def from_config(cls, sandbox_config, **kwargs):
        cfg = dict(sandbox_config)
        cfg.pop("type", None)
        return cls(**cfg)

    @abc.abstractmethod
    def create(self, **kwargs):
        ...

    @abc.abstractmethod
    def execute(self, sandbox_id, command, **kwargs):
        ...

    @abc.abstractmethod
    def delete(self, sandbox_id, **kwargs):
        ...
