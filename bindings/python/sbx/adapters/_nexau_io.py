"""File access for SbxSandbox: one interface over the sandbox's files (through sbx) and, in
LocalSandbox mode only, the host's own files outside the work dir.

LocalSandbox mode is sbx's `local` backend at its plain level with NexAU's work_dir shared:
commands run on the host exactly as LocalSandbox runs them, so a path outside the work dir
(the host temp dir holding NexAU's output folders and heredoc scripts, a host folder given
to upload_file) means the host's file, as it does for LocalSandbox. Every other mode keeps
every path inside the sandbox."""
import os
import stat as stat_mod

from ..errors import PathError
from ..host import FileEntry

_KINDS = ((stat_mod.S_ISREG, "file"), (stat_mod.S_ISDIR, "dir"), (stat_mod.S_ISLNK, "symlink"))


def _entry(name: str, st: os.stat_result) -> FileEntry:
    kind = next((k for test, k in _KINDS if test(st.st_mode)), "other")
    return FileEntry(name, kind, stat_mod.S_IMODE(st.st_mode), st.st_size, int(st.st_mtime))


class SbxFiles:
    """The sandbox's files, through sbx's file operations."""

    def __init__(self, host, sandbox_id: str):
        self.host, self.id = host, sandbox_id

    def stat(self, path: str):
        """FileEntry, or None when nothing is there."""
        try:
            return self.host.stat(self.id, path)
        except PathError as e:
            if e.name == "SBX_E_NO_FILE":
                return None
            raise

    def read(self, path: str) -> bytes:
        return self.host.read_file(self.id, path)

    def write(self, path: str, data: bytes, mode: int = 0) -> None:
        self.host.write_file(self.id, path, data, mode)

    def mkdir(self, path: str, parents: bool = True) -> None:
        self.host.mkdir(self.id, path, parents)

    def remove(self, path: str, recursive: bool = True) -> None:
        self.host.remove(self.id, path, recursive)

    def listdir(self, path: str):
        return self.host.list_dir(self.id, path)


class HostFiles:
    """The host's files (LocalSandbox mode, paths outside the work dir)."""

    def stat(self, path: str):
        try:
            return _entry(os.path.basename(path), os.stat(path))
        except FileNotFoundError:
            return None

    # read and write go by descriptor: every command reads two files and writes one, and
    # open()'s buffered file object costs more than the system calls themselves.
    def read(self, path: str) -> bytes:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            chunks = []
            while True:
                b = os.read(fd, 1 << 20 if chunks else 65536)
                if not b:
                    return b"".join(chunks)
                chunks.append(b)
        finally:
            os.close(fd)

    def write(self, path: str, data: bytes, mode: int = 0) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        if mode:
            os.chmod(path, mode & 0o7777)

    def mkdir(self, path: str, parents: bool = True) -> None:
        try:  # the usual case, a new folder in one that exists: one system call
            os.mkdir(path)
        except FileExistsError:
            if not os.path.isdir(path):
                raise
        except (FileNotFoundError, NotADirectoryError):
            if not parents:
                raise
            os.makedirs(path, exist_ok=True)  # an error names the part that is wrong

    def remove(self, path: str, recursive: bool = True) -> None:
        if os.path.isdir(path) and not os.path.islink(path):
            import shutil
            shutil.rmtree(path)
        else:
            os.unlink(path)

    def listdir(self, path: str):
        out = []
        with os.scandir(path) as it:
            for e in it:
                try:
                    out.append(_entry(e.name, e.stat()))
                except OSError:
                    continue
        return out
