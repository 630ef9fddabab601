"""`gpubalance serve`: the cost-aware OpenAI-compatible routing gateway."""

from __future__ import annotations

import secrets
import sys
from pathlib import Path

import typer


def serve(
    config: str = typer.Argument(
        ..., help="Gateway YAML config, or the word 'hash-key' to hash an API key."
    ),
    key: str | None = typer.Argument(
        None, help="With 'hash-key': the key to hash ('-' reads stdin; omitted: a new key)."
    ),
    host: str | None = typer.Option(None, help="Listen address (overrides the config)."),
    port: int | None = typer.Option(None, help="Listen port (overrides the config)."),
    check: bool = typer.Option(False, "--check", help="Validate the config and exit."),
) -> None:
    """Run the gateway: `gpubalance serve gateway.yaml` (SIGHUP reloads the file).

    `gpubalance serve hash-key [KEY]` prints the sha256 to put in `auth.api_keys` or
    `auth.admin_key_sha256` (without KEY it makes a new random key and prints both).
    """
    from gpubalance.gateway.app import hash_key

    if config == "hash-key":
        if key == "-":
            key = sys.stdin.readline().strip()
        if key is None:
            key = "gpb-" + secrets.token_urlsafe(24)
            typer.echo(f"key:    {key}")
            typer.echo(f"sha256: {hash_key(key)}")
        else:
            typer.echo(hash_key(key))
        return
    from gpubalance.gateway.config import load_gateway_config
    from gpubalance.gateway.server import serve as run_server

    cfg = load_gateway_config(Path(config))
    if check:
        typer.echo(f"ok: {len(cfg.pools)} pool(s), {sum(len(p.backends) for p in cfg.pools)} "
                   f"backend(s), {len(cfg.rules)} rule(s)")  # fmt: skip
        return
    run_server(cfg, config_path=Path(config), host=host, port=port)
