"""judge-reward as a reward-model service: a FastAPI server around one judge, and its clients.

* :func:`create_app` / :func:`serve` (``judge-reward serve``): OpenRLHF's ``POST /get_reward``,
  a native ``POST /v1/score``, ``/health``, ``/ready``, ``/metrics``; dynamic batching of
  concurrent requests into full judge batches; a bounded queue (503 + Retry-After when full).
* :class:`ServiceRewardFunction`: a TRL ``reward_funcs`` entry that gets its rewards from the service.
* :class:`JudgeServiceClient`: the async client underneath, with timeouts and retries.
"""

from importlib import import_module

from .batcher import BatchInfo, DynamicBatcher, ServiceUnavailable
from .config import ServiceConfig, ServiceRewardConfig

__all__ = [
    "BatchInfo", "DynamicBatcher", "JudgeServiceClient", "RemoteScore", "ServiceConfig", "ServiceError",
    "ServiceRewardConfig", "ServiceRewardFunction", "ServiceUnavailable", "ServerThread", "create_app", "serve",
]
# Loaded on first use: the client needs httpx, the server FastAPI and uvicorn (the ``serve`` extra),
# and ``judge-reward``'s other commands must work without them.
_LAZY = {
    "JudgeServiceClient": "client", "RemoteScore": "client", "ServiceError": "client",
    "ServiceRewardFunction": "client", "create_app": "app", "serve": "server", "ServerThread": "server",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(name)
