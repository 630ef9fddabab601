"""User-facing errors.

A :class:`UserInputError` is raised for anything the user can fix (a bad file, an unknown
name, an impossible option). The CLI prints it as one line and exits with code 2; it never
shows a traceback for these.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["UserInputError", "format_location"]


def format_location(
    file: str | Path | None = None, line: int | None = None, field: str | None = None
) -> str:
    """Return ``file:line: field`` with the missing parts left out ('' when all are None)."""
    parts: list[str] = []
    if file is not None:
        parts.append(str(file) if line is None else f"{file}:{line}")
    elif line is not None:
        parts.append(f"line {line}")
    if field is not None:
        parts.append(f"field '{field}'")
    return ": ".join(parts)


class UserInputError(ValueError):
    """Bad input the user can fix; carries where it was found (file, 1-based line, field)."""

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.file = None if file is None else str(file)
        self.line = line
        self.field = field
        where = format_location(file, line, field)
        super().__init__(f"{where}: {message}" if where else message)
