"""Console entry point: runs the Typer app and turns user errors into one line + exit 2."""

from __future__ import annotations

import sys

from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from gpubalance.config import validation_error_to_user_error
from gpubalance.errors import UserInputError


def main(argv: list[str] | None = None) -> None:
    """Run the CLI. User errors print ``error: <where>: <what>`` on stderr and exit 2."""
    from gpubalance.cli.app import app

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        app(args=argv, prog_name="gpubalance", standalone_mode=True)
    except UserInputError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True)
        sys.exit(2)
    except ValidationError as exc:
        msg = escape(str(validation_error_to_user_error(exc)))
        err.print(f"[bold red]error:[/] {msg}", markup=True)
        sys.exit(2)
    except BrokenPipeError:  # e.g. `gpubalance ... --json | head`
        sys.exit(0)


if __name__ == "__main__":  # pragma: no cover
    main()
