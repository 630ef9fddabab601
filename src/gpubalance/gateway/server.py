"""Run the gateway under uvicorn (uvloop event loop, httptools HTTP parser)."""

from __future__ import annotations

from pathlib import Path

from gpubalance.gateway.config import GatewayConfig

__all__ = ["serve"]


def serve(
    config: GatewayConfig,
    *,
    config_path: str | Path | None = None,
    host: str | None = None,
    port: int | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM; SIGHUP reloads ``config_path``."""
    import uvicorn

    from gpubalance.gateway.app import GatewayApp

    app = GatewayApp(config, config_path=config_path)
    uvicorn.run(
        app,
        host=host or config.host,
        port=config.port if port is None else port,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level="warning",
        backlog=4096,
        timeout_keep_alive=60,
    )
