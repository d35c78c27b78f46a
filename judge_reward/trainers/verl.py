"""verl reward function: the judge of a running ``judge-reward serve`` as verl's ``compute_score``.

verl (tested with 0.9.1) calls a custom reward function once per sample from each reward-loop
worker, all of a worker's samples at once; :func:`compute_score_async` sends each one to the
service, whose dynamic batcher merges the concurrent calls of all workers into full judge batches.
In verl's config::

    reward:
      custom_reward_function:
        path: pkg://judge_reward.trainers.verl
        name: compute_score_async          # or compute_score (verl runs it in a thread pool)
        reward_kwargs: {aspects: [coherence, consistency]}

and ``JUDGE_REWARD_URLS=http://judge-0:8080,http://judge-1:8080`` in the workers' environment
(requests are spread over the replicas, and move to another one when a replica fails or drains).

The sample's reward is::

    score = reward                 if the judge scored it (judge_ok = 1.0)
          = neutral_score          otherwise               (judge_ok = 0.0, judge_failure = why)

with ``reward`` the service's reward (the judge config's aspects, weights, normalisation and
guards, as in ``/v1/score``). Every sample returns the same keys, as verl requires (it builds one
array per key from all samples, taking the first sample's keys):

* ``score``: the reward verl trains on (``neutral_score`` on failure, default 0.0);
* ``judge_ok``: 1.0 when the judge scored the sample, 0.0 when it failed. Mask on it: verl keeps it
  in ``batch.non_tensor_batch["judge_ok"]``, averages it in the validation metrics, and writes it
  with each rollout when ``trainer.rollout_data_dir`` is set;
* ``judge_failure``: why it failed (``""`` when it did not);
* ``judge_reward``: the reward itself, ``None`` on failure (the validation mean is over judged samples);
* ``judge/<aspect>``: each aspect's normalised score (``None`` when missing);
* ``judge_guard_penalty``: the guards' total penalty, already subtracted from the reward (``None`` on failure).

The per-aspect keys need the aspect names before the first answer: set ``aspects`` (or
``JUDGE_REWARD_ASPECTS``), else they are read once from the service's ``/v1/info``; a process that
has never reached the service and was given no aspects raises instead of returning keys that would
differ from other workers'.

Settings, each from (first found) the call's keyword arguments (verl's ``reward_kwargs``), then the
environment; the replica addresses may also come per sample from ``extra_info["judge_reward_urls"]``:

=====================  ===================================  ==========================================
argument               environment variable                 meaning
=====================  ===================================  ==========================================
``urls``               ``JUDGE_REWARD_URLS``                service root URLs, comma-separated (required)
``token``              ``JUDGE_REWARD_TOKEN``               bearer token (the server reads the same variable)
``aspects``            ``JUDGE_REWARD_ASPECTS``             aspects, comma-separated (default: the service's)
``method``             ``JUDGE_REWARD_METHOD``              ``gptscore``, ``geval`` or ``rating``
``neutral_score``      ``JUDGE_REWARD_NEUTRAL_SCORE``       score of a failed sample (default 0.0)
``source_key``         ``JUDGE_REWARD_SOURCE_KEY``          ``extra_info`` key of the source (default ``source``)
``source_from_prompt`` ``JUDGE_REWARD_SOURCE_FROM_PROMPT``  ``1``: no source key -> ``extra_info["prompt"]``
``timeout_s``          ``JUDGE_REWARD_TIMEOUT_S``           per HTTP attempt (default 60)
``retries``            ``JUDGE_REWARD_RETRIES``             retries after the first attempt (default 3)
``deadline_s``         ``JUDGE_REWARD_DEADLINE_S``          whole call, retries included (default 240)
=====================  ===================================  ==========================================

The source (the article the guards compare the completion with) is ``extra_info[source_key]``. A
sample without it is an error, unless ``source_from_prompt`` says to judge against
``extra_info["prompt"]`` (text, or chat messages: the last user message), as
``JudgeRewardConfig.source_from_prompt`` does for TRL. ``ground_truth``, when it is non-empty text,
is sent as the reference. ``deadline_s`` stays below the 300 s of verl's rate-limited reward
manager (``reward.timeout``), which would otherwise replace the answer with an unflagged 0.0.

This module imports only the service client (httpx, tenacity, pydantic; no torch), so it works in
verl's environment with ``judge-reward`` installed ``--no-deps`` beside those packages.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
from collections import Counter
from dataclasses import dataclass
from collections.abc import Iterable, Mapping
from typing import Any

from ..config import ConfigError
from ..reward import prompt_source
from ..service.client import JudgeServiceClient, RemoteScore, ServiceError
from ..service.config import ServiceRewardConfig

__all__ = ["NEUTRAL_SCORE", "URLS_KEY", "VerlRewardSettings", "compute_score", "compute_score_async", "stats"]

log = logging.getLogger(__name__)

NEUTRAL_SCORE = 0.0
"""Default ``score`` of a sample the judge failed on (always with ``judge_ok = 0.0``)."""
URLS_KEY = "judge_reward_urls"
"""``extra_info`` key whose value (a list, or comma-separated text) overrides the replica addresses."""

ENV = {
    "urls": "JUDGE_REWARD_URLS", "token": "JUDGE_REWARD_TOKEN", "aspects": "JUDGE_REWARD_ASPECTS",
    "method": "JUDGE_REWARD_METHOD", "neutral_score": "JUDGE_REWARD_NEUTRAL_SCORE",
    "source_key": "JUDGE_REWARD_SOURCE_KEY", "source_from_prompt": "JUDGE_REWARD_SOURCE_FROM_PROMPT",
    "timeout_s": "JUDGE_REWARD_TIMEOUT_S", "retries": "JUDGE_REWARD_RETRIES", "deadline_s": "JUDGE_REWARD_DEADLINE_S",
}
# What verl passes beside its four arguments when a reward model is configured; not ours to use.
_VERL_KWARGS = {"reward_router_address", "reward_model_tokenizer"}
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class VerlRewardSettings:
    """The resolved settings of one call (see the module docstring for where each comes from)."""

    urls: tuple[str, ...]
    token: str | None = None
    aspects: tuple[str, ...] | None = None
    method: str | None = None
    neutral_score: float = NEUTRAL_SCORE
    source_key: str = "source"
    source_from_prompt: bool = False
    timeout_s: float = 60.0
    retries: int = 3
    deadline_s: float = 240.0

    @classmethod
    def resolve(cls, extra_info: Mapping | None = None, **kwargs) -> "VerlRewardSettings":
        """Settings from ``kwargs``, else the environment; ``extra_info[URLS_KEY]`` overrides the URLs.

        Raises ``ValueError`` naming the argument or variable and the bad value.

        >>> VerlRewardSettings.resolve(urls="http://a:8080/, http://b:8080", aspects=["coherence"]).urls
        ('http://a:8080', 'http://b:8080')
        """
        unknown = sorted(set(kwargs) - set(ENV) - _VERL_KWARGS)
        if unknown:
            raise TypeError(f"compute_score: unknown keyword argument(s) {unknown}; known: {sorted(ENV)}")

        def get(name: str) -> tuple[Any, str]:
            if kwargs.get(name) is not None:
                return kwargs[name], name
            return os.environ.get(ENV[name]), ENV[name]

        urls, where = get("urls")
        if extra_info is not None and extra_info.get(URLS_KEY) is not None:
            urls, where = extra_info[URLS_KEY], f"extra_info[{URLS_KEY!r}]"
        if urls is None:
            raise ValueError(f"{ENV['urls']}: not set; give the judge-reward service's root URL(s), comma-separated "
                             f"(e.g. http://127.0.0.1:8080), or pass urls=... in reward_kwargs")
        url_list = _names(urls, where)
        try:
            ServiceRewardConfig(urls=url_list)
        except ConfigError as err:
            raise ValueError(f"{where}: {err.problem} (in {urls!r})") from None

        out: dict[str, Any] = {"urls": tuple(u.rstrip("/") for u in url_list)}
        token, _ = get("token")
        out["token"] = token or None
        aspects, where = get("aspects")
        out["aspects"] = tuple(_names(aspects, where)) if aspects is not None else None
        method, _ = get("method")
        out["method"] = method or None
        for name, kind in (("neutral_score", float), ("timeout_s", float), ("retries", int), ("deadline_s", float)):
            value, where = get(name)
            if value is not None:
                out[name] = _number(value, kind, where, positive=name in ("timeout_s", "deadline_s"))
        key, _ = get("source_key")
        if key:
            out["source_key"] = str(key)
        flag, where = get("source_from_prompt")
        if flag is not None:
            text = str(flag).strip().lower()
            if text not in _TRUE | _FALSE:
                raise ValueError(f"{where}: expected 1/0, true/false, yes/no; got {flag!r}")
            out["source_from_prompt"] = text in _TRUE
        return cls(**out)


def _names(value: Any, where: str) -> list[str]:
    # verl hands reward_kwargs over as OmegaConf containers: a ListConfig is a list here
    iterable = isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping))
    parts = value.split(",") if isinstance(value, str) else list(value) if iterable else None
    if parts is None or not all(isinstance(p, str) for p in parts):
        raise ValueError(f"{where}: expected comma-separated text or a list of text, got {value!r}")
    names = [p.strip() for p in parts if p.strip()]
    if not names:
        raise ValueError(f"{where}: expected at least one name, got {value!r}")
    return names


def _number(value: Any, kind: type, where: str, positive: bool) -> float | int:
    try:
        number = kind(value)
    except (TypeError, ValueError):
        number = None
    if number is None or not math.isfinite(number) or (positive and number <= 0) or (kind is int and number < 0):
        need = "a positive number" if positive else "an integer >= 0" if kind is int else "a finite number"
        raise ValueError(f"{where}: expected {need}, got {value!r}")
    return number


# -- per-process state: one client per settings, one background loop for the sync function ------------

_lock = threading.Lock()
_clients: dict[tuple, JudgeServiceClient] = {}
_infos: dict[tuple, dict] = {}  # each service's /v1/info, asked once
_counts: Counter[str] = Counter()
_failures: Counter[str] = Counter()
_loop: asyncio.AbstractEventLoop | None = None


def _client(s: VerlRewardSettings) -> JudgeServiceClient:
    key = (s.urls, s.token, s.timeout_s, s.retries)
    with _lock:
        if key not in _clients:
            _clients[key] = JudgeServiceClient(ServiceRewardConfig(
                urls=list(s.urls), token=s.token, timeout_s=s.timeout_s, retries=s.retries, max_backoff_s=5.0))
        return _clients[key]


async def _service_info(s: VerlRewardSettings, client: JudgeServiceClient) -> dict:
    """The service's ``/v1/info`` (default aspects, limits), asked once per service."""
    key = (s.urls, s.token)
    if key not in _infos:
        _infos[key] = await client.info()
    return _infos[key]


def _known_aspects(s: VerlRewardSettings) -> tuple[str, ...] | None:
    """The aspects whose scores every sample reports: the configured ones, else the service's
    defaults once ``/v1/info`` has answered (None before)."""
    if s.aspects is not None:
        return s.aspects
    info = _infos.get((s.urls, s.token))
    return tuple(info["default_aspects"]) if info is not None else None


def _source(extra_info: Mapping | None, s: VerlRewardSettings) -> str:
    info = extra_info or {}
    if s.source_key in info and info[s.source_key] is not None:
        source = info[s.source_key]
        if not isinstance(source, str):
            raise TypeError(f"extra_info[{s.source_key!r}]: expected the source text, got {source!r:.80}")
        return source
    if s.source_from_prompt and info.get("prompt") is not None:
        return prompt_source(info["prompt"], "extra_info['prompt']")
    keys = sorted(k for k in info if isinstance(k, str))
    hint = ("" if s.source_from_prompt else
            f", or set {ENV['source_from_prompt']}=1 (reward_kwargs.source_from_prompt) to judge against extra_info['prompt']")
    raise ValueError(f"extra_info[{s.source_key!r}]: missing (extra_info has {keys}); put the text the completion is "
                     f"judged against (the article) there, name its key with {ENV['source_key']}{hint}")


def _result(aspects: tuple[str, ...], s: VerlRewardSettings, got: RemoteScore | None, failure: str | None) -> dict:
    ok = got is not None and got.reward is not None and math.isfinite(got.reward)
    if got is not None and not ok:
        failure = got.failure or "the service returned no reward"
    components = got.components if got is not None else {}
    out: dict[str, Any] = {
        "score": float(got.reward) if ok else s.neutral_score,
        "judge_ok": 1.0 if ok else 0.0,
        "judge_failure": "" if ok else failure,
        "judge_reward": float(got.reward) if ok else None,
    }
    for name in aspects:
        value = components.get(f"aspect/{name}")
        out[f"judge/{name}"] = float(value) if isinstance(value, (int, float)) else None
    penalties = [v for k, v in components.items() if k.startswith("guard/")]
    out["judge_guard_penalty"] = float(sum(penalties)) if ok else None
    with _lock:
        _counts["scored" if ok else "failed"] += 1
        if not ok:
            _failures[failure] += 1
            first = _failures[failure] == 1
    if not ok and first:
        log.warning("judge failed on a sample; its score is the neutral %s with judge_ok=0.0: %s "
                    "(each reason is logged once; see judge_reward.trainers.verl.stats())", s.neutral_score, failure)
    return out


async def compute_score_async(
    data_source: Any = None,
    solution_str: str = "",
    ground_truth: Any = None,
    extra_info: Mapping | None = None,
    **kwargs,
) -> dict[str, Any]:
    """verl's ``compute_score`` as a coroutine: score one sample on the judge-reward service.

    Args:
        data_source: the dataset's ``data_source`` (unused; verl groups validation metrics by it).
        solution_str: the decoded response, the text under judgment.
        ground_truth: ``reward_model.ground_truth``; sent as the reference when it is non-empty text.
        extra_info: the dataset's ``extra_info``: the source under ``source_key`` (default
            ``source``), optionally ``judge_reward_urls``.
        **kwargs: settings (verl's ``reward_kwargs``): ``urls``, ``token``, ``aspects``, ``method``,
            ``neutral_score``, ``source_key``, ``source_from_prompt``, ``timeout_s``, ``retries``,
            ``deadline_s``; unset ones come from the ``JUDGE_REWARD_*`` environment variables.

    Returns:
        ``{"score", "judge_ok", "judge_failure", "judge_reward", "judge/<aspect>"..., "judge_guard_penalty"}``:
        the same keys for every sample. A judge failure (the judge could not score the text, or no
        replica answered within ``deadline_s``) is ``score = neutral_score`` with ``judge_ok = 0.0``
        and its reason, never an unmarked number.

    Raises:
        ValueError / TypeError: a missing or malformed setting or source (the message names it).
        ServiceError: the service refused the request itself (a 4xx: bad token, unknown aspect),
            or, with no aspects given, never answered ``/v1/info``.
    """
    s = VerlRewardSettings.resolve(extra_info, **kwargs)
    if not isinstance(solution_str, str):
        raise TypeError(f"solution_str: expected the decoded response text, got {solution_str!r:.80}")
    item = {"output": solution_str, "source": _source(extra_info, s)}
    if isinstance(ground_truth, str) and ground_truth.strip():
        item["reference"] = ground_truth
    client = _client(s)

    async def judge() -> RemoteScore | None:
        info = await _service_info(s, client)
        aspects = _known_aspects(s)
        limit = int(info["limits"]["max_text_chars"])
        if len(solution_str) > limit:  # a rollout's own length: this sample fails, training goes on
            nonlocal failure
            failure = f"output: {len(solution_str)} characters; the service's limit is {limit} (max_text_chars)"
            return None
        [got] = await client.score([item], aspects=list(aspects), method=s.method)
        return got

    got, failure = None, None
    try:
        got = await asyncio.wait_for(judge(), s.deadline_s)
    except asyncio.TimeoutError:
        failure = f"service: no answer within deadline_s={s.deadline_s:g}s from {', '.join(s.urls)}"
    except ServiceError as err:
        if err.status is not None and 400 <= err.status < 500 and err.status != 429:
            raise  # the request itself is wrong (auth, aspect, method, size): not a judge failure
        failure = f"service: {err}"
    aspects = _known_aspects(s)
    if aspects is None:
        raise ServiceError(
            f"the judge service has not answered /v1/info yet and no aspects were given, so this sample's "
            f"components cannot have the same keys as the others'; set {ENV['aspects']} (reward_kwargs.aspects) "
            f"or start the service first ({failure})")
    return _result(aspects, s, got, failure)


def compute_score(
    data_source: Any = None,
    solution_str: str = "",
    ground_truth: Any = None,
    extra_info: Mapping | None = None,
    **kwargs,
) -> dict[str, Any]:
    """:func:`compute_score_async` for callers that want a plain function (verl runs one in its
    thread pool). The requests run on one background event loop per process, so concurrent calls
    from several threads share connections and reach the service together, where they are batched.
    Do not call it from inside a running event loop's thread: use :func:`compute_score_async` there.
    """
    future = asyncio.run_coroutine_threadsafe(
        compute_score_async(data_source, solution_str, ground_truth, extra_info, **kwargs), _background_loop())
    return future.result()


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="judge-reward-verl", daemon=True).start()
            _loop = loop
        return _loop


def stats() -> dict[str, Any]:
    """This process's counts: samples scored and failed, failures by reason, and per replica the
    requests sent and failed (a failed attempt that another replica then answered included)."""
    with _lock:
        out: dict[str, Any] = {"scored": _counts["scored"], "failed": _counts["failed"], "failures": dict(_failures)}
        clients = list(_clients.values())
    out["requests_by_url"] = dict(sum((c.requests_by_url for c in clients), Counter()))
    out["failures_by_url"] = dict(sum((c.failures_by_url for c in clients), Counter()))
    out["retried_by_reason"] = dict(sum((c.retried_by_reason for c in clients), Counter()))
    return out
