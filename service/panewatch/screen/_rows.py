"""pyte's row buffer with an offset: a scroll of the whole screen is O(1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Rows:
    """pyte's row buffer (row index -> row) with an offset, so that a scroll of the whole
    screen is one pop and an addition instead of renumbering every row: pyte's ``index``
    moved all rows per line feed, O(rows) per byte of a ``yes`` flood (500 rows: ~1 s per
    16 KiB). Missing rows are created by ``default_factory`` as in pyte's ``defaultdict``."""

    __slots__ = ("_off", "_rows", "default_factory")

    def __init__(self, default_factory: Callable[[], Any]) -> None:
        self._rows: dict[int, Any] = {}
        self._off = 0
        self.default_factory = default_factory

    def __getitem__(self, y: int) -> Any:
        key = y + self._off
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = self.default_factory()
        return row

    def __setitem__(self, y: int, row: Any) -> None:
        self._rows[y + self._off] = row

    def __delitem__(self, y: int) -> None:
        del self._rows[y + self._off]

    def __contains__(self, y: object) -> bool:
        return isinstance(y, int) and y + self._off in self._rows

    def __iter__(self) -> Any:
        off = self._off
        return iter([key - off for key in self._rows])

    def __len__(self) -> int:
        return len(self._rows)

    def pop(self, y: int, *default: Any) -> Any:
        return self._rows.pop(y + self._off, *default)

    def get(self, y: int, default: Any = None) -> Any:
        return self._rows.get(y + self._off, default)

    def keys(self) -> list[int]:
        return list(self)

    def values(self) -> Any:
        return self._rows.values()

    def items(self) -> list[tuple[int, Any]]:
        off = self._off
        return [(key - off, row) for key, row in self._rows.items()]

    def clear(self) -> None:
        self._rows.clear()
        self._off = 0

    def scroll(self, count: int, lines: int) -> None:
        """The whole screen's content moves up ``count`` rows (down if negative)."""
        if abs(count) >= lines:
            self.clear()
            return
        gone = range(count) if count > 0 else range(lines + count, lines)
        for y in gone:
            self._rows.pop(y + self._off, None)
        self._off += count
