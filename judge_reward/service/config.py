"""Settings of the reward service and of its client, as dataclasses (like TRL's configs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal, Optional, Union

from pydantic import Field

from ..config import (
    ConfigError,
    Expect,
    FiniteFloat,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Section,
)
from ..reward import NORMALISATIONS, AspectWeights, check_weights

# Strings OpenRLHF leaves in its decoded queries (it decodes with special tokens kept).
DEFAULT_STRIP_TOKENS = (
    "<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|begin_of_text|>",
    "<end_of_turn>", "<eos>", "<bos>", "<pad>", "</s>", "<s>",
)


@dataclass
class ServiceConfig(Section):
    """How the reward service listens, batches and protects itself."""

    host: str = "127.0.0.1"
    """Interface to bind. Loopback by default; bind a public interface only with ``token`` set."""
    port: Annotated[int, Field(ge=0, le=65535), Expect("0..65535")] = 8080
    max_batch_size: PositiveInt = 64
    """Items per ``judge.score`` call. Concurrent requests are merged up to this many items."""
    max_wait_ms: NonNegativeFloat = 10.0
    """How long the oldest queued request may wait for others to fill its batch."""
    max_queue_items: PositiveInt = 4096
    """Items waiting for the judge, at most. A request that would exceed it gets 503 + Retry-After."""
    max_request_items: PositiveInt = 1024
    """Items (or OpenRLHF queries) in one request, at most (413 above)."""
    max_body_bytes: PositiveInt = 16 * 1024 * 1024
    """Request body size limit in bytes (413 above); bodies are never buffered beyond it."""
    max_text_chars: PositiveInt = 200_000
    """Characters in one text field (source, output, reference, query), at most (422 above)."""
    max_connections: PositiveInt = 1024
    """Concurrent connections uvicorn accepts before answering 503 itself."""
    keep_alive_s: Annotated[int, Field(ge=1), Expect("a positive integer of seconds")] = 75
    """How long an idle keep-alive connection stays open. Longer than the clients' own idle expiry
    (httpx: 5 s, nginx upstreams: 60 s), so a client never reuses a connection the server is
    closing at that moment (uvicorn's default of 5 s equals httpx's: requests got reset)."""
    token: Optional[str] = None
    """Bearer token every request except ``/health`` and ``/ready`` must carry (``None``: no auth)."""
    reward_weights: Optional[AspectWeights] = None
    """Override of the judge config's ``reward.weights`` (``None``: the config's; equal weights when
    it has none). The reward itself is :class:`judge_reward.reward.Reward`'s, as in training."""
    normalise: Optional[Literal[NORMALISATIONS]] = None
    """Override of the judge config's ``reward.normalise`` (``none``, ``unit``, ``scale``; ``None``: the config's)."""
    failure_reward: Union[FiniteFloat, Literal["lowest"]] = "lowest"
    """What ``/get_reward`` reports for an item the judge failed on (OpenRLHF needs a number):
    ``lowest``, the lowest reward among the same request's judged items (else the lowest this
    server has returned), so an output the judge cannot score (an empty one) never outscores one
    it can; or a fixed number, which must sit below the config's rewards for the same reason. The
    item is also flagged in ``extra_logs.judge_failed`` and its reason is in ``failures``."""
    strip_tokens: tuple[str, ...] = DEFAULT_STRIP_TOKENS
    """Special-token strings removed from OpenRLHF queries and prompts before judging."""
    torch_threads: Optional[PositiveInt] = None
    """Intra-op threads for a local (torch) judge, set in the worker before loading (``None``: torch's
    default). On a CPU shared with other jobs, fewer threads than cores is often much faster."""
    graceful_timeout_s: NonNegativeFloat = 30.0
    """On SIGTERM: how long in-flight requests may take to finish before they are cancelled."""
    log_level: str = "info"

    def check(self) -> None:
        if self.max_queue_items < self.max_request_items:
            raise ConfigError(
                f"{self.max_queue_items} is below max_request_items ({self.max_request_items}); "
                "a request of the largest allowed size could never be queued", field="max_queue_items",
            )
        check_weights(self.reward_weights, "reward_weights")
        if self.token is not None and not self.token.strip():
            raise ConfigError("expected a non-empty string or None", field="token")
        self.strip_tokens = tuple(self.strip_tokens)


@dataclass
class ServiceRewardConfig(Section):
    """How a TRL reward function reaches a judge-reward service (see :class:`ServiceRewardFunction`)."""

    url: str = "http://127.0.0.1:8080"
    """The service's root URL (one replica; see ``urls`` for several)."""
    urls: Optional[list[str]] = None
    """Root URLs of several replicas of the service (used instead of ``url``). Each request goes to
    the replica with the fewest requests in flight from this client (round-robin among equals); a
    connection error, timeout or 5xx (a 503 from a draining or full replica included) sends the
    retry at once to another replica, and the failed one is skipped for ``replica_cooldown_s``."""
    replica_cooldown_s: NonNegativeFloat = 5.0
    """How long a replica that failed is skipped while others are available (a ``Retry-After`` it
    sent counts instead, up to ``max_backoff_s``)."""
    token: Optional[str] = None
    """Bearer token, if the service requires one."""
    aspects: Optional[list[str]] = None
    """Aspects to score (``None``: the service's default aspects)."""
    method: Optional[str] = None
    """``gptscore``, ``geval`` or ``rating`` (``None``: the service's default method)."""
    timeout_s: PositiveFloat = 120.0
    """Per-attempt timeout for one HTTP request (seconds)."""
    connect_timeout_s: PositiveFloat = 5.0
    retries: NonNegativeInt = 3
    """Retries after the first attempt, for connection errors, timeouts, 429, 502, 503 and 504.
    Other errors (a 4xx: the request itself is wrong) are not retried."""
    backoff_s: PositiveFloat = 0.5
    """First retry delay; doubles per retry (a server's ``Retry-After`` is honoured up to ``max_backoff_s``)."""
    max_backoff_s: PositiveFloat = 10.0
    max_items_per_request: PositiveInt = 512
    """Larger calls are split into requests of at most this many items, sent concurrently."""
    source_column: Optional[str] = None
    """Dataset column to judge the completion against (e.g. ``article``); ``None``: see ``source_from_prompt``."""
    source_from_prompt: Optional[bool] = None
    """With no ``source_column``: ``None`` (default) sends the prompt (its last
    user message) as the source unless the service's reward compares the completion with its source
    (its term or guards: ``/v1/info``'s ``source_guards``), which is then an error naming them; ``True``
    sends the prompt as the source anyway; ``False`` makes the unset column an error."""
    reference_column: Optional[str] = "reference"
    """Dataset column with a human reference, passed as ``reference`` when present."""
    name: str = "judge_service"
    """Name TRL logs the reward under (``rewards/<name>/mean``)."""
    extra: dict = field(default_factory=dict)
    """Extra keyword arguments for ``httpx.AsyncClient`` (e.g. ``verify`` for a private CA)."""

    def check(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"expected an http(s) URL, got {self.url!r}", field="url")
        self.url = self.url.rstrip("/")
        if self.urls is not None:
            if not self.urls:
                raise ConfigError("expected at least one URL, or None to use url", field="urls")
            for k, u in enumerate(self.urls):
                if not isinstance(u, str) or not u.startswith(("http://", "https://")):
                    raise ConfigError(f"expected an http(s) URL, got {u!r}", field=f"urls[{k}]")
            self.urls = [u.rstrip("/") for u in self.urls]
            if len(set(self.urls)) != len(self.urls):
                raise ConfigError(f"a URL repeats: {self.urls}", field="urls")

    @property
    def replicas(self) -> list[str]:
        """The root URLs requests are spread over: ``urls``, else ``[url]``."""
        return list(self.urls) if self.urls else [self.url]
