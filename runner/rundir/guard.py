"""What hofcat may touch inside a run directory: its own folders and files, never a link or a special file.

A run directory may come from elsewhere (a co-author's archive, a shared drive). A symbolic link inside it
could point anywhere: following it would read, truncate, overwrite or delete files outside the run. hofcat
creates no links, so every link (and every FIFO, socket or device) inside a run directory is foreign: each
access below checks every path component from the run directory down with ``lstat`` and opens files with
``O_NOFOLLOW``, and refuses a foreign entry with a one-line ``RunDirError`` naming it. The run directory's own
path (what the user typed) may be or pass through a link: that choice is the user's.

Temp files are recognised by hofcat's own name pattern (a writer's eight-hex-digit token, a dash, a name) and
are deleted only when they are regular files directly in the real ``.tmp`` folder, through a descriptor of
that folder, so nothing outside it can be reached even if the folder is swapped meanwhile.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from runner.errors import InputError, RunDirError

__all__ = [
    "arrow_path",
    "checked",
    "clear_temp",
    "create_new",
    "ensure_dir",
    "open_read",
    "output_file",
    "read_bytes",
    "read_text",
    "store_error",
    "written_beside",
]

# RunWriter._atomic's names: TOKEN-folder-file; before tokens (hofcat < 0.9) folder-file of a part or manifest
_TEMP = re.compile(r"^([0-9a-f]{8}-.+|(responses|failures|prompts|answers)-part-\d+\.parquet|.+-manifest\.json)$")


def _foreign(path: Path | str, mode: int) -> RunDirError:
    what = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file or folder"
    return RunDirError(
        f"{path}: is {what}; hofcat does not follow links or open special files inside a run directory "
        "(remove it or use another directory)"
    )


def _below(root: Path, path: Path) -> list[str]:
    """The paths from ``root``'s first child down to ``path`` (``path`` must lie under ``root``), as strings:
    cut from ``path``'s own text (pathlib's ``relative_to`` and ``joinpath`` cost ~0.1 ms per commit)."""
    top, end = str(root), str(path)
    head = top if top.endswith(os.sep) else top + os.sep
    if not end.startswith(head):  # ``path`` is ``root``, lies elsewhere, or ``root`` is "." : pathlib decides
        rel = path.relative_to(root)
        return [str(root.joinpath(*rel.parts[: i + 1])) for i in range(len(rel.parts))]
    steps, at = [], head
    for part in end[len(head) :].split(os.sep):
        steps.append(at + part)
        at += part + os.sep
    return steps


def checked(root: Path, path: Path, *, file: bool = True) -> Path:
    """``path`` after checking that no component below ``root`` is a link or a special file (missing ones are
    fine) and every folder on the way is one. ``RunDirError`` naming the first foreign entry. (``file`` only
    documents what the caller expects at the end.)"""
    steps = _below(root, path)
    for i, step in enumerate(steps):
        try:
            mode = os.lstat(step).st_mode
        except FileNotFoundError:
            return path
        except OSError as exc:
            raise RunDirError(f"{step}: cannot be read ({exc.strerror})") from None
        # a link or a special file anywhere, or a file where a folder belongs; a folder in a file's place fails
        # later with the system's own error (IsADirectoryError), which names it
        if stat.S_ISLNK(mode) or not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise _foreign(step, mode)
        if i < len(steps) - 1 and not stat.S_ISDIR(mode):
            raise RunDirError(f"{step}: is a file where hofcat keeps a folder; move it away")
    return path


def ensure_dir(root: Path, folder: Path) -> Path:
    """``folder`` under ``root``, created if missing, after checking that no component is a link (``RunDirError``
    naming it; a regular file in the way raises ``FileExistsError``, an ``OSError``)."""
    checked(root, folder, file=False)
    for step in _below(root, folder):
        with contextlib.suppress(FileExistsError):
            os.mkdir(step)
    return checked(root, folder, file=False)


def _open(path: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open`` without following a link at the last component (``RunDirError`` naming it)."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the last component is a link
            raise _foreign(path, stat.S_IFLNK) from None
        raise


def open_read(root: Path, path: Path) -> IO[bytes]:
    """``path`` under ``root`` opened for reading (a regular file, no link on the way); ``OSError`` when
    missing or unreadable, ``RunDirError`` for a foreign entry."""
    checked(root, path)
    fd = _open(path, os.O_RDONLY | os.O_NONBLOCK)  # O_NONBLOCK: a FIFO put in a file's place does not hang us
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _foreign(path, mode)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_bytes(root: Path, path: Path) -> bytes:
    """The bytes of ``path`` under ``root`` (see ``open_read``)."""
    with open_read(root, path) as fh:
        return fh.read()


def read_text(root: Path, path: Path) -> str:
    """The UTF-8 text of ``path`` under ``root`` (see ``open_read``; ``UnicodeDecodeError`` is a ``ValueError``)."""
    return read_bytes(root, path).decode("utf-8")


def create_new(root: Path, path: Path) -> None:
    """Create ``path`` under ``root`` as a new empty regular file of ours: a leftover regular file of that name
    is replaced, a link or special file refused (``RunDirError``)."""
    checked(root, path)
    with contextlib.suppress(FileNotFoundError):
        mode = os.lstat(path).st_mode
        if not stat.S_ISREG(mode):
            raise _foreign(path, mode)
        os.unlink(path)
    os.close(_open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))


def clear_temp(root: Path, folder: Path) -> int:
    """Delete hofcat's leftover temp files in ``folder`` (regular files named as ``RunWriter`` names them);
    links, folders and other names are left alone. The number deleted."""
    checked(root, folder, file=False)
    try:
        fd = _open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return 0
    deleted = 0
    try:
        for entry in _entries(fd):
            if _TEMP.match(entry.name) and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.name, dir_fd=fd)
                    deleted += 1
    finally:
        os.close(fd)
    return deleted


def _entries(fd: int) -> Iterator[os.DirEntry]:
    with os.scandir(fd) as it:
        yield from list(it)


def store_error(exc: OSError, what: str) -> RunDirError:
    """A one-line ``RunDirError`` for a failed write: ``what`` and the system's reason (a full disk named)."""
    if exc.errno == errno.ENOSPC:
        return RunDirError(f"{what}: no space left on device")
    reason = exc.strerror or type(exc).__name__
    return RunDirError(f"{what}: {reason}" + (f" ({exc.filename})" if exc.filename else ""))


def arrow_path(path: Path, what: str) -> Path:
    """``path`` if Arrow and Polars can write under it, else an ``InputError`` naming it and ``what`` it is.

    They take paths as UTF-8: a name of other bytes (which Python keeps as surrogates) failed inside them with a
    traceback, in ``hofcat run`` only at the first flush, after requests were sent."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        raise InputError(f"{what} {shown}: the path is not UTF-8; hofcat's Parquet writers need UTF-8 paths") from None
    return path


def output_file(target: Path) -> Path:
    """``--out``: a new file or a regular file to replace; a directory, a link or a special file (a FIFO, a
    device such as /dev/stdout) is refused, since replacing it would remove or bypass what it is."""
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return target
    except OSError as exc:
        raise InputError(f"--out {target}: cannot be read ({exc.strerror})") from None
    if stat.S_ISDIR(mode):
        raise InputError(f"--out {target}: is a directory; --out names the file to write")
    if stat.S_ISLNK(mode):
        raise InputError(f"--out {target}: is a symbolic link; name the file itself (hofcat does not replace links)")
    if not stat.S_ISREG(mode):
        raise InputError(f"--out {target}: is not a regular file (a device, FIFO or socket); name a file")
    return target


@contextlib.contextmanager
def written_beside(target: Path) -> Iterator[Path]:
    """A new temp file beside ``target`` (never a link: created exclusively), renamed onto it when the block
    succeeds, removed when it fails."""
    arrow_path(target, "--out")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        create_new(target.parent, tmp)
    except OSError as exc:
        raise store_error(exc, f"--out {target}: cannot write beside it") from None
    try:
        yield tmp
        tmp.replace(target)
    finally:
        if tmp.is_file() and not tmp.is_symlink():
            tmp.unlink()
