"""Settings of the reward service and of its client, as dataclasses (like TRL's configs)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..aspects import ConfigError
from ..reward import NORMALISATIONS

# Strings OpenRLHF leaves in its decoded queries (it decodes with special tokens kept).
DEFAULT_STRIP_TOKENS = (
    "<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|begin_of_text|>",
    "<end_of_turn>", "<eos>", "<bos>", "<pad>", "</s>", "<s>",
)


@dataclass
class ServiceConfig:
    """How the reward service listens, batches and protects itself."""

    host: str = "127.0.0.1"
    """Interface to bind. Loopback by default; bind a public interface only with ``token`` set."""
    port: int = 8080
    max_batch_size: int = 64
    """Items per ``judge.score`` call. Concurrent requests are merged up to this many items."""
    max_wait_ms: float = 10.0
    """How long the oldest queued request may wait for others to fill its batch."""
    max_queue_items: int = 4096
    """Items waiting for the judge, at most. A request that would exceed it gets 503 + Retry-After."""
    max_request_items: int = 1024
    """Items (or OpenRLHF queries) in one request, at most (413 above)."""
    max_body_bytes: int = 16 * 1024 * 1024
    """Request body size limit in bytes (413 above); bodies are never buffered beyond it."""
    max_text_chars: int = 200_000
    """Characters in one text field (source, output, reference, query), at most (422 above)."""
    max_connections: int = 1024
    """Concurrent connections uvicorn accepts before answering 503 itself."""
    keep_alive_s: int = 75
    """How long an idle keep-alive connection stays open. Longer than the clients' own idle expiry
    (httpx: 5 s, nginx upstreams: 60 s), so a client never reuses a connection the server is
    closing at that moment (uvicorn's default of 5 s equals httpx's: requests got reset)."""
    token: str | None = None
    """Bearer token every request except ``/health`` and ``/ready`` must carry (``None``: no auth)."""
    reward_weights: dict[str, float] | None = None
    """Override of the judge config's ``reward.weights`` (``None``: the config's; equal weights when
    it has none). The reward itself is :class:`judge_reward.reward.Reward`'s, as in training."""
    normalise: str | None = None
    """Override of the judge config's ``reward.normalise`` (``none``, ``unit``, ``scale``; ``None``: the config's)."""
    failure_reward: float = 0.0
    """What ``/get_reward`` reports for an item the judge failed on: OpenRLHF needs a number. The
    item is also flagged in ``extra_logs.judge_failed`` and its reason is in ``failures``."""
    strip_tokens: tuple[str, ...] = DEFAULT_STRIP_TOKENS
    """Special-token strings removed from OpenRLHF queries and prompts before judging."""
    torch_threads: int | None = None
    """Intra-op threads for a local (torch) judge, set in the worker before loading (``None``: torch's
    default). On a CPU shared with other jobs, fewer threads than cores is often much faster."""
    graceful_timeout_s: float = 30.0
    """On SIGTERM: how long in-flight requests may take to finish before they are cancelled."""
    log_level: str = "info"

    def __post_init__(self):
        for name in ("max_batch_size", "max_queue_items", "max_request_items", "max_body_bytes",
                     "max_text_chars", "max_connections"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name}: expected a positive integer, got {value!r}")
        if not isinstance(self.keep_alive_s, int) or isinstance(self.keep_alive_s, bool) or self.keep_alive_s < 1:
            raise ConfigError(f"keep_alive_s: expected a positive integer of seconds, got {self.keep_alive_s!r}")
        if not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ConfigError(f"port: expected 0..65535, got {self.port!r}")
        if not isinstance(self.max_wait_ms, (int, float)) or self.max_wait_ms < 0:
            raise ConfigError(f"max_wait_ms: expected a number >= 0, got {self.max_wait_ms!r}")
        if self.max_queue_items < self.max_request_items:
            raise ConfigError(
                f"max_queue_items: {self.max_queue_items} is below max_request_items ({self.max_request_items}); "
                "a request of the largest allowed size could never be queued"
            )
        if not isinstance(self.failure_reward, (int, float)) or not math.isfinite(self.failure_reward):
            raise ConfigError(f"failure_reward: expected a finite number, got {self.failure_reward!r}")
        if self.normalise is not None and self.normalise not in NORMALISATIONS:
            raise ConfigError(f"normalise: unknown value {self.normalise!r}; choose one of {NORMALISATIONS} or null")
        if self.reward_weights is not None:
            if not isinstance(self.reward_weights, dict) or not self.reward_weights:
                raise ConfigError(f"reward_weights: expected a mapping aspect -> weight, got {self.reward_weights!r}")
            for aspect, w in self.reward_weights.items():
                if not isinstance(w, (int, float)) or isinstance(w, bool) or not math.isfinite(w) or w < 0:
                    raise ConfigError(f"reward_weights.{aspect}: expected a finite weight >= 0, got {w!r}")
            if sum(self.reward_weights.values()) <= 0:
                raise ConfigError(f"reward_weights: weights sum to 0: {self.reward_weights!r}")
        if self.token is not None and (not isinstance(self.token, str) or not self.token.strip()):
            raise ConfigError("token: expected a non-empty string or None")
        if not isinstance(self.graceful_timeout_s, (int, float)) or self.graceful_timeout_s < 0:
            raise ConfigError(f"graceful_timeout_s: expected a number >= 0, got {self.graceful_timeout_s!r}")
        if self.torch_threads is not None and (not isinstance(self.torch_threads, int) or self.torch_threads < 1):
            raise ConfigError(f"torch_threads: expected a positive integer or None, got {self.torch_threads!r}")
        self.strip_tokens = tuple(self.strip_tokens)


@dataclass
class ServiceRewardConfig:
    """How a TRL reward function reaches a judge-reward service (see :class:`ServiceRewardFunction`)."""

    url: str = "http://127.0.0.1:8080"
    """The service's root URL."""
    token: str | None = None
    """Bearer token, if the service requires one."""
    aspects: list[str] | None = None
    """Aspects to score (``None``: the service's default aspects)."""
    method: str | None = None
    """``gptscore``, ``geval`` or ``rating`` (``None``: the service's default method)."""
    timeout_s: float = 120.0
    """Per-attempt timeout for one HTTP request (seconds)."""
    connect_timeout_s: float = 5.0
    retries: int = 3
    """Retries after the first attempt, for connection errors, timeouts, 429, 502, 503 and 504.
    Other errors (a 4xx: the request itself is wrong) are not retried."""
    backoff_s: float = 0.5
    """First retry delay; doubles per retry (a server's ``Retry-After`` is honoured up to ``max_backoff_s``)."""
    max_backoff_s: float = 10.0
    max_items_per_request: int = 512
    """Larger calls are split into requests of at most this many items, sent concurrently."""
    source_column: str | None = None
    """Dataset column to judge the completion against (e.g. ``article``); ``None`` uses the prompt."""
    reference_column: str | None = "reference"
    """Dataset column with a human reference, passed as ``reference`` when present."""
    name: str = "judge_service"
    """Name TRL logs the reward under (``rewards/<name>/mean``)."""
    extra: dict = field(default_factory=dict)
    """Extra keyword arguments for ``httpx.AsyncClient`` (e.g. ``verify`` for a private CA)."""

    def __post_init__(self):
        if not isinstance(self.url, str) or not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"url: expected an http(s) URL, got {self.url!r}")
        self.url = self.url.rstrip("/")
        for name in ("timeout_s", "connect_timeout_s", "backoff_s", "max_backoff_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"{name}: expected a positive number of seconds, got {value!r}")
        if not isinstance(self.retries, int) or self.retries < 0:
            raise ConfigError(f"retries: expected an integer >= 0, got {self.retries!r}")
        if not isinstance(self.max_items_per_request, int) or self.max_items_per_request < 1:
            raise ConfigError(f"max_items_per_request: expected a positive integer, got {self.max_items_per_request!r}")
        if self.aspects is not None and (
            not isinstance(self.aspects, list) or not all(isinstance(a, str) for a in self.aspects)
        ):
            raise ConfigError(f"aspects: expected a list of aspect names, got {self.aspects!r}")
