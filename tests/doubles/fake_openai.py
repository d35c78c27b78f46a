"""A small, real OpenAI-compatible HTTP server with deterministic answers and injectable faults.

It exists to test :mod:`judge_reward.backends.openai_compat` (and anything else that speaks the
protocol) with the real ``openai`` client over a real socket, without a model or a network::

    with FakeOpenAIServer(FakeServerConfig(latency_s=0.2)) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x")

It listens on 127.0.0.1 only, on a free port (or the one given), in a background thread, and stops
when the ``with`` block ends. Endpoints: ``POST /v1/completions`` (``logprobs``, ``echo``, vLLM's
``prompt_logprobs``, ``n``, ``stop``, ``seed``), ``POST /v1/chat/completions`` (``logprobs``,
``top_logprobs``), ``GET /v1/models`` and llama-cpp-python's ``/extras/tokenize``,
``/extras/tokenize/count`` and ``/extras/detokenize``.

The "model" (:class:`FakeModel`) is a hash-seeded trigram model over a small vocabulary: every
answer is a pure function of the request, so tests compute the exact expected numbers by asking the
same :class:`FakeModel`. Digits (``"4"`` and ``" 4"``) get extra weight so score slots have mass on
them; a token that repeats an earlier bigram gets a strong boost (an "induction" rule, as real
models have), which is what the backend's echo-alignment probe relies on.

Faults are chosen per request by a marker in the prompt, or for every request by configuration:

* ``<<fault:KIND>>`` in the prompt (or any chat message) applies KIND to every attempt of that
  prompt; ``<<fault:KIND*N>>`` only to its first N attempts (then it answers normally), which is how
  retries are tested. KIND is one of :data:`FAULT_KINDS`.
* ``<<delay:SECONDS>>`` delays that request's answer.
* ``<<top:A|B|C>>`` makes token A the most likely one at the first generated position, B at the
  second and so on (to steer the generated path in candidate tests).
* :class:`FakeServerConfig` sets the same things for every request, plus server "personalities":
  no echo, vLLM ``prompt_logprobs``, llama.cpp's echo shift for models without a BOS token,
  llama.cpp started without ``--logits_all``, and servers that reject or ignore ``n > 1``.

It is a test double kept in the repository (``tests/doubles``), not in the installed package. From
the root of a clone it also runs in the foreground as a stand-in for a vLLM server (Ctrl-C stops it)::

    python -m tests.doubles.fake_openai --port 8000
    # READY http://127.0.0.1:8000/v1
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import socket
import threading
import time
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Optional

from judge_reward.config import Section

FAULT_KINDS = (
    "429",  # rate limited, with Retry-After when configured
    "500",
    "503",
    "400",  # a client error that cannot succeed on retry
    "drop",  # close the connection without an answer
    "timeout",  # hold the request longer than any client waits (bounded by hang_s)
    "no_logprobs",  # answer 200 without logprobs
    "empty_choices",  # answer 200 with "choices": []
    "malformed",  # answer 200 with a body that is not JSON
)

_TOKEN_RE = re.compile(r" ?[A-Za-z]+| ?\d| ?[^\sA-Za-z\d]|\s")
_MARKER_RE = re.compile(r"<<(fault|delay|top):([^>]*)>>")
FIXED_VOCAB = tuple(
    [str(d) for d in range(10)]
    + [f" {d}" for d in range(10)]
    + [" the", " a", " is", " good", " bad", " and", ".", ",", ":", "\n", " ", "Score", " score"]
)


def tokenize(text: str) -> list[str]:
    """The fake tokenizer: words with their leading space, single digits, single symbols, spaces.

    Every character lands in exactly one token, so ``"".join(tokenize(t)) == t``.
    """
    return _TOKEN_RE.findall(text)


def _unit(*parts: str) -> float:
    """A deterministic number in [0, 1) from strings."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True)
class Step:
    """One generated (or echoed) position: the token there, its logprob, and the top alternatives."""

    token: str
    logprob: float
    top: list[tuple[str, float]]  # sorted, most likely first


class FakeModel:
    """The deterministic "language model" behind the fake server.

    The vocabulary of one request is :data:`FIXED_VOCAB` plus every token of the request's prompt,
    so any prompt token has a probability and echo/prompt_logprobs can score it.
    """

    def __init__(self, digit_bonus: float = 1.5, induction_bonus: float = 6.0):
        self.digit_bonus = digit_bonus
        self.induction_bonus = induction_bonus
        self._ids: dict[str, int] = {}
        self._strings: list[str] = []
        self._lock = threading.Lock()

    # ids are handed out on first sight so the tokenize/detokenize endpoints can round-trip
    def token_id(self, token: str) -> int:
        with self._lock:
            if token not in self._ids:
                self._ids[token] = len(self._strings)
                self._strings.append(token)
            return self._ids[token]

    def token_string(self, token_id: int) -> str:
        with self._lock:
            return self._strings[token_id]

    @staticmethod
    def vocabulary(prompt: str) -> list[str]:
        return sorted(set(FIXED_VOCAB) | set(tokenize(prompt)))

    def distribution(self, context: list[str], vocab: list[str], boost: str | None = None) -> list[tuple[str, float]]:
        """Log-probabilities of every vocabulary token after ``context``, most likely first."""
        prev2 = context[-2] if len(context) >= 2 else "<s>"
        prev1 = context[-1] if context else "<s>"
        target = None
        for j in range(len(context) - 2, -1, -1):  # induction: what followed the last token before
            if context[j] == prev1:
                target = context[j + 1]
                break
        logits = []
        for tok in vocab:
            z = 3.0 * _unit(prev2, prev1, tok)
            if tok.strip().isdigit():
                z += self.digit_bonus
            if tok == target:
                z += self.induction_bonus
            if boost is not None and tok == boost:
                z += 12.0
            logits.append(z)
        top = max(logits)
        log_norm = top + math.log(sum(math.exp(z - top) for z in logits))
        out = [(tok, z - log_norm) for tok, z in zip(vocab, logits)]
        out.sort(key=lambda pair: (-pair[1], pair[0]))
        return out

    def next_distribution(self, prompt: str, generated: list[str] | None = None) -> list[tuple[str, float]]:
        """The distribution the server reports after ``prompt`` (+ already generated tokens)."""
        generated = generated or []
        boosts = _top_directives(prompt)
        k = len(generated)
        return self.distribution(
            tokenize(prompt) + generated, self.vocabulary(prompt), boosts[k] if k < len(boosts) else None
        )

    def prompt_steps(self, prompt: str) -> list[Step | None]:
        """Each prompt token scored given the tokens before it (``None`` for the first)."""
        tokens = tokenize(prompt)
        vocab = self.vocabulary(prompt)
        steps: list[Step | None] = [None]
        for i in range(1, len(tokens)):
            dist = self.distribution(tokens[:i], vocab)
            steps.append(Step(tokens[i], dict(dist)[tokens[i]], dist))
        return steps

    def generate(
        self, prompt: str, max_tokens: int, temperature: float = 0.0, seed: str = "", stop: list[str] | None = None
    ) -> tuple[list[Step], str, str]:
        """Greedy (temperature 0) or seeded sampling. Returns steps, text, finish_reason."""
        steps: list[Step] = []
        text = ""
        for k in range(max_tokens):
            dist = self.next_distribution(prompt, [s.token for s in steps])
            if temperature <= 0:
                tok, lp = dist[0]
            else:
                rng = random.Random(f"{seed}|{k}|{prompt}")
                weights = [math.exp(lp / temperature) for _, lp in dist]
                tok, lp = rng.choices(dist, weights=weights)[0]
            steps.append(Step(tok, lp, dist))
            text += tok
            for s in stop or []:
                if s and s in text:
                    return steps, text[: text.index(s)], "stop"
        return steps, text, "length"


def _top_directives(prompt: str) -> list[str]:
    for kind, arg in _MARKER_RE.findall(prompt):
        if kind == "top":
            return arg.split("|")
    return []


@dataclass
class FakeServerConfig(Section):
    """How the fake server behaves for every request (markers in a prompt add per-request faults)."""

    model: str = "fake-model"
    latency_s: float = 0.0
    """Every request waits this long before it is answered."""
    fault: Optional[Literal[FAULT_KINDS]] = None
    """A kind from :data:`FAULT_KINDS` applied to every request (see ``fault_count``)."""
    fault_count: int | None = None
    """Apply ``fault`` only to the first N requests the server receives (``None``: to all)."""
    retry_after_s: float | None = 0.05
    """Retry-After (seconds) sent with 429 and 503 answers; ``None`` sends no header."""
    hang_s: float = 5.0
    """How long a ``timeout`` fault holds the request (the client should give up first)."""
    echo: bool = True
    """Honour ``echo=True`` on /completions; ``False`` ignores it (answers without the prompt)."""
    prompt_logprobs: bool = False
    """Answer vLLM's ``prompt_logprobs`` extension; ``False`` ignores it silently (as llama.cpp does)."""
    no_bos_echo_shift: bool = False
    """Imitate llama-cpp-python's echo logprobs for models without a BOS token: the logprob reported
    for prompt token i is read from the distribution *after* token i (one position late), the top
    list at i is the one that predicts token i+1, and the generated token gets no entry."""
    require_logits_all: bool = False
    """Imitate llama.cpp started without ``--logits_all``: any logprobs request fails with a 500."""
    reject_n: bool = False
    """Answer 400 to ``n > 1`` (as some servers do)."""
    ignore_n: bool = False
    """Answer ``n > 1`` with a single choice (as llama-cpp-python does)."""
    max_logprobs: int = 20
    """Largest ``logprobs`` / ``top_logprobs`` accepted; larger requests get a 400."""
    max_model_len: int | None = 2048
    """Context window reported by /v1/models (vLLM's ``max_model_len``); ``None`` omits it."""
    tokenize_endpoints: bool = True
    """Serve llama-cpp-python's /extras/tokenize endpoints."""


@dataclass
class LoggedRequest:
    path: str
    body: dict
    fault: str | None
    status: int
    at: float = field(default_factory=time.monotonic)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like real servers; every answer sets Content-Length
    server: "_Server"

    def log_message(self, format, *args):  # keep test output clean
        pass

    def do_GET(self):
        self.server.owner._handle(self, "GET")

    def do_POST(self):
        self.server.owner._handle(self, "POST")

    def send_json(self, status: int, payload: Any, headers: dict | None = None) -> None:
        self.send_raw(status, json.dumps(payload).encode(), headers)

    def send_raw(self, status: int, body: bytes, headers: dict | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256  # a burst of concurrent connects must not overflow the listen backlog
    owner: "FakeOpenAIServer"


class _Reject(Exception):
    def __init__(self, status: int, message: str, param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


class FakeOpenAIServer:
    """The server as a context manager: ``with FakeOpenAIServer(cfg) as s: s.base_url``."""

    def __init__(self, config: FakeServerConfig | None = None, model: FakeModel | None = None, port: int = 0):
        self.config = config or FakeServerConfig()
        self._port = port
        self.model = model or FakeModel()
        self.log: list[LoggedRequest] = []
        self._lock = threading.Lock()
        self._attempts: dict[str, int] = {}
        self._received = 0
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self.in_flight = 0
        self.max_in_flight = 0

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> "FakeOpenAIServer":
        self._httpd = _Server(("127.0.0.1", self._port), _Handler)  # port 0: the OS picks a free port
        self._httpd.owner = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True, name="fake-openai"
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes every delayed or hanging handler
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def configure(self, **changes) -> None:
        """Change the configuration while running (takes effect for the next request)."""
        with self._lock:
            self.config = replace(self.config, **changes)

    def requests_to(self, path: str) -> list[LoggedRequest]:
        with self._lock:
            return [r for r in self.log if r.path == path]

    # -- request handling --------------------------------------------------------------------

    def _handle(self, h: _Handler, method: str) -> None:
        cfg = self.config
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            body = None
        path = h.path.split("?", 1)[0]
        entry = LoggedRequest(path, body if isinstance(body, dict) else {}, None, 0)
        with self._lock:
            self.log.append(entry)  # logged on arrival, so requests still being held are counted
            self._received += 1
            received = self._received
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        status = 200
        fault = None
        try:
            if body is None or not isinstance(body, dict):
                status = 400
                h.send_json(400, _error("request body is not a JSON object"))
                return
            try:
                fault, delay = self._fault_for(_request_text(body), received, cfg)
                if delay > 0:
                    self._stopping.wait(delay)
                status = self._apply_fault(h, fault, cfg) if fault else 0
                if status:
                    return
                payload = self._route(method, path, body, cfg)
            except _Reject as rej:
                status = rej.status
                h.send_json(rej.status, _error(rej.message, rej.param))
                return
            if fault == "no_logprobs":
                for choice in payload.get("choices", []):
                    choice["logprobs"] = None
                    choice.pop("prompt_logprobs", None)
            if fault == "empty_choices":
                payload["choices"] = []
            status = 200
            h.send_json(200, payload)
        finally:
            with self._lock:
                self.in_flight -= 1
                entry.fault, entry.status = fault, status

    def _fault_for(self, text: str, received: int, cfg: FakeServerConfig) -> tuple[str | None, float]:
        fault, delay = None, cfg.latency_s
        for kind, arg in _MARKER_RE.findall(text):
            if kind == "delay":
                delay += float(arg)
            elif kind == "fault":
                name, _, times = arg.partition("*")
                if name not in FAULT_KINDS:
                    raise _Reject(400, f"<<fault:{arg}>>: unknown fault kind {name!r}; known: {FAULT_KINDS}")
                with self._lock:
                    key = f"{name}\x00{text}"
                    seen = self._attempts.get(key, 0)
                    self._attempts[key] = seen + 1
                if not times or seen < int(times):
                    fault = name
        if fault is None and cfg.fault is not None and (cfg.fault_count is None or received <= cfg.fault_count):
            fault = cfg.fault
        return fault, delay

    def _apply_fault(self, h: _Handler, fault: str, cfg: FakeServerConfig) -> int:
        """Answer with the fault, or return 0 when the fault only changes a normal answer."""
        headers = {"Retry-After": f"{cfg.retry_after_s:g}"} if cfg.retry_after_s is not None else {}
        if fault == "429":
            h.send_json(429, _error("Rate limit reached (fake)", code="rate_limit_exceeded"), headers)
            return 429
        if fault in ("500", "503"):
            h.send_json(int(fault), _error(f"fake server error {fault}"), headers if fault == "503" else None)
            return int(fault)
        if fault == "400":
            h.send_json(400, _error("fake invalid request", "prompt"))
            return 400
        if fault == "drop":
            h.close_connection = True
            try:
                h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return 599
        if fault == "timeout":
            self._stopping.wait(cfg.hang_s)
            h.send_json(500, _error("fake server answered after the client's timeout"))
            return 598
        if fault == "malformed":
            h.send_raw(200, b'{"id": "cmpl-broken", "choices": [ {"text": ')
            return 597
        return 0

    def _route(self, method: str, path: str, body: dict, cfg: FakeServerConfig) -> dict:
        if method == "GET" and path == "/v1/models":
            entry = {"id": cfg.model, "object": "model", "created": 0, "owned_by": "fake-openai"}
            if cfg.max_model_len is not None:
                entry["max_model_len"] = cfg.max_model_len
            return {"object": "list", "data": [entry]}
        if method == "POST" and path == "/v1/completions":
            return self._completions(body, cfg)
        if method == "POST" and path == "/v1/chat/completions":
            return self._chat(body, cfg)
        if method == "POST" and path.startswith("/extras/") and cfg.tokenize_endpoints:
            return self._extras(path, body)
        raise _Reject(404, f"no route for {method} {path}")

    def _extras(self, path: str, body: dict) -> dict:
        if path in ("/extras/tokenize", "/extras/tokenize/count"):
            text = body.get("input")
            if not isinstance(text, str):
                raise _Reject(422, "input: expected a string", "input")
            ids = [self.model.token_id(t) for t in tokenize(text)]
            return {"count": len(ids)} if path.endswith("/count") else {"tokens": ids}
        if path == "/extras/detokenize":
            ids = body.get("tokens")
            if not isinstance(ids, list):
                raise _Reject(422, "tokens: expected a list of ids", "tokens")
            return {"text": "".join(self.model.token_string(int(i)) for i in ids)}
        raise _Reject(404, f"no route for POST {path}")

    # -- protocol ---------------------------------------------------------------------------

    def _common(self, body: dict, cfg: FakeServerConfig) -> tuple[int, int, float, list[str]]:
        n = int(body.get("n") or 1)
        if n > 1 and cfg.reject_n:
            raise _Reject(400, f"n: only n=1 is supported, got {n}", "n")
        if n > 1 and cfg.ignore_n:
            n = 1
        max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
        max_tokens = 16 if max_tokens is None else int(max_tokens)
        if max_tokens <= 0:  # llama.cpp reads 0 as "unlimited": refuse, so a client never sends it
            raise _Reject(400, f"max_tokens: must be at least 1, got {max_tokens}", "max_tokens")
        stop = body.get("stop") or []
        stop = [stop] if isinstance(stop, str) else list(stop)
        return n, max_tokens, float(body.get("temperature", 1.0)), stop

    def _completions(self, body: dict, cfg: FakeServerConfig) -> dict:
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise _Reject(400, "prompt: this server accepts one string prompt", "prompt")
        n, max_tokens, temperature, stop = self._common(body, cfg)
        k = body.get("logprobs")
        if k is not None and cfg.require_logits_all:
            raise _Reject(500, "logprobs is not supported for models created with logits_all=False")
        if k is not None and int(k) > cfg.max_logprobs:
            raise _Reject(400, f"logprobs: at most {cfg.max_logprobs}, got {k}", "logprobs")
        echo = bool(body.get("echo")) and cfg.echo
        p_lp = body.get("prompt_logprobs")
        prompt_tokens = tokenize(prompt)
        choices, completion_tokens = [], 0
        for i in range(n):
            steps, text, finish = self.model.generate(prompt, max_tokens, temperature, f"{body.get('seed')}|{i}", stop)
            completion_tokens += len(steps)
            choice: dict[str, Any] = {"index": i, "text": (prompt + text) if echo else text,
                                      "finish_reason": finish, "logprobs": None}
            if k is not None:
                choice["logprobs"] = self._completion_logprobs(prompt, steps, int(k), echo, cfg)
            if p_lp is not None and cfg.prompt_logprobs:
                choice["prompt_logprobs"] = self._vllm_prompt_logprobs(prompt, int(p_lp))
            choices.append(choice)
        return {
            "id": "cmpl-fake", "object": "text_completion", "created": int(time.time()), "model": cfg.model,
            "choices": choices,
            "usage": {"prompt_tokens": len(prompt_tokens), "completion_tokens": completion_tokens,
                      "total_tokens": len(prompt_tokens) + completion_tokens},
        }

    def _completion_logprobs(self, prompt: str, steps: list[Step], k: int, echo: bool, cfg) -> dict:
        tokens, lps, tops, offsets = [], [], [], []

        def add(tok: str, lp: float | None, top: dict | None, offset: int) -> None:
            tokens.append(tok), lps.append(lp), tops.append(top), offsets.append(offset)

        def top_of(dist, chosen: str, chosen_lp: float) -> dict:
            top = dict(dist[:k])
            top[chosen] = chosen_lp  # the chosen token is always listed (OpenAI: up to k+1 entries)
            return top

        if echo:
            ptoks = tokenize(prompt)
            offset = 0
            if cfg.no_bos_echo_shift:
                # llama-cpp-python without BOS pairs token i with the logits computed *after* it
                vocab = self.model.vocabulary(prompt)
                for i, tok in enumerate(ptoks):
                    dist = self.model.distribution(ptoks[: i + 1], vocab)
                    lp = dict(dist)[tok]
                    add(tok, None if i == 0 else lp, None if i == 0 else top_of(dist, tok, lp), offset)
                    offset += len(tok)
                return {"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets}
            for i, step in enumerate(self.model.prompt_steps(prompt)):
                tok = ptoks[i]
                if step is None:
                    add(tok, None, None, offset)
                else:
                    add(tok, step.logprob, top_of(step.top, tok, step.logprob), offset)
                offset += len(tok)
        offset = len(prompt)
        for step in steps:
            add(step.token, step.logprob, top_of(step.top, step.token, step.logprob), offset)
            offset += len(step.token)
        return {"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets}

    def _vllm_prompt_logprobs(self, prompt: str, k: int) -> list:
        out: list = []
        for step in self.model.prompt_steps(prompt):
            if step is None:
                out.append(None)
                continue
            entry = {str(self.model.token_id(step.token)): {"logprob": step.logprob, "rank": 1 + [t for t, _ in step.top].index(step.token), "decoded_token": step.token}}
            for rank, (tok, lp) in enumerate(step.top[:k], start=1):
                entry.setdefault(str(self.model.token_id(tok)), {"logprob": lp, "rank": rank, "decoded_token": tok})
            out.append(entry)
        return out

    def _chat(self, body: dict, cfg: FakeServerConfig) -> dict:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _Reject(400, "messages: expected a non-empty list", "messages")
        prompt = _request_text(body)
        n, max_tokens, temperature, stop = self._common(body, cfg)
        want = bool(body.get("logprobs"))
        k = int(body.get("top_logprobs") or 0)
        if want and cfg.require_logits_all:
            raise _Reject(500, "logprobs is not supported for models created with logits_all=False")
        if k > cfg.max_logprobs:
            raise _Reject(400, f"top_logprobs: at most {cfg.max_logprobs}, got {k}", "top_logprobs")
        choices, completion_tokens = [], 0
        for i in range(n):
            steps, text, finish = self.model.generate(prompt, max_tokens, temperature, f"{body.get('seed')}|{i}", stop)
            completion_tokens += len(steps)
            logprobs = None
            if want:
                logprobs = {"content": [
                    {"token": s.token, "logprob": s.logprob, "bytes": list(s.token.encode()),
                     "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in s.top[:k]]}
                    for s in steps
                ]}
            choices.append({"index": i, "message": {"role": "assistant", "content": text},
                            "finish_reason": finish, "logprobs": logprobs})
        prompt_tokens = len(tokenize(prompt))
        return {
            "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": cfg.model,
            "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }


def chat_prompt(messages: list[dict]) -> str:
    """The text the fake model reads for a chat request: the message contents, one per line."""
    return "\n".join(str(m.get("content") or "") for m in messages)


def _request_text(body: dict) -> str:
    if isinstance(body.get("prompt"), str):
        return body["prompt"]
    if isinstance(body.get("messages"), list):
        return chat_prompt([m for m in body["messages"] if isinstance(m, dict)])
    if isinstance(body.get("input"), str):
        return body["input"]
    return ""


def _error(message: str, param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def main(argv: list[str] | None = None) -> None:
    """Run the fake server in its own process, in the foreground (the benchmark does, so client and
    server do not share a GIL; a README walkthrough does, as a stand-in for vLLM). Prints
    ``READY <base_url>`` and serves until killed, Ctrl-C or ``--max-seconds`` pass."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tests.doubles.fake_openai",
                                 description="A fake OpenAI-compatible server on 127.0.0.1 (deterministic answers, "
                                             "injectable faults). Run from the root of a clone.")
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default 0: a free one)")
    ap.add_argument("--model", default=FakeServerConfig.model, help="the model name /v1/models reports")
    ap.add_argument("--latency", type=float, default=0.0, help="seconds every answer waits")
    ap.add_argument("--fault", choices=FAULT_KINDS, default=None, help="apply this fault to every request")
    ap.add_argument("--max-seconds", type=float, default=600.0,
                    help="stop after this long (bounded by design; 0: until killed)")
    args = ap.parse_args(argv)
    cfg = FakeServerConfig(model=args.model, latency_s=args.latency, fault=args.fault)
    with FakeOpenAIServer(cfg, port=args.port) as server:
        print(f"READY {server.base_url}", flush=True)
        try:
            server._stopping.wait(args.max_seconds if args.max_seconds > 0 else None)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
