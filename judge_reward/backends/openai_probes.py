"""Capability probes of the OpenAI-compatible backend: which GPTScore transport the server honours
(echo or ``prompt_logprobs``), whether its echo is shifted by one token (llama.cpp without BOS) and
how slow echo is there. :class:`_CapabilityProbes` is a base of
:class:`~judge_reward.backends.openai_compat.OpenAIBackend`."""

from __future__ import annotations

import logging
import time
from typing import Any

from .base import BackendError
from .openai_parsing import _choices, _extra
from .openai_transport import _BadAnswer

log = logging.getLogger("judge_reward.backends.openai_compat")

# Induction-friendly probe: on the repeats every model predicts the next word confidently, which
# tells an aligned echo from a shifted one (see _echo_shift_from_statistics).
PROBE_TEXT = "one two three four one two three four one two three four one two"


def _detect_echo_shift(text: str, lp) -> tuple[int, str]:
    """Is echo logprob i about token i (0) or one position late (1, llama.cpp without BOS)?

    Structural evidence first: llama-cpp-python pairs tokens with the rows of logits it computed,
    and without a BOS token there is one row too few, so the generated token goes missing from the
    echoed lists. When generation ended at once (nothing to miss), the top lists decide: aligned,
    the most likely token at i is usually token i itself on a repetitive text; shifted, token i+1.
    """
    tokens, offsets = lp.tokens, lp.text_offset
    if len(text) > len(PROBE_TEXT):
        covered = offsets[-1] + len(tokens[-1]) if tokens else 0
        if covered <= len(PROBE_TEXT):
            return 1, "generated token missing from echoed logprobs"
        return 0, "generated token present in echoed logprobs"
    return _echo_shift_from_statistics(tokens, lp.top_logprobs or [])


def _echo_shift_from_statistics(tokens: list[str], tops: list) -> tuple[int, str]:
    aligned = shifted = 0
    for i, top in enumerate(tops):
        if not top:
            continue
        best = max(top.items(), key=lambda kv: kv[1])[0]
        aligned += best == tokens[i]
        shifted += i + 1 < len(tokens) and best == tokens[i + 1]
    return (1 if shifted > aligned else 0), f"top-1 matched its own token {aligned}x, the next token {shifted}x"


def _probe_answer(resp):
    """A probe answer must at least have choices; an empty or unparseable one is a transient fault
    (retried as ``malformed``), not evidence that the server lacks echo or prompt_logprobs."""
    _choices(resp)
    return resp


class _CapabilityProbes:
    """What the server supports, found once per backend and kept in ``self._caps``."""

    def capabilities(self) -> dict:
        """What has been detected about the server so far (continuation mode, echo shift, n support)."""
        return dict(self._caps)

    def _echo_timeout(self, prompt: str) -> float:
        """Stretch the timeout where echo was measured to be slow (llama.cpp), so retries do not pile
        the same slow work onto a server that cannot cancel it."""
        per_token = self._caps.get("echo_s_per_token")
        if not per_token:
            return self.config.timeout_s
        return max(self.config.timeout_s, 3.0 * per_token * self._estimate(prompt, 1))

    async def _continuation_mode(self) -> str:
        """Find (once) how this server gives prompt-token logprobs, and whether its echo is shifted."""
        cfg = self.config
        async with self._probe_lock:
            if "continuation_mode" in self._caps:
                return self._caps["continuation_mode"]
            mode = cfg.continuation_mode
            if mode in ("auto", "echo"):
                echo = await self._probe_echo()
                if echo is not None:
                    self._caps.update(echo)
                    mode = "echo"
                elif mode == "echo":
                    raise BackendError(
                        f"continuation_mode: 'echo' was asked for, but {self.base_url} ignores echo=True with "
                        "logprobs on /completions"
                    )
            if mode in ("auto", "prompt_logprobs"):
                if await self._probe_prompt_logprobs():
                    mode = "prompt_logprobs"
                else:
                    raise BackendError(
                        f"GPTScore needs prompt-token logprobs, and {self.base_url} gives neither: /completions "
                        "ignores echo=True with logprobs, and vLLM's prompt_logprobs is ignored too "
                        "(llama.cpp ignores prompt_logprobs; OpenAI's chat models support neither). "
                        "Use a server that supports echo or prompt_logprobs, or the local backend."
                    )
            self._caps["continuation_mode"] = mode
            return mode

    async def _probe_echo(self) -> dict | None:
        """Echo the probe text with logprobs. ``None`` when echo is ignored; else what was learned."""
        cfg = self.config
        took: list[float] = []  # duration of each attempt that got an answer

        async def send():
            t0 = time.monotonic()
            resp = await self._aclient.completions.create(
                model=cfg.model, prompt=PROBE_TEXT, max_tokens=1, temperature=0.0, echo=True, logprobs=1,
                extra_body=self._body() or None,
            )
            took.append(time.monotonic() - t0)
            return resp

        try:
            resp, _ = await self._request(send, _probe_answer, self._estimate(PROBE_TEXT, 1))
        except _BadAnswer as err:
            if err.kind in ("client_error", "unsupported"):
                if "logits_all" in err.reason:
                    raise BackendError(err.reason) from None
                return None  # echo refused outright: try the next mode
            raise
        elapsed = took[-1]  # the answering attempt only: retry waits and failed attempts are no echo cost
        choice = (resp.choices or [None])[0]
        lp = getattr(choice, "logprobs", None)
        if choice is None or lp is None or not lp.tokens or not lp.text_offset or not (choice.text or "").startswith(PROBE_TEXT):
            return None
        caps: dict[str, Any] = {"echo_probe_tokens": len(lp.tokens)}
        per_token = elapsed / max(len(lp.tokens), 1)
        if per_token > 0.05:
            caps["echo_s_per_token"] = per_token
            log.warning(
                "%s: echo logprobs cost %.2f s per prompt token here (llama.cpp sorts the whole vocabulary for "
                "each one); GPTScore through this server suits small tests only", self.base_url, per_token,
            )
        if cfg.echo_alignment != "auto":
            caps["echo_shift"] = 1 if cfg.echo_alignment == "shifted" else 0
            caps["echo_shift_evidence"] = "configured"
            return caps
        shift, evidence = _detect_echo_shift(choice.text, lp)
        caps["echo_shift"], caps["echo_shift_evidence"] = shift, evidence
        if shift:
            log.warning(
                "%s: echo logprobs are shifted by one token (llama.cpp with a model that adds no BOS token); "
                "reading each token's logprob from the previous position's top-%d list instead",
                self.base_url, cfg.shifted_echo_top_logprobs,
            )
        return caps

    async def _probe_prompt_logprobs(self) -> bool:
        cfg = self.config

        async def send():
            return await self._aclient.completions.create(
                model=cfg.model, prompt=PROBE_TEXT, max_tokens=1, temperature=0.0,
                extra_body=self._body(prompt_logprobs=1),
            )

        try:
            resp, _ = await self._request(send, _probe_answer, self._estimate(PROBE_TEXT, 1))
        except _BadAnswer as err:
            if err.kind == "client_error":
                return False
            raise
        choice = (resp.choices or [None])[0]
        entries = _extra(choice, "prompt_logprobs") if choice is not None else None
        return isinstance(entries, list) and any(isinstance(e, dict) and e for e in entries)
