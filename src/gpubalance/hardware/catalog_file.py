"""Reading catalog YAML files and merging a user's file over the shipped one (internal).

A catalog file is a mapping with one top-level key (``gpus:`` or ``models:``) whose value
maps an entry name to its fields. A user's entry whose name (or an alias) matches a
shipped entry is merged over it field by field (nested mappings merge too), so a price
file can be as small as::

    gpus:
      H100-SXM: {price_per_gpu_hour_usd: 2.10, price_source: "our contract", price_as_of: 2026-01}

A user entry with a new name adds an entry and must give every required field. Every
problem is a UserInputError naming the file, line and field.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from gpubalance.config import load_mapping, validation_error_to_user_error
from gpubalance.errors import UserInputError
from gpubalance.hardware.names import normalize_name

__all__ = ["file_stamp", "load_catalog_entries", "shipped_path"]

M = TypeVar("M", bound=BaseModel)


def shipped_path(filename: str) -> Path:
    """Path of a data file shipped in ``gpubalance.data``."""
    ref = resources.files("gpubalance.data").joinpath(filename)
    with resources.as_file(ref) as path:
        return Path(path)


def file_stamp(path: Path) -> tuple[int, int]:
    """(modification time ns, size) of ``path``, or (0, 0) when it cannot be read (the
    loader then reports the problem)."""
    try:
        st = path.stat()
    except OSError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_size)


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _read_entries(
    path: Path, key: str
) -> tuple[dict[str, dict[str, Any]], dict[tuple[str, ...], int]]:
    data, lines = load_mapping(path)
    if data is None:
        raise UserInputError("file is empty", file=path)
    if not isinstance(data, dict) or set(data) != {key}:
        found = sorted(map(str, data)) if isinstance(data, dict) else type(data).__name__
        raise UserInputError(
            f"expected a mapping with the single top-level key '{key}', found {found}",
            file=path,
            line=1,
        )
    entries = data[key]
    if entries is None:
        return {}, lines
    if not isinstance(entries, dict):
        raise UserInputError(
            f"'{key}' must map names to entries", file=path, line=lines.get((key,)), field=key
        )
    out: dict[str, dict[str, Any]] = {}
    for name, fields in entries.items():
        if not isinstance(fields, dict):
            raise UserInputError(
                "entry must be a mapping of fields",
                file=path,
                line=lines.get((key, str(name))),
                field=f"{key}.{name}",
            )
        if "name" in fields and str(fields["name"]) != str(name):
            raise UserInputError(
                f"field 'name' ({fields['name']!r}) differs from the entry key {name!r}",
                file=path,
                line=lines.get((key, str(name), "name")),
                field=f"{key}.{name}.name",
            )
        out[str(name)] = fields
    return out, lines


def load_catalog_entries(
    model: type[M], key: str, shipped_file: str, user_path: str | Path | None
) -> dict[str, M]:
    """Validated entries, shipped first then the user's (merged or added), by canonical name.

    ``model`` must have a ``name`` field and an ``aliases`` list field.
    """
    sources: list[tuple[Path, dict[str, dict[str, Any]], dict[tuple[str, ...], int]]] = []
    shipped = shipped_path(shipped_file)
    sources.append((shipped, *_read_entries(shipped, key)))
    if user_path is not None:
        up = Path(user_path)
        sources.append((up, *_read_entries(up, key)))

    raw: dict[str, dict[str, Any]] = {}
    origin: dict[str, tuple[Path, dict[tuple[str, ...], int], str]] = {}
    lookup: dict[str, str] = {}  # normalized name or alias -> canonical
    for path, entries, lines in sources:
        for name, fields in entries.items():
            target = lookup.get(normalize_name(name))
            if target is None:
                for alias in fields.get("aliases") or []:
                    target = lookup.get(normalize_name(str(alias)))
                    if target is not None:
                        break
            if target is None:
                raw[name] = dict(fields)
                target = name
            else:
                raw[target] = _deep_merge(raw[target], fields)
            origin[target] = (path, lines, name)
            for label in (target, *(raw[target].get("aliases") or [])):
                lookup.setdefault(normalize_name(str(label)), target)

    out: dict[str, M] = {}
    for canonical, fields in raw.items():
        path, lines, entry_key = origin[canonical]
        try:
            out[canonical] = model.model_validate({**fields, "name": canonical})
        except ValidationError as exc:
            prefixed = {loc[2:]: line for loc, line in lines.items() if loc[:2] == (key, entry_key)}
            err = validation_error_to_user_error(exc, file=path, lines=prefixed)
            raise UserInputError(
                err.message,
                file=path,
                line=err.line if err.line is not None else lines.get((key, entry_key)),
                field=f"{key}.{entry_key}" + (f".{err.field}" if err.field else ""),
            ) from None
    return out
