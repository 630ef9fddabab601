"""Pool rules: which pool of backends serves a request (pure objects, layer 2).

A rule matches on the requested model name (exact or ``fnmatch`` glob), on the estimated
input size in tokens, on a request header value, and/or on the tenant the client key
belongs to. Rules are tried in order; the first match names the pool. The gateway calls
:meth:`PoolRules.select` once per request, so matching avoids regexes for plain names.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["PoolRule", "PoolRules"]


@dataclass(frozen=True, slots=True)
class PoolRule:
    """One routing rule; every condition given must hold (an empty condition matches all).

    Attributes:
        pool: name of the pool the request goes to when the rule matches.
        models: model names or ``fnmatch`` globs (``llama-*``); empty matches any model.
        min_input_tokens: smallest estimated input size (tokens, inclusive) that matches.
        max_input_tokens: largest estimated input size (tokens, inclusive); None = no bound.
        header: lower-case request header name to test; None = no header condition.
        header_values: accepted values of ``header``; empty = the header only has to exist.
        tenants: tenant names (from the client key) that match; empty matches any tenant.
    """

    pool: str
    models: tuple[str, ...] = ()
    min_input_tokens: int = 0
    max_input_tokens: int | None = None
    header: str | None = None
    header_values: tuple[str, ...] = ()
    tenants: tuple[str, ...] = ()
    _exact: frozenset[str] = field(init=False, repr=False, compare=False)
    _globs: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        exact = frozenset(m for m in self.models if not any(c in m for c in "*?["))
        globs = tuple(
            re.compile(fnmatch.translate(m)) for m in self.models if any(c in m for c in "*?[")
        )
        object.__setattr__(self, "_exact", exact)
        object.__setattr__(self, "_globs", globs)
        if self.header is not None:
            object.__setattr__(self, "header", self.header.lower())

    def matches(
        self,
        model: str,
        input_tokens: int,
        headers: Mapping[str, str] | None = None,
        tenant: str | None = None,
    ) -> bool:
        """Whether a request for ``model`` with ``input_tokens`` estimated input matches."""
        if (
            self.models
            and model not in self._exact
            and not any(g.match(model) for g in self._globs)
        ):
            return False
        if input_tokens < self.min_input_tokens:
            return False
        if self.max_input_tokens is not None and input_tokens > self.max_input_tokens:
            return False
        if self.header is not None:
            value = None if headers is None else headers.get(self.header)
            if value is None or (self.header_values and value not in self.header_values):
                return False
        return not (self.tenants and tenant not in self.tenants)


class PoolRules:
    """Ordered rules plus a default pool used when none matches (None = no default)."""

    def __init__(self, rules: Sequence[PoolRule], default_pool: str | None = None) -> None:
        self.rules = tuple(rules)
        self.default_pool = default_pool
        self.header_names = frozenset(r.header for r in self.rules if r.header is not None)

    def select(
        self,
        model: str,
        input_tokens: int,
        headers: Mapping[str, str] | None = None,
        tenant: str | None = None,
    ) -> str | None:
        """Name of the pool of the first matching rule, else the default pool (or None)."""
        for rule in self.rules:
            if rule.matches(model, input_tokens, headers, tenant):
                return rule.pool
        return self.default_pool
