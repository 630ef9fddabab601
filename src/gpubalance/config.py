"""Loading YAML/JSON files into pydantic models with errors that name file, line and field.

Every configuration file in gpubalance (gateway config, catalogs, price files, cost
profiles) goes through :func:`load_model`, so a typo anywhere gives the same kind of
one-line message: ``gateway.yaml:12: field 'pools.0.backends.1.url': Field required``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from gpubalance.errors import UserInputError

__all__ = ["load_mapping", "load_model", "validate_model", "validation_error_to_user_error"]

M = TypeVar("M", bound=BaseModel)


def _line_index(node: yaml.Node, path: tuple[str, ...], out: dict[tuple[str, ...], int]) -> None:
    """Record the 1-based line of every mapping key / sequence item under ``node``."""
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = (*path, str(key_node.value))
            out[key] = key_node.start_mark.line + 1
            _line_index(value_node, key, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _line_index(item, (*path, str(i)), out)


def load_mapping(path: str | Path) -> tuple[Any, dict[tuple[str, ...], int]]:
    """Parse a YAML (or JSON, which is YAML) file; return (data, {field path: line}).

    Raises UserInputError naming the file and line for unreadable or malformed files.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserInputError("file not found", file=p) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserInputError(f"cannot read file: {exc}", file=p) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = None if mark is None else mark.line + 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserInputError(f"malformed YAML/JSON: {problem}", file=p, line=line) from None
    lines: dict[tuple[str, ...], int] = {}
    if node is not None:
        _line_index(node, (), lines)
    return data, lines


def validation_error_to_user_error(
    exc: ValidationError,
    *,
    file: str | Path | None = None,
    lines: dict[tuple[str, ...], int] | None = None,
) -> UserInputError:
    """Turn the first pydantic error into a UserInputError with file, line and field."""
    first = exc.errors()[0]
    loc = tuple(str(part) for part in first["loc"])
    line = None
    if lines:
        for cut in range(len(loc), -1, -1):
            if loc[:cut] in lines:
                line = lines[loc[:cut]]
                break
    more = len(exc.errors()) - 1
    suffix = f" (and {more} more error{'s' if more > 1 else ''})" if more else ""
    return UserInputError(
        f"{first['msg']}{suffix}", file=file, line=line, field=".".join(loc) or None
    )


def validate_model(model: type[M], data: Any, *, source: str | None = None) -> M:
    """Validate in-memory ``data`` (e.g. CLI flags) into ``model``; errors become UserInputError."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_error_to_user_error(exc, file=source) from None


def load_model(model: type[M], path: str | Path) -> M:
    """Load a YAML/JSON file into ``model``; any problem is a UserInputError with its line."""
    data, lines = load_mapping(path)
    if data is None:
        raise UserInputError("file is empty", file=path)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_error_to_user_error(exc, file=path, lines=lines) from None


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` via a temporary file and a rename, so readers never see a
    half-written file and a failed write leaves the old one intact."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(p)
    return p


def save_model(model: BaseModel, path: str | Path) -> Path:
    """Write a pydantic model as YAML (``.yaml``/``.yml``) or JSON (anything else), atomically;
    :func:`load_model` reads it back."""
    p = Path(path)
    data = model.model_dump(mode="json")
    text = (
        yaml.safe_dump(data, sort_keys=False)
        if p.suffix.lower() in {".yaml", ".yml"}
        else json.dumps(data, indent=2) + "\n"
    )
    return write_text_atomic(p, text)
