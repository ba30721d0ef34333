"""Reading a small user CSV as text: bounded in size, UTF-8 (a BOM allowed), every failure one located line."""

from __future__ import annotations

from pathlib import Path

from runner.errors import InputFileError

__all__ = ["read_csv_text"]


def read_csv_text(path: Path, *, max_bytes: int, expected: str) -> str:
    """``path`` as text of at most ``max_bytes``, else an error naming it; ``expected`` is e.g. "a means CSV"."""
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise InputFileError(path, None, None, f"{size} bytes", f"{expected} of at most {max_bytes} bytes")
        data = path.read_bytes()
    except OSError as exc:
        raise InputFileError(path, None, None, f"cannot be read ({exc.strerror})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputFileError(
            path, line, None, f"byte 0x{data[exc.start]:02x} is not UTF-8 text", "a UTF-8 encoded CSV"
        ) from None
