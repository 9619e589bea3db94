"""ctypes mirror of include/sbx/host.h and the loading of libsbx.

The library is found through $SBX_LIBRARY, then in an installed prefix ($SBX_PREFIX, this
interpreter's, /usr/local, /usr), then the dynamic loader's search path. Every struct starts
with the size/version header the C side checks; tests/python/test_layout.py pins each one to
the C sizes and offsets.
"""
import ctypes
import ctypes.util
import os
import sys
import sysconfig

ABI_MAJOR = 1
ABI_MINOR = 5

_HEADER = [("struct_size", ctypes.c_uint32), ("abi_major", ctypes.c_uint16),
           ("abi_minor", ctypes.c_uint16)]


def cstr(s: str) -> bytes:
    """s as a C string; a NUL byte would cut it short, so it is a ValueError."""
    b = s.encode("utf-8", "surrogateescape")
    if b"\0" in b:
        raise ValueError("sbx: NUL byte in %r: C strings end at NUL" % (s,))
    return b


def init_header(s):
    s.struct_size = ctypes.sizeof(s)
    s.abi_major = ABI_MAJOR
    s.abi_minor = ABI_MINOR
    return s


def new(cls, *fields):
    """A `cls` struct with its header set, then `fields` in order: what init_header(cls())
    does, in the one constructor call (the hot paths build one per call)."""
    return cls(ctypes.sizeof(cls), ABI_MAJOR, ABI_MINOR, *fields)


class Error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("message", ctypes.c_char * 512)]


class KV(ctypes.Structure):
    _fields_ = [("key", ctypes.c_char_p), ("value", ctypes.c_char_p)]


class HostOptions(ctypes.Structure):
    _fields_ = _HEADER + [("registry_path", ctypes.c_char_p), ("config_path", ctypes.c_char_p),
                          ("config_text", ctypes.c_char_p), ("state_dir", ctypes.c_char_p),
                          ("run_id", ctypes.c_char_p), ("ledger_retention", ctypes.c_int64)]


class CreateOpts(ctypes.Structure):
    _fields_ = _HEADER + [("data_source", ctypes.c_char_p), ("image", ctypes.c_char_p),
                          ("labels", ctypes.POINTER(KV)), ("n_labels", ctypes.c_uint32),
                          ("reserved0", ctypes.c_uint32), ("env", ctypes.POINTER(KV)),
                          ("n_env", ctypes.c_uint32), ("reserved1", ctypes.c_uint32),
                          ("ttl_seconds", ctypes.c_int64), ("detached", ctypes.c_uint32),
                          ("reserved2", ctypes.c_uint32), ("owner_pid", ctypes.c_int64),
                          ("wait_seconds", ctypes.c_double), ("share_dir", ctypes.c_char_p)]


class ExecOpts(ctypes.Structure):
    _fields_ = _HEADER + [("shell", ctypes.c_char_p), ("argv", ctypes.POINTER(ctypes.c_char_p)),
                          ("cwd", ctypes.c_char_p), ("env", ctypes.POINTER(KV)),
                          ("n_env", ctypes.c_uint32), ("has_stdin", ctypes.c_uint32),
                          ("stdin_data", ctypes.c_char_p), ("stdin_len", ctypes.c_size_t),
                          ("timeout", ctypes.c_double), ("user", ctypes.c_char_p),
                          ("background", ctypes.c_uint32), ("reserved0", ctypes.c_uint32),
                          ("stdout_path", ctypes.c_char_p), ("stderr_path", ctypes.c_char_p)]


class ExecResult(ctypes.Structure):
    _fields_ = _HEADER + [("exit_code", ctypes.c_int32), ("signal", ctypes.c_int32),
                          ("timed_out", ctypes.c_uint32), ("truncated", ctypes.c_uint32),
                          ("duration", ctypes.c_double), ("stdout_text", ctypes.c_void_p),
                          ("stderr_text", ctypes.c_void_p), ("stdout_text_len", ctypes.c_size_t),
                          ("stderr_text_len", ctypes.c_size_t),
                          ("original_stdout_length", ctypes.c_uint64),
                          ("original_stderr_length", ctypes.c_uint64),
                          ("stdout_bytes", ctypes.c_uint64), ("stderr_bytes", ctypes.c_uint64),
                          ("stdout_dropped", ctypes.c_uint64), ("stderr_dropped", ctypes.c_uint64),
                          ("output_dir", ctypes.c_char_p), ("stdout_file", ctypes.c_char_p),
                          ("stderr_file", ctypes.c_char_p),
                          ("oom_killed", ctypes.c_uint32), ("reserved0", ctypes.c_uint32),
                          ("job_id", ctypes.c_char_p)]


JOB_ID_MAX = 256 + 16
JOB_STATES = {1: "running", 2: "exited", 3: "killed", 4: "lost"}


class JobInfo(ctypes.Structure):
    _fields_ = _HEADER + [("id", ctypes.c_char * JOB_ID_MAX), ("sandbox_id", ctypes.c_char * 256),
                          ("state", ctypes.c_uint32), ("exit_code", ctypes.c_int32),
                          ("signal", ctypes.c_int32), ("reserved0", ctypes.c_uint32),
                          ("pid", ctypes.c_int64), ("started", ctypes.c_double),
                          ("duration", ctypes.c_double), ("stdout_bytes", ctypes.c_uint64),
                          ("stderr_bytes", ctypes.c_uint64), ("command", ctypes.c_char * 256)]


JOB_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(JobInfo))


class FileInfo(ctypes.Structure):
    _fields_ = _HEADER + [("kind", ctypes.c_uint32), ("mode", ctypes.c_uint32),
                          ("size", ctypes.c_uint64), ("mtime", ctypes.c_int64),
                          ("name", ctypes.c_char * 256)]


class PluginInfo(ctypes.Structure):
    _fields_ = _HEADER + [("alias", ctypes.c_char_p), ("path", ctypes.c_char_p),
                          ("registry_file", ctypes.c_char_p), ("state", ctypes.c_uint32),
                          ("plugin_abi_major", ctypes.c_uint16),
                          ("plugin_abi_minor", ctypes.c_uint16), ("version", ctypes.c_char_p),
                          ("description", ctypes.c_char_p), ("reason", ctypes.c_char_p)]


class SessionRecord(ctypes.Structure):
    _fields_ = _HEADER + [("user_id", ctypes.c_char_p), ("session_id", ctypes.c_char_p),
                          ("sandbox_id", ctypes.c_char_p), ("data_source", ctypes.c_char_p),
                          ("image", ctypes.c_char_p), ("state", ctypes.c_char_p),
                          ("ttl_seconds", ctypes.c_int64), ("created", ctypes.c_int64),
                          ("updated", ctypes.c_int64), ("assets", ctypes.POINTER(KV)),
                          ("n_assets", ctypes.c_uint32), ("reserved0", ctypes.c_uint32)]


SESSION_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(SessionRecord))
SESSION_OUTCOMES = {0: "created", 1: "reused", 2: "resumed", 3: "recreated"}

ID_MAX = 256

CALL_CREATE, CALL_EXEC, CALL_DESTROY, CALL_READ_FILE, CALL_WRITE_FILE = 1, 2, 3, 4, 5


class Call(ctypes.Structure):
    _fields_ = _HEADER + [("op", ctypes.c_uint32), ("reserved0", ctypes.c_uint32),
                          ("tag", ctypes.c_uint64), ("id", ctypes.c_char_p),
                          ("create", ctypes.POINTER(CreateOpts)),
                          ("exec", ctypes.POINTER(ExecOpts)), ("path", ctypes.c_char_p),
                          ("data", ctypes.c_char_p), ("len", ctypes.c_size_t),
                          ("mode", ctypes.c_uint32), ("reserved1", ctypes.c_uint32)]


class Completion(ctypes.Structure):
    _fields_ = _HEADER + [("op", ctypes.c_uint32), ("status", ctypes.c_int32),
                          ("tag", ctypes.c_uint64), ("err", Error),
                          ("id", ctypes.c_char * ID_MAX),
                          ("exec", ctypes.POINTER(ExecResult)), ("data", ctypes.c_void_p),
                          ("len", ctypes.c_size_t)]
STATE_NAMES = {0: "unknown", 1: "creating", 2: "running", 3: "paused", 4: "gone"}
FILE_KINDS = {1: "file", 2: "dir", 3: "symlink", 4: "other"}


def _find_library():
    """$SBX_LIBRARY, else libsbx.so.0 (what the runtime package ships; libsbx.so only comes
    with the -dev files) in the lib folders of $SBX_PREFIX, this interpreter's prefixes,
    /usr/local and /usr (Debian's multiarch folder too), else the dynamic loader's cache."""
    env = os.environ.get("SBX_LIBRARY")
    if env:
        return env
    multiarch = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
    prefixes = [os.environ.get("SBX_PREFIX"), sys.prefix, sys.base_prefix, "/usr/local", "/usr"]
    for prefix in [p for p in prefixes if p]:
        for sub in ("lib", "lib64", "lib/" + multiarch):
            for name in ("libsbx.so.0", "libsbx.so"):
                cand = os.path.join(prefix, sub, name)
                if os.path.exists(cand):
                    return cand
    found = ctypes.util.find_library("sbx")
    if found:
        return found
    raise OSError("sbx: cannot find libsbx.so; set SBX_LIBRARY to its path or SBX_PREFIX to "
                  "the prefix sbx was installed into")


_lib = None


def lib():
    """The loaded libsbx with argument types declared (loaded once)."""
    global _lib
    if _lib is not None:
        return _lib
    L = ctypes.CDLL(_find_library())
    P = ctypes.POINTER
    vp, cp, sz, err = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, P(Error)
    sigs = {
        "sbx_status_name": ([ctypes.c_int], cp),
        "sbx_status_message": ([ctypes.c_int], cp),
        "sbx_version": ([], cp),
        "sbx_free": ([vp], None),
        "sbx_host_new": ([P(HostOptions), P(vp), err], ctypes.c_int),
        "sbx_host_free": ([vp], None),
        "sbx_plugin_count": ([vp], sz),
        "sbx_plugin_get": ([vp, sz, P(PluginInfo), err], ctypes.c_int),
        "sbx_create": ([vp, P(CreateOpts), ctypes.c_char_p, err], ctypes.c_int),
        "sbx_destroy": ([vp, cp, err], ctypes.c_int),
        "sbx_exec": ([vp, cp, P(ExecOpts), P(P(ExecResult)), err], ctypes.c_int),
        "sbx_exec_result_free": ([P(ExecResult)], None),
        "sbx_read_file": ([vp, cp, cp, P(vp), P(sz), err], ctypes.c_int),
        "sbx_write_file": ([vp, cp, cp, ctypes.c_char_p, sz, ctypes.c_uint32, err],
                           ctypes.c_int),
        "sbx_stat": ([vp, cp, cp, P(FileInfo), err], ctypes.c_int),
        "sbx_list_dir": ([vp, cp, cp, P(P(FileInfo)), P(sz), err], ctypes.c_int),
        "sbx_mkdir": ([vp, cp, cp, ctypes.c_int, err], ctypes.c_int),
        "sbx_remove": ([vp, cp, cp, ctypes.c_int, err], ctypes.c_int),
        "sbx_pause": ([vp, cp, err], ctypes.c_int),
        "sbx_resume": ([vp, cp, err], ctypes.c_int),
        "sbx_status": ([vp, cp, P(ctypes.c_uint32), err], ctypes.c_int),
        "sbx_session_start": ([vp, cp, cp, P(CreateOpts), P(KV), ctypes.c_uint32,
                               ctypes.c_char_p, P(ctypes.c_uint32), err], ctypes.c_int),
        "sbx_session_pause": ([vp, cp, cp, err], ctypes.c_int),
        "sbx_session_end": ([vp, cp, cp, err], ctypes.c_int),
        "sbx_session_get": ([vp, cp, cp, SESSION_FN, vp, err], ctypes.c_int),
        "sbx_queue_new": ([vp, ctypes.c_uint32, P(vp), err], ctypes.c_int),
        "sbx_queue_fd": ([vp], ctypes.c_int),
        "sbx_queue_submit": ([vp, P(Call), err], ctypes.c_int),
        "sbx_queue_take": ([vp, P(Completion), sz, P(sz), err], ctypes.c_int),
        "sbx_queue_free": ([vp], None),
        "sbx_job_status": ([vp, cp, P(JobInfo), err], ctypes.c_int),
        "sbx_job_list": ([vp, cp, ctypes.c_uint32, JOB_FN, vp, err], ctypes.c_int),
        "sbx_job_wait": ([vp, cp, ctypes.c_double, P(JobInfo), err], ctypes.c_int),
        "sbx_job_kill": ([vp, cp, ctypes.c_int, err], ctypes.c_int),
        "sbx_job_read": ([vp, cp, ctypes.c_uint32, ctypes.c_uint64, sz, ctypes.c_uint32, P(vp),
                          P(sz), err], ctypes.c_int),
    }
    for name, (args, res) in sigs.items():
        fn = getattr(L, name)
        fn.argtypes = args
        fn.restype = res
    _lib = L
    return L
