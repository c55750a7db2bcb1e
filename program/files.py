"""Writing files so that no fault loses data: atomic replacement, ordinary permissions, no litter.

``write_atomically(path, data)`` writes a temp file beside the target and
renames it over the target, so a crash leaves either the old file or the new
one. The rules (see design_docs/files.md):

- the new file gets the permissions of the file it replaces, or, for a new
  file, ``0o666`` minus the umask (what ``open(path, "w")`` gives);
- a symlink is followed: the file it points to is replaced, the link stays;
- temp files are named ``.<target name>.gradgen-tmp-<pid>-<random>``; an
  exception removes its own, and a process killed outright (SIGKILL, power
  loss) leaves one that the next save to the same target removes, once the
  process that made it is gone.
"""
from __future__ import annotations

import os
import secrets
import stat

__all__ = ["write_atomically", "temp_files_of"]

_TMP_MARK = ".gradgen-tmp-"


def _temp_prefix(target: str) -> str:
    return "." + os.path.basename(target) + _TMP_MARK


def temp_files_of(target: str | os.PathLike) -> list[str]:
    """Paths of the temp files that saves to ``target`` (symlinks followed) have left in its directory."""
    target = os.path.realpath(os.fspath(target))
    directory, prefix = os.path.dirname(target), _temp_prefix(target)
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return [os.path.join(directory, n) for n in names if n.startswith(prefix)]


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _remove_stale_temps(target: str) -> None:
    """Remove temp files of earlier saves to ``target`` whose process no longer runs."""
    for path in temp_files_of(target):
        pid_text = os.path.basename(path)[len(_temp_prefix(target)):].split("-", 1)[0]
        if pid_text.isdigit() and int(pid_text) != os.getpid() and not _process_alive(int(pid_text)):
            try:
                os.unlink(path)
            except FileNotFoundError:  # another saver removed it first
                pass


def write_atomically(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a crash leaves either the old file or the new one."""
    target = os.path.realpath(os.fspath(path))
    _remove_stale_temps(target)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    tmp = os.path.join(os.path.dirname(target),
                       f"{_temp_prefix(target)}{os.getpid()}-{secrets.token_hex(6)}")
    # os.open applies the umask to 0o666, as open(path, "w") would; mkstemp would give 0o600.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
