"""Stand-in for NexAU's builtin file and shell tools: the calls each makes on the sandbox,
in its order (written from the tools' interfaces for sbx's tests). Each takes the agent
state and reaches the sandbox through agent_state.get_sandbox(), as NexAU's do."""
import time
from pathlib import Path

from nexau.archs.sandbox.base_sandbox import SandboxStatus

POLL_S = 0.2  # NexAU runs every foreground command as a polled background task


def _resolve(path, sandbox):
    return path if Path(path).is_absolute() else str(Path(str(sandbox.work_dir)) / path)


def write_file(file_path, content, agent_state):
    sb = agent_state.get_sandbox()
    p = _resolve(file_path, sb)
    if sb.file_exists(p) and sb.get_file_info(p).is_directory:
        return {"error": f"Path is a directory, not a file: {p}"}
    if sb.file_exists(p):
        sb.read_file(p, encoding="utf-8", binary=False)
    r = sb.write_file(p, content, encoding="utf-8", binary=False, create_directories=True)
    return {"content": f"wrote {p}"} if r.status == SandboxStatus.SUCCESS else {"error": r.error}


def read_file(file_path, agent_state):
    sb = agent_state.get_sandbox()
    p = _resolve(file_path, sb)
    if not sb.file_exists(p):
        return {"error": f"File not found: {file_path}"}
    if sb.get_file_info(p).is_directory:
        return {"error": f"Path is a directory: {file_path}"}
    r = sb.read_file(p, binary=True)
    if r.status != SandboxStatus.SUCCESS:
        return {"error": r.error}
    return {"content": r.content.decode("utf-8")}


def replace(file_path, old_string, new_string, agent_state):
    sb = agent_state.get_sandbox()
    p = _resolve(file_path, sb)
    if not sb.file_exists(p):
        return {"error": f"File not found: {file_path}"}
    r = sb.read_file(p, encoding="utf-8", binary=False)
    if r.content.count(old_string) != 1:
        return {"error": f"{r.content.count(old_string)} occurrences of the text"}
    w = sb.write_file(p, r.content.replace(old_string, new_string, 1), encoding="utf-8",
                      binary=False, create_directories=True)
    return {"content": f"modified {p}"} if w.status == SandboxStatus.SUCCESS else {"error": w.error}


def run_shell_command(command, agent_state, dir_path=None, timeout_ms=1_800_000):
    sb = agent_state.get_sandbox()
    if dir_path:
        cwd = _resolve(dir_path, sb)
        if not sb.file_exists(cwd):
            return {"error": f"Directory not found: {dir_path}"}
        if not sb.get_file_info(cwd).is_directory:
            return {"error": f"Path is not a directory: {dir_path}"}
    else:
        cwd = str(sb.work_dir)
    command = sb.prepare_shell_command(command)
    t0 = time.monotonic()
    start = sb.execute_shell(command, timeout=timeout_ms, background=True, cwd=cwd)
    pid = start.background_pid
    if pid is None:
        return {"error": start.error, "exit_code": start.exit_code}
    while True:
        r = sb.get_background_task_status(pid)
        if r.status != SandboxStatus.RUNNING:
            break
        if (time.monotonic() - t0) * 1000 >= timeout_ms:
            sb.kill_background_task(pid)
            return {"timed_out": True, "exit_code": -1, "stdout": r.stdout}
        time.sleep(POLL_S)
    return {"timed_out": False, "exit_code": r.exit_code, "stdout": r.stdout,
            "stderr": r.stderr, "output_dir": r.output_dir}
