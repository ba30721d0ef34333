"""The lock of a run directory: exactly one writer, even when ``.lock`` is deleted.

The lock is an exclusive ``flock`` on the run directory itself, taken without waiting; ``.lock`` records the
holder's pid and host (so a refused process can be told who holds it) and is flocked too, for older hofcat
versions that lock only it. Deleting ``.lock`` frees nothing: the directory stays locked while its writer
runs, and the next writer makes a new ``.lock``. ``.lock`` is opened with ``O_NOFOLLOW``: a link there is
refused, never truncated through.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
from collections.abc import Iterator

from runner.errors import RunDirError
from runner.rundir.guard import checked, read_text, store_error
from runner.rundir.layout import RunDir

__all__ = ["locked"]


@contextlib.contextmanager
def locked(layout: RunDir) -> Iterator[tuple[int, int]]:
    """The directory's lock fd while a writer is being opened; released again if opening fails (an OSError
    becomes the one-line ``RunDirError``); on success the writer owns it."""
    fds = _lock(layout)
    try:
        yield fds
    except OSError as exc:
        for fd in fds:
            os.close(fd)
        raise store_error(exc, f"{layout.root}: cannot write the run directory") from None
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def _lock(layout: RunDir) -> tuple[int, int]:
    """Take the directory's lock without waiting — an exclusive flock on the directory itself, then on ``.lock``
    (which older versions lock) — and record this process's pid and host in ``.lock``; ``RunDirError`` when
    another process holds it (naming that process), ``.lock`` is a link, or the directory is not writable."""
    try:
        dir_fd = os.open(layout.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise store_error(exc, f"{layout.root}: cannot lock the run directory") from None
    fd = None
    try:
        fcntl.flock(dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        checked(layout.root, layout.lock)
        fd = os.open(layout.lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
    except BlockingIOError:
        _close(dir_fd, fd)
        raise RunDirError(f"{layout.root}: another hofcat process{_holder(layout)} is using this directory") from None
    except OSError as exc:
        _close(dir_fd, fd)
        if exc.errno == errno.ELOOP:
            raise RunDirError(
                f"{layout.lock}: is a symbolic link; hofcat does not follow links inside a run directory"
            ) from None
        raise store_error(exc, f"{layout.root}: cannot lock the run directory") from None
    except BaseException:
        _close(dir_fd, fd)
        raise
    return dir_fd, fd


def _close(*fds: int | None) -> None:
    for fd in fds:
        if fd is not None:
            os.close(fd)


def _holder(layout: RunDir) -> str:
    """`` (pid N on host H)`` from ``.lock``, or '' when it is gone, a link or unreadable."""
    try:
        holder = read_text(layout.root, layout.lock)[:200].strip()
    except (OSError, ValueError, RunDirError):
        return ""
    return f" (pid {holder.replace(' ', ' on host ', 1)})" if holder else ""
