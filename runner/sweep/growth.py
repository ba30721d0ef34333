"""Growing a sweep in place: a spec that only adds cells reruns into the run directory its first spec made.

A cell's key is the hash of everything that defines its request (``plan.cell_key``), so a new spec keeps the
meaning of every stored cell exactly when every stored key — replies and failures alike — is still a key of
its plan. Adding seeds, personas, languages, questions, endpoints or sampling values does that; removing or
changing one (a model, the master seed that shuffles options, a template) does not. ``check_growth`` decides
by the keys themselves and, when it refuses, says which spec keys changed and how to start a new run instead.
The run directory's writer then records the new spec and keeps every earlier one (``spec_history``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.errors import RunDirError
from runner.rundir import stored_key_columns
from runner.sweep.plan import iter_keys
from runner.sweep.spec import Spec

__all__ = ["check_growth", "spec_changes"]

SHOWN_CHANGES = 4  # spec changes named in a refusal


def check_growth(spec: Spec, run_dir: str | Path, stored: dict[str, Any]) -> None:
    """Return when ``spec`` may replace the spec of the run directory ``run_dir`` (whose manifest is ``stored``):
    every stored cell's key is a key of ``spec``'s plan. Otherwise ``RunDirError`` naming the changes.

    Walks the new plan's keys once, stopping as soon as every stored key was met (memory: the stored keys)."""
    done, failed = stored_key_columns(run_dir)
    left = set(done.to_pylist()) | set(failed.to_pylist())
    total = len(left)
    for key in iter_keys(spec) if left else ():
        left.discard(key)
        if not left:
            break
    if not left:
        return
    # what changed stored cells first; what only added cells after
    changes = sorted(spec_changes(stored.get("spec") or {}, spec.raw), key=lambda c: " gained " in c or "added" in c)
    more = f"; … {len(changes) - SHOWN_CHANGES} more" if len(changes) > SHOWN_CHANGES else ""
    what = "; ".join(changes[:SHOWN_CHANGES]) + more or "the templates or hofcat's version changed their keys"
    raise RunDirError(
        f"{run_dir}: this spec (hash {spec.spec_hash}) changes what {len(left):,} of the {total:,} stored cells "
        f"are, not only adds cells to the run's (hash {stored.get('spec_hash')}): {what}; a run grows only by "
        "added seeds, personas, languages, questions, endpoints or sampling values — start a new run with --out "
        f"NEW_DIR, and analyse both as one design with `hofcat analyze {run_dir} NEW_DIR --out DIR`"
    )


def spec_changes(old: Any, new: Any, where: str = "") -> list[str]:
    """What differs between two parsed specs, one short phrase per changed key: added and removed list values,
    added and removed keys, changed values (``spec_from_dict``'s input; endpoints matched by name)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new), key=str):
            at = f"{where}.{key}".lstrip(".")
            if key not in new:
                out.append(f"{at} removed (was {_short(old[key])})")
            elif key not in old:
                out.append(f"{at} = {_short(new[key])} added")
            else:
                out.extend(spec_changes(old[key], new[key], at))
        return out
    if where == "endpoints" and isinstance(old, list) and isinstance(new, list):
        return _endpoint_changes(old, new)
    if isinstance(old, list) and isinstance(new, list):
        gone = [x for x in old if x not in new]
        added = [x for x in new if x not in old]
        out = [f"{where} lost {_short(gone)}"] if gone else []
        return out + ([f"{where} gained {_short(added)}"] if added else [])
    return [] if old == new else [f"{where}: {_short(old)} → {_short(new)}"]


def _endpoint_changes(old: list[Any], new: list[Any]) -> list[str]:
    """Endpoint tables matched by name: removed ones, added ones, and each kept one's changes."""

    def named(tables: list[Any]) -> dict[str, Any]:
        return {str(t.get("name")) if isinstance(t, dict) else str(i): t for i, t in enumerate(tables)}

    before, after = named(old), named(new)
    out = [f"endpoint {name!r} removed" for name in before if name not in after]
    out += [f"endpoint {name!r} added" for name in after if name not in before]
    for name in before:
        if name in after:
            out.extend(spec_changes(before[name], after[name], f"endpoints[{name}]"))
    return out


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
