"""A Ray worker's writer of the run directory its driver holds locked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.errors import RunDirError
from runner.rundir import RunDir, RunWriter, column, read_manifest, store_error


class ShardWriter(RunWriter):
    """A secondary writer of a run directory its driver holds locked: commits parts under its own token, never
    the manifest, the lock or the temp folder's cleanup (those are the driver session's)."""

    @classmethod
    def secondary(
        cls, run_dir: str | Path, *, batch_rows: int, session: int | None, prompts: bool = True
    ) -> ShardWriter:
        """Open ``run_dir`` (made by the driver) to add parts stamped with session ``session``; ``prompts``:
        read the stored prompt hashes, so each prompt is stored once."""
        layout = RunDir(Path(run_dir))
        if not layout.manifest.exists():
            raise RunDirError(
                f"{layout.root}: no run directory here; with --ray it must be reachable at this path from every "
                "node (a shared filesystem)"
            )
        seen = set(column(layout, "prompts", "prompt_hash")) if prompts else set()
        writer = cls(layout, None, read_manifest(layout.root), batch_rows, seen)  # type: ignore[arg-type]
        writer.session = session
        return writer

    def write_manifest(self) -> None:
        """Never: the driver alone writes the manifest."""
        raise RunDirError(f"{self.layout.root}: a Ray worker does not write the manifest")

    def close(self, session: dict[str, Any] | None = None) -> None:
        """Commit what is buffered (there is no lock to release)."""
        try:
            self.flush()
        except OSError as exc:
            raise store_error(exc, f"{self.layout.root}: cannot write the buffered rows") from None
