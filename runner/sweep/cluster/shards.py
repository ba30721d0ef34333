"""Which cells are whose: shards of the plan by cell key, and shares of an endpoint's request slots."""

from __future__ import annotations

from collections.abc import Iterable

from runner.sweep.plan import PlannedCell
from runner.sweep.spec import EndpointConfig


def shard_of(key: str, shards: int) -> int:
    """The shard (0 … ``shards`` − 1) of a cell key: its first 16 hex digits modulo ``shards``."""
    return int(key[:16], 16) % shards


def shares(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal integers summing to it (each at least 1)."""
    return [max(1, total // parts + (i < total % parts)) for i in range(parts)]


def deal(work: list[tuple[EndpointConfig, Iterable[PlannedCell]]], shards: int) -> list[dict[str, int]]:
    """Per shard, per endpoint: how many of the cells without an outcome are its (walks the plan once)."""
    planned: list[dict[str, int]] = [{} for _ in range(shards)]
    for endpoint, cells in work:
        for cell in cells:
            mine = planned[shard_of(cell.key, shards)]
            mine[endpoint.name] = mine.get(endpoint.name, 0) + 1
    return planned


def of_shard(cells: Iterable[PlannedCell], shard: int, shards: int) -> Iterable[PlannedCell]:
    """The cells of ``cells`` whose key belongs to ``shard`` (lazy); an empty tuple stays one."""
    if isinstance(cells, tuple | list) and not cells:
        return cells
    return (c for c in cells if shard_of(c.key, shards) == shard)
