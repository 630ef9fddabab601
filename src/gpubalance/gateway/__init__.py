"""OpenAI-compatible routing gateway over GPU pools (layer 3).

A plain ASGI app (:class:`GatewayApp`) run by uvicorn; routing uses the shared
:mod:`gpubalance.route` policy objects, pool rules and admission caps.
"""

from gpubalance.gateway.app import GatewayApp, hash_key
from gpubalance.gateway.config import GatewayConfig, load_gateway_config
from gpubalance.gateway.server import serve

__all__ = ["GatewayApp", "GatewayConfig", "hash_key", "load_gateway_config", "serve"]
