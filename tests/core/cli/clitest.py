"""Helpers shared by the `sbx` command tests: run the built binary with a clean environment."""
import json
import os
import subprocess
import tempfile

SBX = os.environ["SBX_BIN"]
FIXTURES = os.environ["SBX_FIXTURE_REGISTRY"]
BUILD_REGISTRY = os.environ["SBX_BUILD_REGISTRY"]
SOURCE_DIR = os.environ["SBX_SOURCE_DIR"]
TMP = os.environ.get("CLI_TMP", tempfile.gettempdir())


def run(*args, registry=FIXTURES, config=None, stdin=None, env_extra=None, timeout=120):
    env = dict(os.environ)
    env["SBX_STATE_DIR"] = os.path.join(TMP, "state")
    env.pop("SBX_REGISTRY", None)
    env.pop("SBX_CONFIG", None)
    if env_extra:
        env.update(env_extra)
    cmd = [SBX]
    if registry:
        cmd += ["--registry", registry]
    if config:
        cmd += ["--config", config]
    p = subprocess.run(cmd + list(args), input=stdin, capture_output=True, env=env,
                       timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def write(name, text):
    os.makedirs(TMP, exist_ok=True)
    path = os.path.join(TMP, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def ok_config():
    return write("ok.yaml", "data_source:\n  sandbox:\n    type: ok\n")


_local = None


def local_available():
    """True when the build tree's `local` plugin loads (it lands separately)."""
    global _local
    if _local is None:
        rc, out, _ = run("plugins", "--json", registry=BUILD_REGISTRY)
        _local = rc == 0 and any(r["alias"] == "local" and r["state"] == "loaded"
                                 for r in json.loads(out))
    return _local


def local_config(extra=""):
    root = os.path.join(TMP, "local-root")
    os.makedirs(root, exist_ok=True)
    return write("local.yaml", "data_source:\n  sandbox:\n    type: local\n"
                 "    work_dir: %s\n%s" % (root, extra))
