"""Name -> object registries that fail loudly on unknown and duplicate names.

Unknown names raise :class:`~gpubalance.errors.UserInputError` with the nearest known
names as a suggestion, so a CLI typo gets a one-line answer instead of a KeyError.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from gpubalance.errors import UserInputError

__all__ = ["Registry", "suggest"]

T = TypeVar("T")


def suggest(name: str, known: list[str] | tuple[str, ...]) -> str:
    """Return ' (did you mean X?)' for the closest of ``known`` to ``name``, or ''."""
    lowered = {k.lower(): k for k in known}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.5)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(lowered[c]) for c in close) + "?)"


class Registry(Generic[T]):
    """A case-insensitive registry of named objects of one kind (e.g. partition policies)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> T:
        """Add ``item`` under ``name``; a name already taken raises ``ValueError``."""
        key = name.lower()
        if key in self._items:
            raise ValueError(f"duplicate {self.kind} name {name!r}")
        self._items[key] = item
        return item

    def decorator(self, name: str) -> Callable[[T], T]:
        """Register the decorated object under ``name``."""

        def wrap(item: T) -> T:
            return self.register(name, item)

        return wrap

    def get(self, name: str) -> T:
        """Return the object named ``name``; unknown names raise UserInputError."""
        try:
            return self._items[name.lower()]
        except KeyError:
            known = sorted(self._items)
            raise UserInputError(
                f"unknown {self.kind} {name!r}{suggest(name, known)}; known: {', '.join(known)}"
            ) from None

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)
