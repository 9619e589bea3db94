"""NexAU background tasks on sbx.

A task is one sbx exec with no timeout run on its own thread; its output goes to stdout.txt /
stderr.txt in a folder inside the sandbox (so it can be read while the command runs, on any
backend), and it carries a cancel token in its environment so kill() can end its whole tree
(Host.cancel: every process holding the token is killed, also ones that left the group)."""
import itertools
import shlex
import threading
import time
import uuid
from typing import Optional, Tuple

from ..errors import SbxError

_pids = itertools.count(1)


class BackgroundTask:
    def __init__(self, sb, sid: str, command: str, cwd: Optional[str], user: Optional[str],
                 env):
        self.pid = next(_pids)
        self.t0 = time.monotonic()
        self.command = command
        self._sb, self._sid = sb, sid
        self.output_dir = sb.join_path(sb.get_bash_tool_results_base_path(), uuid.uuid4().hex[:8])
        self.token = uuid.uuid4().hex
        self.finished = False
        self.exit_code = -1
        self.error: Optional[str] = None
        host = sb.host
        host.mkdir(sid, sb._sb(self.output_dir), parents=True)
        host.write_file(sid, sb._sb(self.output_dir + "/command.txt"), command.encode())
        out = shlex.quote(self.output_dir + "/stdout.txt")
        err = shlex.quote(self.output_dir + "/stderr.txt")
        wrapped = f"exec >{out} 2>{err} </dev/null\n{command}"
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        args=(host, wrapped, cwd, user, env))
        self._thread.start()

    def _run(self, host, wrapped, cwd, user, env):
        try:
            r = host.exec(self._sid, wrapped, cwd=cwd, user=user, timeout=0,
                          env=dict(env or {}), cancel_token=self.token)
            self.exit_code = r.exit_code if not r.signal else -r.signal
            if self.exit_code != 0:
                self.error = f"Command failed with exit code {self.exit_code}"
        except SbxError as e:
            self.error = str(e)
        finally:
            self.finished = True

    def poll(self) -> Tuple[bool, int, Optional[str]]:
        return self.finished, self.exit_code, self.error

    def output(self) -> Tuple[str, str]:
        got = []
        for name in ("stdout", "stderr"):
            try:
                data = self._sb.host.read_file(self._sid,
                                               self._sb._sb(f"{self.output_dir}/{name}.txt"))
            except SbxError:
                data = b""
            got.append(data.decode("utf-8", "replace"))
        return got[0], got[1]

    def kill(self) -> None:
        self._sb.host.cancel(self._sid, self.token)
        self._thread.join(timeout=5)


def start_task(sb, sid, command, cwd, user, env) -> BackgroundTask:
    return BackgroundTask(sb, sid, command, cwd, user, env)
