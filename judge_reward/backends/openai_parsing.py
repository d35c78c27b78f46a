"""Response parsing of the OpenAI-compatible backend (pure functions: a response in, numbers or a
:class:`~judge_reward.backends.openai_transport._BadAnswer` out): top logprobs of completions and
chat answers for G-Eval, echoed and vLLM ``prompt_logprobs`` continuation logprobs for GPTScore."""

from __future__ import annotations

import math

from ..candidates import TopPosition
from .openai_transport import _BadAnswer


def _extra(obj, name: str):
    """A field the openai types do not declare (vLLM's ``prompt_logprobs``)."""
    value = getattr(obj, name, None)
    if value is None:
        value = (getattr(obj, "model_extra", None) or {}).get(name)
    return value


def _choices(resp) -> list:
    choices = getattr(resp, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise _BadAnswer("malformed", f"response has no choices (choices={choices!r})", True)
    return choices


def _no_logprobs(where: str) -> _BadAnswer:
    return _BadAnswer(
        "no_logprobs",
        f"server returned no logprobs ({where}); it cannot give G-Eval probabilities. "
        "Choose the sampling estimate explicitly, or a server/model that returns logprobs",
    )


def _completion_positions(resp) -> tuple[list[TopPosition], str]:
    choice = _choices(resp)[0]
    lp = getattr(choice, "logprobs", None)
    if lp is None or not lp.tokens:
        raise _no_logprobs("choices[0].logprobs is empty")
    tops = lp.top_logprobs
    if not tops or len(tops) != len(lp.tokens):
        raise _no_logprobs(f"choices[0].logprobs.top_logprobs={tops!r} does not match {len(lp.tokens)} tokens")
    positions = []
    for i, tok in enumerate(lp.tokens):
        top = tops[i]
        if not isinstance(top, dict) or not top:
            raise _no_logprobs(f"choices[0].logprobs.top_logprobs[{i}]={top!r}")
        positions.append(TopPosition(tok, tuple((str(t), float(v)) for t, v in top.items() if v is not None)))
    return positions, choice.text or ""


def _chat_positions(resp) -> tuple[list[TopPosition], str]:
    choice = _choices(resp)[0]
    lp = getattr(choice, "logprobs", None)
    content = getattr(lp, "content", None) if lp is not None else None
    if not content:
        raise _no_logprobs("choices[0].logprobs.content is empty")
    positions = []
    for i, item in enumerate(content):
        top = tuple((t.token, float(t.logprob)) for t in (item.top_logprobs or []))
        if not top:
            raise _no_logprobs(f"choices[0].logprobs.content[{i}].top_logprobs is empty (top_logprobs not honoured)")
        positions.append(TopPosition(item.token, top))
    message = getattr(choice, "message", None)
    return positions, (getattr(message, "content", None) or "")


def _loose(text: str) -> str:
    # tokens of split multi-byte characters decode to nothing or U+FFFD; compare without them
    return "".join(ch for ch in text if ch.isascii())


def _pick_continuation(offsets: list[int], tokens: list[str], start: int, end: int) -> tuple[list[int], bool]:
    """Indices of the tokens that belong to ``text[start:end]``: starting inside it, or straddling
    its start (the tokenizer merged context and continuation; flagged)."""
    picked, straddle = [], False
    for i, (off, tok) in enumerate(zip(offsets, tokens)):
        if start <= off < end:
            picked.append(i)
        elif off < start < off + len(tok):
            picked.append(i)
            straddle = True
    return picked, straddle


def _check_spelling(tokens: list[str], continuation: str, where: str) -> None:
    joined = "".join(tokens)
    if joined.endswith(continuation) or _loose(joined).endswith(_loose(continuation)):
        return
    raise _BadAnswer(
        "malformed",
        f"{where}: the tokens found for the continuation spell {joined[:80]!r}, not {continuation[:80]!r}",
    )


def _echo_continuation(resp, context: str, continuation: str, shifted: bool, k: int):
    choice = _choices(resp)[0]
    lp = getattr(choice, "logprobs", None)
    if lp is None or not lp.tokens or lp.token_logprobs is None or lp.text_offset is None:
        raise _no_logprobs("echo: choices[0].logprobs is empty")
    tokens, lps, offsets = list(lp.tokens), list(lp.token_logprobs), list(lp.text_offset)
    if not (len(tokens) == len(lps) == len(offsets)):
        raise _BadAnswer("malformed", f"echo: {len(tokens)} tokens, {len(lps)} logprobs, {len(offsets)} offsets")
    prompt = context + continuation
    if not (choice.text or "").startswith(prompt):
        raise _BadAnswer("unsupported", "echo: the server did not echo the prompt (echo=True ignored)")
    picked, straddle = _pick_continuation(offsets, tokens, len(context), len(prompt))
    if not picked:
        raise _BadAnswer("malformed", f"echo: no echoed token has a text_offset in [{len(context)}, {len(prompt)})")
    out_tokens = [tokens[i] for i in picked]
    _check_spelling(out_tokens, continuation, "echo")
    values = []
    tops = lp.top_logprobs or []
    for i in picked:
        if not shifted:
            value = lps[i]
        else:  # llama.cpp without BOS: the list that predicts token i sits at i - 1
            top = tops[i - 1] if 0 < i <= len(tops) else None
            value = top.get(tokens[i]) if isinstance(top, dict) else None
            if value is None:
                raise _BadAnswer(
                    "unsupported",
                    f"echo shifted by one token (llama.cpp, model without BOS): token {tokens[i]!r} at offset "
                    f"{offsets[i]} is outside the top-{k} list of its position; raise shifted_echo_top_logprobs "
                    "or use a server whose echo is aligned",
                )
        if value is None or not math.isfinite(value):
            raise _BadAnswer("malformed", f"echo: token {tokens[i]!r} at offset {offsets[i]} has logprob {value!r}")
        values.append(float(value))
    details = {"context_tokens": picked[0], "boundary": "merged" if straddle else "canonical"}
    return out_tokens, values, details


def _prompt_logprobs_continuation(resp, context: str, continuation: str):
    choice = _choices(resp)[0]
    entries = _extra(choice, "prompt_logprobs")
    if not isinstance(entries, list) or not entries:
        raise _no_logprobs("prompt_logprobs: the server ignored it")
    prompt = context + continuation
    tokens, values = [], []
    for i, entry in enumerate(entries):
        if i == 0 and entry is None:  # the first prompt token has nothing before it
            tokens.append(None), values.append(None)
            continue
        if not isinstance(entry, dict) or not entry:
            raise _BadAnswer("malformed", f"prompt_logprobs[{i}]={entry!r}")
        first = next(iter(entry.values()))  # vLLM lists the prompt's own token first
        if not isinstance(first, dict) or "logprob" not in first:
            raise _BadAnswer("malformed", f"prompt_logprobs[{i}] has no logprob: {first!r}")
        tokens.append(str(first.get("decoded_token") or ""))
        values.append(float(first["logprob"]))
    # offsets from the end: the decoded tokens after the first spell the end of the prompt
    tail = "".join(t for t in tokens[1:])
    if not prompt.endswith(tail):
        raise _BadAnswer("malformed", f"prompt_logprobs: decoded tokens spell {tail[-80:]!r}, not the prompt's end")
    offsets, pos = [0] * len(tokens), len(prompt)
    for i in range(len(tokens) - 1, 0, -1):
        pos -= len(tokens[i])
        offsets[i] = pos
    texts = ["" if t is None else t for t in tokens]
    picked, straddle = _pick_continuation(offsets, texts, len(context), len(prompt))
    picked = [i for i in picked if i > 0 or tokens[0] is not None]
    if not picked or values[picked[0]] is None:
        raise _BadAnswer("malformed", "prompt_logprobs: the continuation's first token has no logprob")
    out_tokens = [texts[i] for i in picked]
    _check_spelling(out_tokens, continuation, "prompt_logprobs")
    return out_tokens, [values[i] for i in picked], {"context_tokens": picked[0], "boundary": "merged" if straddle else "canonical"}
