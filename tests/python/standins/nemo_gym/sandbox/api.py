"""Stand-in for nemo_gym.sandbox.api.AsyncSandbox: the facade's calls on its provider
(written from its interface for sbx's tests): start uploads spec.files through temp files
and on failure closes and aclose()s; exec defaults cwd to spec.workdir and timeout to 180 s;
stop() closes the handle and always aclose()s the provider; serialize/connect await the
provider's ConnectableProvider methods and carry the workdir."""
import tempfile
from collections.abc import Mapping
from pathlib import Path

from .providers.base import ConnectableProvider, SandboxSpec, SandboxStatus
from .providers.registry import create_provider


class AsyncSandbox:
    def __init__(self, provider, spec=None):
        self._provider = create_provider(provider) if isinstance(provider, Mapping) else provider
        self._spec = spec
        self._handle = None
        self._stopped = True
        self._closed = False

    async def start(self, spec=None):
        spec = spec or self._spec
        handle = await self._provider.create(spec)
        try:
            with tempfile.TemporaryDirectory() as d:
                for i, (target, text) in enumerate(spec.files.items()):
                    src = Path(d) / f"f{i}"
                    src.write_text(text, encoding="utf-8")
                    await self._provider.upload_file(handle, src, target)
        except Exception:
            await self._provider.close(handle)
            await self._provider.aclose()
            self._closed = True
            raise
        self._spec, self._handle, self._stopped = spec, handle, False
        return self

    def _live(self):
        if self._handle is None or self._stopped:
            raise RuntimeError("Sandbox has not been started")
        return self._handle

    async def exec(self, command, *, cwd=None, env=None, timeout_s=180, user=None):
        return await self._provider.exec(
            self._live(), command, cwd=cwd if cwd is not None else
            (self._spec.workdir if self._spec is not None else None),
            env=env, timeout_s=timeout_s, user=user)

    async def upload(self, local_path, remote_path):
        await self._provider.upload_file(self._live(), Path(local_path), remote_path)

    async def download(self, remote_path, local_path):
        await self._provider.download_file(self._live(), remote_path, Path(local_path))

    async def status(self):
        if self._handle is None:
            return SandboxStatus.UNKNOWN
        if self._stopped:
            return SandboxStatus.STOPPED
        return await self._provider.status(self._handle)

    async def stop(self):
        if self._closed:
            return
        try:
            if self._handle is not None and not self._stopped:
                self._stopped = True
                await self._provider.close(self._handle)
        finally:
            await self._provider.aclose()
            self._closed = True

    async def serialize(self, *, scope=None):
        if not isinstance(self._provider, ConnectableProvider):
            raise RuntimeError("provider does not support serialize()/connect()")
        d = await self._provider.serialize_handle(self._live(), scope=scope)
        if d.get("workdir") is None and self._spec is not None:
            d = {**d, "workdir": self._spec.workdir}
        return d

    @classmethod
    async def connect(cls, descriptor, *, provider):
        if not isinstance(provider, ConnectableProvider):
            raise RuntimeError("provider does not support serialize()/connect()")
        handle = await provider.connect(descriptor)
        box = cls(provider, SandboxSpec(workdir=descriptor.get("workdir")))
        box._handle, box._stopped = handle, False
        return box
