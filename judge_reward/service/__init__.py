"""judge-reward as a reward-model service: a FastAPI server around one judge, and its clients.

* :func:`create_app` / :func:`serve` (``judge-reward serve``): OpenRLHF's ``POST /get_reward``,
  a native ``POST /v1/score``, ``/health``, ``/ready``, ``/metrics``; dynamic batching of
  concurrent requests into full judge batches; a bounded queue (503 + Retry-After when full).
* :class:`ServiceRewardFunction`: a TRL ``reward_funcs`` entry that gets its rewards from the service.
* :class:`JudgeServiceClient`: the async client underneath, with timeouts and retries.
"""

from .batcher import BatchInfo, DynamicBatcher, ServiceUnavailable
from .client import JudgeServiceClient, RemoteScore, ServiceError, ServiceRewardFunction
from .config import ServiceConfig, ServiceRewardConfig

__all__ = [
    "BatchInfo", "DynamicBatcher", "JudgeServiceClient", "RemoteScore", "ServiceConfig", "ServiceError",
    "ServiceRewardConfig", "ServiceRewardFunction", "ServiceUnavailable", "ServerThread", "create_app", "serve",
]


def __getattr__(name):
    # FastAPI and uvicorn load only when a server is built, not for the client.
    if name == "create_app":
        from .app import create_app

        return create_app
    if name in ("serve", "ServerThread"):
        from . import server

        return getattr(server, name)
    raise AttributeError(name)
