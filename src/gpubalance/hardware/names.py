"""Name lookup shared by the GPU and model catalogs (internal).

Names match case-insensitively and ignore spaces, dashes, underscores and dots, so
``"H100 SXM"``, ``"h100-sxm"`` and ``"H100_SXM"`` are one name. Each catalog entry has a
canonical name plus aliases; an unknown name raises UserInputError naming the nearest (the same
difflib closeness as :func:`gpubalance.registry.suggest`, over names and aliases).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Generic, Protocol, TypeVar

from gpubalance.errors import UserInputError

__all__ = ["NameIndex", "SpecCatalog", "normalize_name"]

T = TypeVar("T")

_DROP = re.compile(r"[\s\-_.]+")


def normalize_name(name: str) -> str:
    """Lowercase ``name`` and drop spaces, dashes, underscores and dots."""
    return _DROP.sub("", name.strip().lower())


class NameIndex(Generic[T]):
    """Canonical name -> item, findable by canonical name or alias.

    Built from ``{canonical: (aliases, item)}``. An alias that names two different entries
    raises ValueError (a catalog bug, not user input), as does a duplicate canonical name.
    """

    def __init__(self, kind: str, entries: Mapping[str, tuple[Iterable[str], T]]) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._keys: dict[str, str] = {}
        for canonical, (aliases, item) in entries.items():
            self._items[canonical] = item
            for label in (canonical, *aliases):
                key = normalize_name(label)
                owner = self._keys.get(key)
                if owner is not None and owner != canonical:
                    raise ValueError(
                        f"{kind} name {label!r} is used by both {owner!r} and {canonical!r}"
                    )
                self._keys[key] = canonical

    def canonical(self, name: str) -> str:
        """The canonical name for ``name`` or an alias of it; unknown -> UserInputError."""
        try:
            return self._keys[normalize_name(name)]
        except KeyError:
            known = list(self._items)
            raise UserInputError(
                f"unknown {self.kind} {name!r}{self.suggestion(name)}; known: {', '.join(known)}",
                field=self.kind.lower().replace(" ", "_"),
            ) from None

    def suggestion(self, name: str) -> str:
        """' (did you mean X?)' naming up to three nearest canonical names, or ''."""
        close = difflib.get_close_matches(normalize_name(name), list(self._keys), n=8, cutoff=0.5)
        picks: list[str] = []
        for key in close:
            canonical = self._keys[key]
            if canonical not in picks:
                picks.append(canonical)
        if not picks:
            return ""
        return " (did you mean " + " or ".join(repr(c) for c in picks[:3]) + "?)"

    def get(self, name: str) -> T:
        """The item called ``name`` (canonical or alias); unknown -> UserInputError."""
        return self._items[self.canonical(name)]

    def find(self, name: str) -> str | None:
        """Canonical name for ``name``, or None when unknown (no error)."""
        return self._keys.get(normalize_name(name))

    def names(self) -> list[str]:
        """Canonical names in catalog order."""
        return list(self._items)

    def items(self) -> list[tuple[str, T]]:
        """(canonical name, item) pairs in catalog order."""
        return list(self._items.items())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and normalize_name(name) in self._keys

    def __iter__(self) -> Iterator[T]:
        return iter(self._items.values())

    def __len__(self) -> int:
        return len(self._items)


class _HasAliases(Protocol):
    @property
    def aliases(self) -> list[str]: ...


S = TypeVar("S", bound=_HasAliases)


class SpecCatalog(Generic[S]):
    """Specs (GPUs, models) by canonical name; lookup by name or alias, case-insensitive.

    ``get`` of an unknown name raises UserInputError suggesting the nearest.
    """

    kind = "entry"

    def __init__(self, specs: dict[str, S]) -> None:
        self._index: NameIndex[S] = NameIndex(
            self.kind, {name: (spec.aliases, spec) for name, spec in specs.items()}
        )

    def get(self, name: str) -> S:
        """The spec called ``name`` (canonical or alias); unknown -> UserInputError."""
        return self._index.get(name)

    def names(self) -> list[str]:
        """Canonical names in catalog order."""
        return self._index.names()

    def specs(self) -> list[S]:
        """All specs in catalog order."""
        return list(self._index)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __len__(self) -> int:
        return len(self._index)
