"""The reward service as a FastAPI app: OpenRLHF's ``/get_reward``, a native ``/v1/score``, probes, metrics.

Endpoints (all JSON):

* ``POST /get_reward``: OpenRLHF remote reward model protocol;
* ``POST /v1/score``: items -> per-aspect scores, distributions, failure reasons and a combined reward;
* ``GET /v1/info``: the judge (model, method, aspects and scales) and the service's limits;
* ``GET /health`` (liveness: the worker is alive), ``GET /ready`` (readiness: the judge is loaded and
  the service takes requests), ``GET /metrics`` (Prometheus text format).

Every request except the probes needs ``Authorization: Bearer <token>`` when a token is set.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import math
import time
from contextlib import asynccontextmanager
from typing import Any, Callable

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ..config import ConfigError
from ..methods.base import Item
from ..reward import Reward, RewardConfig
from .batcher import BatchInfo, DynamicBatcher, ServiceUnavailable
from .config import ServiceConfig
from .metrics import ServiceMetrics
from .schemas import OpenRLHFRequest, OpenRLHFResponse, ScoreRequest, ScoreResponse

log = logging.getLogger(__name__)

ENDPOINTS = ("/get_reward", "/v1/score", "/v1/info", "/health", "/ready", "/metrics")
METHODS = ("gptscore", "geval", "rating")


class ApiError(Exception):
    """A request the service refuses; becomes ``{"detail": message, "errors": [...]}`` with ``status``."""

    def __init__(self, status: int, message: str, errors: list[dict] | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.errors, self.headers = status, message, errors or [], headers or {}


def _field_error(field: str, message: str, value: Any = None) -> dict:
    shown = value if isinstance(value, (int, float, bool)) or value is None else repr(value)[:120]
    return {"field": field, "message": message, "value": shown}


def _loc(loc: tuple) -> str:
    """('body', 'items', 3, 'output') -> 'items[3].output'."""
    out = ""
    for part in loc[1:] if loc and loc[0] == "body" else loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "body"


def _finite(value: Any) -> Any:
    """JSON-safe copy: non-finite floats (a -inf log-probability) become None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    try:  # numpy / torch scalars
        return _finite(float(value))
    except (TypeError, ValueError):
        return str(value)


class ServiceState:
    """What the handlers share: config, batcher, metrics, and facts about the loaded judge."""

    def __init__(self, config: ServiceConfig, batcher: DynamicBatcher, metrics: ServiceMetrics):
        self.config = config
        self.batcher = batcher
        self.metrics = metrics
        self.methods: dict[str, str | None] = {}  # method -> None (available) or why not
        self.lowest_reward: float | None = None  # the lowest reward /get_reward has returned

    def failure_fill(self, judged: list[float], reasons: list[str]) -> float:
        """The reward a failed /get_reward item reports (see ``ServiceConfig.failure_reward``)."""
        if judged:
            low = min(judged)
            self.lowest_reward = low if self.lowest_reward is None else min(self.lowest_reward, low)
        if self.config.failure_reward != "lowest":
            return self.config.failure_reward
        low = min(judged) if judged else self.lowest_reward
        if low is None and reasons:
            msg = (f"the judge failed on every item ({'; '.join(sorted(set(reasons)))[:300]}) and no reward has been "
                   "returned yet to fill failures with; fix the judge, or start the server with --failure-reward <number>")
            raise ApiError(500, msg, [_field_error("query", msg, len(reasons))])
        return low if low is not None else 0.0  # 0.0: nothing failed, nothing is filled

    def prepare(self, judge) -> None:
        """Run in the worker thread once the judge is loaded: build every method it can run."""
        for name in METHODS:
            try:
                judge.method(name)
                self.methods[name] = None
            except Exception as err:  # a section the config lacks or gets wrong
                self.methods[name] = f"{type(err).__name__}: {err}"
        if self.config.reward_weights:
            unknown = sorted(set(self.config.reward_weights) - set(judge.aspect_set.aspects))
            if unknown:
                raise ValueError(f"reward_weights: unknown aspect(s) {unknown}; known: {sorted(judge.aspect_set.aspects)}")
        self._rewards: dict[tuple, Reward] = {}
        self._scoring_judge = judge  # the batcher holds it only once this returns
        self.reward_for(None, None)  # the default reward: a bad reward section fails at start-up

    def reward_for(self, method: str | None, aspects: tuple[str, ...] | None) -> Reward:
        """The reward of the judge config (with the service's overrides) for a request's method and aspects."""
        key = (method, aspects)
        if key not in self._rewards:
            judge = self._scoring_judge
            raw = dict(judge.config.reward or {})
            if method is not None:
                raw["method"] = method
            if aspects is not None:
                raw["aspects"] = list(aspects)
            weights = self.config.reward_weights or raw.get("weights")
            if weights:
                names = raw.get("aspects") or judge.aspect_names
                raw["weights"] = {a: w for a, w in weights.items() if a in names}
                if sum(raw["weights"].values()) <= 0:
                    msg = f"no weight on the scored aspects {sorted(names)}"
                    raise ApiError(422, f"reward_weights: {msg}", [_field_error("aspects", msg, list(names))])
            if self.config.normalise is not None:
                raw["normalise"] = self.config.normalise
            try:
                self._rewards[key] = Reward(judge, RewardConfig.from_dict(raw))
                data_values = self._rewards[key].guards.data_values
                if data_values.enabled and data_values.domain == "inputs":
                    del self._rewards[key]
                    raise ConfigError("'inputs' is the data a command runs on, and a server sees one request at a "
                                      "time: give the path of a file of the task's meaning representations",
                                      field="reward.guards.data_values.domain")
            except ConfigError as err:
                if key == (None, None):
                    raise  # the config's own reward: a start-up error
                # a request's method or aspects the config's reward cannot be computed with
                field = "method" if method is not None else "aspects"
                raise ApiError(422, f"{field}: the judge config's reward cannot use it: {err}",
                               [_field_error(field, str(err), method if method is not None else list(aspects))]) from None
        return self._rewards[key]

    @property
    def judge(self):
        return self.batcher.judge

    # -- validation -----------------------------------------------------------------------------

    def require_ready(self) -> None:
        if not self.batcher.ready:
            state = self.batcher.state
            reason = {"loading": "the judge is still loading", "draining": "the service is shutting down",
                      "failed": f"the judge failed to load: {self.batcher.error}"}.get(state, f"service {state}")
            self.metrics.rejected.labels(state).inc()
            raise ApiError(503, reason, headers={"Retry-After": "5" if state != "failed" else "60"})

    def check_method(self, method: str | None) -> str:
        method = method or self.judge.config.method
        why = self.methods.get(method, "unknown method")
        if why is not None:
            raise ApiError(422, f"method: {method!r} is not available on this judge ({why})",
                           [_field_error("method", why, method)])
        return method

    def check_aspects(self, names: list[str] | None, field: str) -> tuple[str, ...] | None:
        if names is None:
            return None
        if not names:
            raise ApiError(422, f"{field}: name at least one aspect, or leave it out for the defaults",
                           [_field_error(field, "empty list", names)])
        known = self.judge.aspect_set.aspects
        for k, name in enumerate(names):
            if name not in known:
                msg = f"unknown aspect {name!r}; known: {', '.join(sorted(known))}"
                raise ApiError(422, f"{field}[{k}]: {msg}", [_field_error(f"{field}[{k}]", msg, name)])
        if len(set(names)) != len(names):
            raise ApiError(422, f"{field}: aspects repeat", [_field_error(field, "aspects repeat", names)])
        return tuple(names)

    def check_count(self, n: int, field: str) -> None:
        limit = self.config.max_request_items
        if n > limit:
            raise ApiError(413, f"{field}: {n} entries in one request; the limit is {limit} (split the request)",
                           [_field_error(field, f"more than {limit} entries", n)])

    def check_text(self, text: str | None, field: str) -> None:
        if text is not None and len(text) > self.config.max_text_chars:
            msg = f"{len(text)} characters; the limit is {self.config.max_text_chars}"
            raise ApiError(422, f"{field}: {msg}", [_field_error(field, msg, len(text))])

    # -- scoring --------------------------------------------------------------------------------

    async def run(self, parts):
        try:
            return await self.batcher.submit_many(parts)
        except ServiceUnavailable as err:
            self.metrics.rejected.labels(err.kind).inc()
            raise ApiError(503, str(err), headers={"Retry-After": str(err.retry_after)}) from None

    async def rewards(self, parts: list[tuple[list[Item], str, tuple[str, ...] | None]]):
        """Reward results per part (one judge batch for all of them), and the batch infos."""
        batches = [self.reward_for(method, aspects).plan(items) for items, method, aspects in parts]
        answers = await self.run([(b.to_judge, method, aspects) for b, (_, method, aspects) in zip(batches, parts)])
        return [(b.finish(scores), info) for b, (scores, info) in zip(batches, answers)]


def _strip(text: str, tokens: tuple[str, ...]) -> str:
    for tok in tokens:
        if tok in text:
            text = text.replace(tok, "")
    return text


class _Guard:
    """Pure ASGI middleware: request size limit (never buffers past it), latency, status, in-flight."""

    def __init__(self, app, state: ServiceState):
        self.app, self.state = app, state

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        metrics, limit = self.state.metrics, self.state.config.max_body_bytes
        endpoint = scope["path"] if scope["path"] in ENDPOINTS else "other"
        status = [500]
        start = time.perf_counter()

        async def send_tracked(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        metrics.in_flight.inc()
        try:
            headers = dict(scope.get("headers") or [])
            declared = headers.get(b"content-length")
            if declared is not None:
                if not declared.isdigit():
                    message = f"Content-Length: not a number ({declared[:20]!r})"
                    return await self._reject(scope, receive, send_tracked, 400, message)
                if int(declared) > limit:
                    message = f"body: {int(declared)} bytes; the limit is {limit}"
                    return await self._reject(scope, receive, send_tracked, 413, message)
            if scope["method"] not in ("POST", "PUT", "PATCH"):
                return await self.app(scope, receive, send_tracked)
            body, more = bytearray(), True
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    status[0] = 499
                    return
                body += message.get("body", b"")
                more = message.get("more_body", False)
                if len(body) > limit:
                    return await self._reject(scope, receive, send_tracked, 413, f"body: more than {limit} bytes")
            replayed = False

            async def replay():
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": bytes(body), "more_body": False}
                return await receive()

            await self.app(scope, replay, send_tracked)
        finally:
            metrics.in_flight.dec()
            metrics.requests.labels(endpoint, str(status[0])).inc()
            metrics.latency.labels(endpoint).observe(time.perf_counter() - start)

    @staticmethod
    async def _reject(scope, receive, send, status: int, message: str) -> None:
        await JSONResponse({"detail": message, "errors": []}, status_code=status)(scope, receive, send)


def create_app(
    config: ServiceConfig | None = None,
    *,
    judge: Any = None,
    judge_factory: Callable[[], Any] | None = None,
) -> FastAPI:
    """Build the service around a judge, or around a factory that loads it in the worker thread.

    With a factory the server answers ``/health`` at once and ``/ready`` with 503 until the
    judge is loaded.
    """
    config = config or ServiceConfig()
    metrics = ServiceMetrics()
    state: ServiceState | None = None

    def factory():
        if config.torch_threads:
            import torch

            torch.set_num_threads(config.torch_threads)
        loaded = judge if judge is not None else judge_factory()
        state.prepare(loaded)
        return loaded

    batcher = DynamicBatcher(
        judge_factory=factory, max_batch_size=config.max_batch_size, max_wait_ms=config.max_wait_ms,
        max_queue_items=config.max_queue_items, metrics=metrics,
    )
    state = ServiceState(config, batcher, metrics)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        batcher.start()
        yield
        # uvicorn has already waited for in-flight requests; finish anything still queued.
        await asyncio.to_thread(batcher.close, config.graceful_timeout_s)

    app = FastAPI(title="judge-reward service", version="1", lifespan=lifespan)
    app.state.service = state
    app.add_middleware(_Guard, state=state)

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, err: ApiError):
        return JSONResponse({"detail": err.message, "errors": err.errors}, status_code=err.status, headers=err.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, err: RequestValidationError):
        errors = []
        for e in err.errors():
            loc = tuple(e.get("loc", ()))
            if e.get("type") == "json_invalid":  # loc is ('body', character offset)
                where = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
                why = (e.get("ctx") or {}).get("error", "JSON decode error")
                errors.append({"field": "body", "message": f"not valid JSON{where}: {why}", "value": None})
            elif e.get("type") == "missing":
                errors.append({"field": _loc(loc), "message": "required field is missing", "value": None})
            else:
                errors.append(_field_error(_loc(loc), e.get("msg", "invalid"), e.get("input")))
        shown = [f"{e['field']}: {e['message']}" + (f" (got {e['value']})" if e["value"] is not None else "")
                 for e in errors[:5]]
        message = "; ".join(shown) + (f"; and {len(errors) - 5} more" if len(errors) > 5 else "")
        return JSONResponse({"detail": message, "errors": errors}, status_code=422)

    async def authorised(request: Request) -> None:
        if config.token is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), config.token.encode()):
            raise ApiError(401, "Authorization: a valid bearer token is required",
                           headers={"WWW-Authenticate": 'Bearer realm="judge-reward"'})

    guarded = [Depends(authorised)]

    @app.get("/health")
    async def health():
        if batcher.state in ("failed", "stopped"):
            return JSONResponse({"status": batcher.state, "error": batcher.error}, status_code=503)
        return {"status": "ok", "state": batcher.state}

    @app.get("/ready")
    async def ready():
        if not batcher.ready:
            return JSONResponse({"ready": False, "state": batcher.state, "error": batcher.error}, status_code=503,
                                headers={"Retry-After": "5"})
        return {"ready": True, "state": batcher.state, "model": state.judge.backend.model_id}

    @app.get("/metrics", dependencies=guarded)
    async def prometheus_metrics():
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/info", dependencies=guarded)
    async def info():
        state.require_ready()
        j = state.judge
        return {
            "model": j.backend.model_id,
            "method": j.config.method,
            "methods": state.methods,
            "default_aspects": j.aspect_names,
            "aspects": {a.name: {"scale": list(a.scale.values), "task": a.task}
                        for a in j.aspect_set.aspects.values()},
            # what compares an output with its source (the term, the guards): a client with no source column must know
            "source_guards": state.reward_for(None, None).config.source_readers(),
            "limits": {"max_batch_size": config.max_batch_size, "max_wait_ms": config.max_wait_ms,
                       "max_queue_items": config.max_queue_items, "max_request_items": config.max_request_items,
                       "max_body_bytes": config.max_body_bytes, "max_text_chars": config.max_text_chars},
        }

    @app.post("/v1/score", dependencies=guarded, responses={200: {"model": ScoreResponse}})
    async def score(body: ScoreRequest):
        state.require_ready()
        state.check_count(len(body.items), "items")
        method = state.check_method(body.method)
        default = state.check_aspects(body.aspects, "aspects")
        groups: dict[tuple[str, ...] | None, list[int]] = {}
        for k, it in enumerate(body.items):
            for name in ("output", "source", "reference"):
                state.check_text(getattr(it, name), f"items[{k}].{name}")
            own = state.check_aspects(it.aspects, f"items[{k}].aspects")
            groups.setdefault(own if own is not None else default, []).append(k)
        metrics.items.labels("/v1/score").inc(len(body.items))
        keys = list(groups)
        parts = [([_item(body.items[k]) for k in groups[key]], method, key) for key in keys]
        answers = await state.rewards(parts)
        results: list[dict | None] = [None] * len(body.items)
        batches: list[BatchInfo] = []
        for key, (rewarded, info) in zip(keys, answers):
            batches.append(info)
            for k, r in zip(groups[key], rewarded):
                results[k] = {
                    "id": body.items[k].id,
                    "reward": r.value,
                    "failure": r.reason,
                    "components": r.components,
                    "term": r.term,
                    "guards": r.guards,
                    "scores": {
                        name: {"value": s.value, "normalised": r.components.get(f"aspect/{name}"), "reason": s.reason,
                               **({"details": s.details} if body.details else {}),
                               **({"tokens": s.tokens.to_json()} if body.details and s.tokens is not None else {})}
                        for name, s in r.scores.items()
                    },
                }
        payload = {
            "model": state.judge.backend.model_id,
            "method": method,
            "results": results,
            "batches": [vars(b) for b in batches],
        }
        return JSONResponse(_finite(payload))

    @app.post("/get_reward", dependencies=guarded, responses={200: {"model": OpenRLHFResponse}})
    async def get_reward(body: OpenRLHFRequest):
        state.require_ready()
        n = len(body.query)
        state.check_count(n, "query")
        for name in ("prompts", "labels"):
            got = getattr(body, name)
            if got is not None and len(got) != n:
                msg = f"{len(got)} entries for {n} queries; one per query is required"
                raise ApiError(422, f"{name}: {msg}", [_field_error(name, msg, len(got))])
        method = state.check_method(body.method)
        aspects = state.check_aspects(body.aspects, "aspects")
        items, owners, failures = [], [], [None] * n
        strip = config.strip_tokens
        for i, query in enumerate(body.query):
            state.check_text(query, f"query[{i}]")
            text = _strip(query, strip)
            source = ""
            if body.prompts is not None:
                source = _strip(body.prompts[i], strip)
                at = text.find(source) if source else 0
                if at < 0:
                    failures[i] = f"query[{i}]: does not contain prompts[{i}], so the response cannot be cut out"
                    metrics.failures.labels("query does not contain its prompt").inc()
                    continue
                text = text[at + len(source):]
            label = body.labels[i] if body.labels is not None else None
            reference = label if isinstance(label, str) and label.strip() else None
            items.append(Item(output=text.strip(), source=source.strip(), reference=reference))
            owners.append(i)
        metrics.items.labels("/get_reward").inc(n)
        rewarded = []
        if items:
            [(rewarded, _info)] = await state.rewards([(items, method, aspects)])
        for i, r in zip(owners, rewarded):
            if r.value is None:
                failures[i] = r.reason
        fill = state.failure_fill([r.value for r in rewarded if r.value is not None],
                                  [why for why in failures if why is not None])
        rewards = [fill] * n
        failed = [1.0] * n
        per_aspect: dict[str, list[float]] = {}
        if items:
            names = state.reward_for(method, aspects).aspect_names
            per_aspect = {name: [fill] * n for name in names}
            for i, r in zip(owners, rewarded):
                for name in names:
                    value = r.components.get(f"aspect/{name}")
                    if value is not None:
                        per_aspect[name][i] = value
                for key, value in r.components.items():
                    if key.startswith(("guard/", "term/")):
                        per_aspect.setdefault(key, [0.0] * n)[i] = value
                if r.value is not None:
                    rewards[i], failed[i] = r.value, 0.0
        extra_logs = {"judge_failed": failed, **{f"judge/{name}": values for name, values in per_aspect.items()}}
        return JSONResponse(_finite({"rewards": rewards, "scores": rewards, "extra_logs": extra_logs,
                                     "failures": failures}))

    return app


def _item(it) -> Item:
    return Item(output=it.output, source=it.source, reference=it.reference,
                id=None if it.id is None else str(it.id))
