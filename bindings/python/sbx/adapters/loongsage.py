"""LoongSage's SandboxClient over sbx: one client per data source, ids passed explicitly.

Two ways in, each one change to a harness:
- one import: `from sbx.adapters.loongsage import create_sandbox_client` in place of coda's;
  the config's `type` is then an sbx backend (docker, k8s, local, e2b, ...);
- one config value: with coda importable, importing this module registers `sbx` (backend in
  the `backend` key, default local) and `sbx-<backend>` (e.g. `type: sbx-k8s`) in coda's own
  sandbox registry, so coda's create_sandbox_client builds this client.

LoongSage's keys: `working_dir` is the default cwd of commands (LoongSage's per-backend
defaults: /testbed on docker, /rl-sandbox on k8s); `command_exec_timeout_seconds` (or
docker's `timeout`) is the command timeout, 120 s by default, exposed as `.timeout`;
`sandbox_creation_timeout_seconds`, `kubeconfig`, `pod_manifest_path`/`pod_manifest` map to
the k8s backend (namespace, image, node selector, tolerations, service account, runtime
class, deadline, cpu/memory limits); what sbx has no use for is accepted, listed in
`.ignored_keys` and logged. Every other key goes to the sbx backend, which refuses one it does
not know. `execute` never raises: a missing workdir or a gone sandbox is a dict with exit code
1 and the reason in stderr (what `cd` or the docker/kubectl CLI gave LoongSage), a timeout is
124 (GNU timeout's), and the output is whole, never cut.
"""
import json
import logging
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from ..errors import BadId, InvalidArgument, PathError, SandboxNotFound, SbxError
from ..host import Host

logger = logging.getLogger(__name__)

try:  # coda's own base class and registry when LoongSage is there
    from coda.agentflow import sandbox as _coda  # type: ignore
    from coda.agentflow.sandbox.base import SandboxClient  # type: ignore
    UPSTREAM = True
except ImportError:
    _coda = None
    UPSTREAM = False

    class SandboxClient:  # type: ignore[no-redef]
        """Backend connector that can manage multiple sandbox instances (LoongSage's)."""

        @classmethod
        def from_config(cls, sandbox_config: Mapping[str, Any], **kwargs: Any):
            config = dict(sandbox_config)
            config.pop("type", None)
            return cls(**config)

DEFAULT_TIMEOUT_S = 120
_DEFAULT_WORKDIR = {"docker": "/testbed", "k8s": "/rl-sandbox"}
_CREATE_TIMEOUT_KEY = {"k8s": "create_timeout_seconds", "docker": "ready_timeout"}
_BACKENDS = ("local", "docker", "e2b", "k8s", "custom")  # registered as sbx-<backend>


def _load_manifest(path: str) -> Dict[str, Any]:
    text = Path(path).read_text()
    try:
        import yaml  # type: ignore  # LoongSage depends on PyYAML
        return yaml.safe_load(text) or {}
    except ImportError:
        return json.loads(text)  # JSON is YAML: enough without PyYAML


def _from_manifest(m: Mapping[str, Any], block: Dict[str, Any], ignored: List[str]) -> None:
    """LoongSage's pod manifest onto the k8s backend's keys; the rest is reported."""
    for k in m:
        if k not in ("apiVersion", "kind", "metadata", "spec"):
            ignored.append(f"pod_manifest.{k}")
    meta = m.get("metadata") or {}
    for k, v in meta.items():
        if k == "namespace":
            block.setdefault("namespace", v)
        else:
            ignored.append(f"pod_manifest.metadata.{k}")
    spec = m.get("spec") or {}
    direct = {"activeDeadlineSeconds": "active_deadline_seconds",
              "nodeSelector": "node_selector", "tolerations": "tolerations",
              "serviceAccountName": "service_account", "runtimeClassName": "runtime_class"}
    for k, v in spec.items():
        if k in direct:
            block.setdefault(direct[k], v)
        elif k != "containers":
            ignored.append(f"pod_manifest.spec.{k}")
    for i, c in enumerate(spec.get("containers") or []):
        for k, v in c.items():
            if i == 0 and k == "image":
                block.setdefault("image", v)
            elif i == 0 and k == "resources":
                limits = (v or {}).get("limits") or {}
                for r in ("cpu", "memory"):
                    if r in limits:
                        block.setdefault(r, str(limits[r]))
                for rk in v or {}:
                    if rk != "limits":
                        ignored.append(f"pod_manifest.spec.containers[0].resources.{rk}")
            elif not (i == 0 and k == "name"):
                ignored.append(f"pod_manifest.spec.containers[{i}].{k}")


def _whole(shown: str, truncated: bool, file: Optional[str]) -> str:
    if not truncated or not file:
        return shown
    try:
        return Path(file).read_bytes().decode("utf-8", "replace")
    except OSError:
        return shown


class SbxSandboxClient(SandboxClient):
    """Creates, executes in and deletes sandboxes of one sbx backend. Keeps no current
    sandbox: every call names its id."""

    def __init__(self, type: str = "local", *, host: Optional[Host] = None,
                 working_dir: Optional[str] = None,
                 command_exec_timeout_seconds: Optional[float] = None,
                 timeout: Optional[float] = None, image: Optional[str] = None,
                 sandbox_creation_timeout_seconds: Optional[float] = None,
                 kubeconfig: Optional[str] = None, pod_manifest_path: Optional[str] = None,
                 pod_manifest: Optional[Mapping[str, Any]] = None, **backend_keys: Any):
        self.type = str(type).strip().lower()
        self.working_dir = working_dir if working_dir is not None else \
            _DEFAULT_WORKDIR.get(self.type)
        t = command_exec_timeout_seconds if command_exec_timeout_seconds is not None else timeout
        self.timeout = DEFAULT_TIMEOUT_S if t is None else t
        self.command_exec_timeout_seconds = self.timeout
        self.image = image
        self.ignored_keys: List[str] = []
        block: Dict[str, Any] = {"type": self.type}
        if sandbox_creation_timeout_seconds is not None:
            key = _CREATE_TIMEOUT_KEY.get(self.type)
            if key:
                block[key] = sandbox_creation_timeout_seconds
            else:
                self.ignored_keys.append("sandbox_creation_timeout_seconds")
        k8s = self.type == "k8s"
        if kubeconfig is not None:
            if k8s:
                block["kubeconfig"] = kubeconfig
            else:
                self.ignored_keys.append("kubeconfig")
        if pod_manifest_path is not None and pod_manifest is None:
            pod_manifest = _load_manifest(pod_manifest_path)
        if pod_manifest is not None:
            if k8s:
                _from_manifest(pod_manifest, backend_keys, self.ignored_keys)
            else:
                self.ignored_keys.append("pod_manifest_path" if pod_manifest_path else
                                         "pod_manifest")
        block.update(backend_keys)
        if self.ignored_keys:
            logger.warning("sbx: LoongSage keys with no use on the %s backend, ignored: %s",
                           self.type, ", ".join(self.ignored_keys))
        self._host = host or Host({"data_source": {"sandbox": block}})

    @classmethod
    def from_config(cls, sandbox_config: Mapping[str, Any],
                    **kwargs: Any) -> "SbxSandboxClient":
        """`type` is the sbx backend, or `sbx` with the backend in `backend`, or
        `sbx-<backend>` (the names registered in coda's registry)."""
        cfg = dict(sandbox_config)
        kind = str(cfg.pop("type", "local")).strip().lower()
        if kind == "sbx":
            kind = str(cfg.pop("backend", "local")).strip().lower()
        elif kind.startswith("sbx-"):
            kind = kind[4:]
        return cls(kind, **cfg)

    def create(self, **kwargs: Any) -> str:
        return self._host.create(image=kwargs.get("image") or self.image)

    def execute(self, sandbox_id: str, command: str, workdir: Optional[str] = None,
                **kwargs: Any) -> Dict[str, Any]:
        try:
            r = self._host.exec(sandbox_id, command, cwd=workdir or self.working_dir,
                                timeout=self.timeout)
        except (PathError, InvalidArgument, SandboxNotFound, BadId) as e:
            return {"stdout": "", "stderr": str(e), "exit_code": 1, "success": False}
        except SbxError as e:  # the backend failed: no result, as LoongSage's -1
            return {"stdout": "", "stderr": str(e), "exit_code": -1, "success": False}
        code = 124 if r.timed_out else r.exit_code
        return {"stdout": _whole(r.stdout, r.truncated, r.stdout_file),
                "stderr": _whole(r.stderr, r.truncated, r.stderr_file),
                "exit_code": code, "success": code == 0}

    def delete(self, sandbox_id: str, **kwargs: Any) -> None:
        """A missing sandbox is a success; a failure is logged, never raised (LoongSage)."""
        try:
            self._host.destroy(sandbox_id)
        except (SandboxNotFound, BadId):
            pass
        except SbxError as e:
            logger.error("sbx: delete %s failed; it may leak until gc: %s", sandbox_id, e)

    def close(self) -> None:
        self._host.close()


def _valid_types() -> List[str]:
    with Host() as h:
        return sorted({p.alias for p in h.plugins()})


def create_sandbox_client(sandbox_config: Optional[Mapping[str, Any]],
                          **kwargs: Any) -> Optional[SbxSandboxClient]:
    """LoongSage's factory with sbx backends as the types: None for `type: none` or an empty
    type; an unknown type is coda's KeyError listing the valid names."""
    cfg = dict(sandbox_config or {})
    kind = str(cfg.get("type", "none")).strip().lower()
    if kind in ("", "none"):
        return None
    valid = _valid_types()
    base = kind[4:] if kind.startswith("sbx-") else (str(cfg.get("backend", "local")).lower()
                                                       if kind == "sbx" else kind)
    if base not in valid:
        raise KeyError(f"[sandbox] '{kind}' is not registered. Available: {valid}")
    cfg["type"] = kind
    return SbxSandboxClient.from_config(cfg, **kwargs)


def _register() -> None:
    """sbx and sbx-<backend> in coda's sandbox registry (when coda is there)."""
    reg = getattr(_coda, "SANDBOX_REGISTRY", None)
    if reg is None:
        return
    for name in ("sbx",) + tuple(f"sbx-{b}" for b in _BACKENDS):
        if name not in reg:
            reg.register(name)(SbxSandboxClient)


_register()
