"""OpenAIBackend with the real openai client against the fault-injecting loopback server."""

import asyncio
import math
import multiprocessing as mp
import sys
import threading
import time

import pytest

from judge_reward.backends.base import (
    BackendError,
    CandidateRequest,
    ContinuationRequest,
    GenerationRequest,
    JudgeBackend,
)
from judge_reward.backends.openai_compat import (
    PROBE_TEXT,
    OpenAIBackend,
    OpenAIBackendConfig,
    _echo_shift_from_statistics,
)
from judge_reward.candidates import strip_token_space
from tests.doubles.fake_openai import FAULT_KINDS, FakeModel, FakeOpenAIServer, FakeServerConfig, tokenize

SCALE = tuple("12345")
SLOT = "Rate the summary.\n- Coherence: "


@pytest.fixture
def server():
    with FakeOpenAIServer() as s:
        yield s


def make(server, **kw):
    kw.setdefault("backoff_initial_s", 0.01)
    kw.setdefault("backoff_max_s", 0.05)
    kw.setdefault("timeout_s", 5.0)
    return OpenAIBackend(OpenAIBackendConfig(model="fake", base_url=server.base_url, **kw))


def expected_single_token(prompt, cands=SCALE):
    """P(value) straight from the fake model: every listed spelling of the value at position 0."""
    dist = FakeModel().next_distribution(prompt)[:20]
    return [math.fsum(math.exp(lp) for tok, lp in dist if strip_token_space(tok) == c) for c in cands]


def expected_continuation(context, continuation):
    prompt = context + continuation
    steps = FakeModel().prompt_steps(prompt)
    out, offset = [], 0
    for tok, step in zip(tokenize(prompt), steps):
        if offset >= len(context):
            out.append((tok, step.logprob))
        offset += len(tok)
    return out


# -- G-Eval through top_logprobs -----------------------------------------------------------------


def test_is_a_judge_backend_and_maps_candidates_exactly(server):
    prompts = [SLOT, "Another text.\n- Fluency: ", "x\n- Relevance: "]
    with make(server) as b:
        assert isinstance(b, JudgeBackend)
        out = b.candidate_logprobs([CandidateRequest(p, SCALE) for p in prompts])
    for p, res in zip(prompts, out):
        assert res.error is None
        want = expected_single_token(p)
        got = [math.exp(lp) if lp > -math.inf else 0.0 for lp in res.logprobs]
        assert got == pytest.approx(want, abs=1e-12)
        assert res.details["mass"] == pytest.approx(sum(want))
        assert res.details["exact"] == [True] * 5
        assert 0 < res.details["mass"] < res.details["listed_mass"] <= 1
    body = server.requests_to("/v1/completions")[0].body
    assert body["max_tokens"] == 1 and body["logprobs"] == 20 and body["temperature"] == 0.0
    assert body["prompt"].endswith(": ")  # the slot's space is kept by default


def test_both_spellings_are_summed(server):
    # the fake lists "4" and " 4" as different tokens; the mapping must add them
    dist = dict(FakeModel().next_distribution(SLOT)[:20])
    assert "4" in dist or " 4" in dist
    with make(server) as b:
        res = b.candidate_logprobs([CandidateRequest(SLOT, SCALE)])[0]
    both = math.exp(dist.get("4", -math.inf)) + math.exp(dist.get(" 4", -math.inf))
    assert math.exp(res.logprobs[3]) == pytest.approx(both)


def test_multi_token_values_follow_the_generated_path(server):
    cands = tuple(str(i) for i in range(1, 11))
    prompt = SLOT + "<<top:1|0>>"  # steer the generated path through "1", "0"
    with make(server) as b:
        res = b.candidate_logprobs([CandidateRequest(prompt, cands)])[0]
    body = server.requests_to("/v1/completions")[0].body
    assert body["max_tokens"] == 3  # "10": two digits plus one to see the number end
    m = FakeModel()
    first = dict(m.next_distribution(prompt))
    second = dict(m.next_distribution(prompt, ["1"]))
    assert math.exp(res.logprobs[9]) == pytest.approx(math.exp(first["1"] + second["0"]))
    assert res.details["exact"][9] is False and res.details["exact"][1] is True


def test_chat_endpoint_and_trimmed_slot_space(server):
    with make(server, endpoint="chat", system_prompt="You are a judge.", top_logprobs=5, trim_slot_space=True) as b:
        res = b.candidate_logprobs([CandidateRequest(SLOT, SCALE)])[0]
    body = server.requests_to("/v1/chat/completions")[0].body
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    assert body["messages"][0] == {"role": "system", "content": "You are a judge."}
    assert body["messages"][1]["content"] == SLOT[:-1]
    dist = FakeModel().next_distribution("You are a judge.\n" + SLOT[:-1])[:5]
    want = [math.fsum(math.exp(lp) for t, lp in dist if strip_token_space(t) == c) for c in SCALE]
    got = [math.exp(lp) if lp > -math.inf else 0.0 for lp in res.logprobs]
    assert got == pytest.approx(want)


def test_missing_logprobs_is_an_error_not_a_fallback():
    with FakeOpenAIServer(FakeServerConfig(fault="no_logprobs")) as s, make(s) as b:
        res = b.candidate_logprobs([CandidateRequest(SLOT, SCALE)])[0]
        assert res.logprobs is None and "no logprobs" in res.error and "sampling" in res.error
        assert res.details["failure"] == "no_logprobs"
        assert len(s.log) == 1  # not retried: a server without logprobs will not grow them
        assert b.stats()["failures"] == {"no_logprobs": 1}


# -- faults: every kind, retries, order ------------------------------------------------------------

FAULT_EXPECT = {
    "429": ("rate_limited", True),
    "500": ("server_error", True),
    "503": ("server_error", True),
    "400": ("client_error", False),
    "drop": ("connection", True),
    "timeout": ("timeout", True),
    "no_logprobs": ("no_logprobs", False),
    "empty_choices": ("malformed", True),
    "malformed": ("malformed", True),
}


def test_every_fault_kind_has_an_expectation():
    assert set(FAULT_EXPECT) == set(FAULT_KINDS)


@pytest.mark.parametrize("fault", FAULT_KINDS)
def test_persistent_fault_gives_a_reason_after_bounded_attempts(fault):
    kind, retryable = FAULT_EXPECT[fault]
    with FakeOpenAIServer(FakeServerConfig(hang_s=3.0)) as s, make(s, max_retries=2, timeout_s=0.5) as b:
        res = b.candidate_logprobs([CandidateRequest(f"{SLOT}<<fault:{fault}>>", SCALE)])[0]
        assert res.logprobs is None and res.error
        assert res.details["failure"] == kind
        attempts = 3 if retryable else 1
        assert len(s.log) == attempts or (fault == "drop" and len(s.log) >= attempts)
        st = b.stats()
        assert st["failures"] == {kind: 1} and st["failed"] == 1 and st["succeeded"] == 0
        assert st["attempt_failures"] == {kind: attempts}
        assert st["retries"] == attempts - 1
        if retryable:
            assert "after 3 attempts" in res.error


@pytest.mark.parametrize("fault", [f for f in FAULT_KINDS if FAULT_EXPECT[f][1]])
def test_transient_fault_is_retried_to_success(fault):
    with FakeOpenAIServer(FakeServerConfig(hang_s=3.0)) as s, make(s, max_retries=3, timeout_s=1.0) as b:
        prompt = f"{SLOT}<<fault:{fault}*2>>"
        res = b.candidate_logprobs([CandidateRequest(prompt, SCALE)])[0]
        assert res.error is None
        assert [math.exp(x) if x > -math.inf else 0 for x in res.logprobs] == pytest.approx(expected_single_token(prompt))
        assert res.details["attempts"] == 3
        assert b.stats()["retries"] == 2


def test_retry_after_is_honoured():
    def gap(retry_after):
        with FakeOpenAIServer(FakeServerConfig(retry_after_s=retry_after)) as s, make(s) as b:
            assert b.candidate_logprobs([CandidateRequest(SLOT + "<<fault:429*1>>", SCALE)])[0].error is None
            first, second = s.log
            return second.at - first.at

    assert gap(0.4) >= 0.4
    assert gap(None) < 0.2  # no header: the short configured backoff (10-50 ms here)


def test_mixed_faults_lose_nothing_and_keep_input_order():
    prompts = []
    for i in range(30):
        fault = ["", "<<fault:500*1>>", "<<fault:400>>", "<<fault:drop*1>>", "<<fault:empty_choices>>",
                 "<<fault:429*2>>", "<<fault:malformed*1>>", "<<fault:no_logprobs>>"][i % 8]
        prompts.append(f"Item {i}. {fault}\n- Coherence: ")
    with FakeOpenAIServer() as s, make(s, max_retries=2, max_concurrency=8) as b:
        out = b.candidate_logprobs([CandidateRequest(p, SCALE) for p in prompts])
        st = b.stats()
    assert len(out) == len(prompts)
    for p, res in zip(prompts, out):
        if "<<fault:400>>" in p or "<<fault:empty_choices>>" in p or "no_logprobs" in p:
            assert res.logprobs is None and res.error, p
        else:
            assert res.error is None, (p, res.error)
            want = expected_single_token(p)
            assert [math.exp(x) if x > -math.inf else 0 for x in res.logprobs] == pytest.approx(want)
    assert st["inputs"] == 30 and st["succeeded"] + st["failed"] == 30
    assert st["failures"] == {"client_error": 4, "malformed": 4, "no_logprobs": 3}
    assert st["prompt_tokens"] > 0 and st["completion_tokens"] > 0 and st["wall_time_s"] > 0


def test_logits_all_missing_is_named_and_not_retried():
    with FakeOpenAIServer(FakeServerConfig(require_logits_all=True)) as s, make(s) as b:
        res = b.candidate_logprobs([CandidateRequest(SLOT, SCALE)])[0]
        assert "--logits_all true" in res.error and res.details["failure"] == "unsupported"
        assert len(s.log) == 1
        with pytest.raises(BackendError, match="logits_all"):
            b.continuation_logprobs([ContinuationRequest("Context:", " words")])


# -- concurrency and rate limits -----------------------------------------------------------------


def test_grpo_batch_of_64_by_4_aspects_runs_concurrently():
    aspects = ["Coherence", "Consistency", "Fluency", "Relevance"]
    reqs = [CandidateRequest(f"Completion {i}.\n- {a}: ", SCALE) for i in range(64) for a in aspects]
    with FakeOpenAIServer(FakeServerConfig(latency_s=0.2)) as s, make(s, max_concurrency=64) as b:
        t = time.monotonic()
        out = b.candidate_logprobs(reqs)
        elapsed = time.monotonic() - t
        assert s.max_in_flight >= 32
    assert all(r.error is None for r in out) and len(out) == 256
    assert elapsed < 256 * 0.2 / 8  # sequential would be 51 s; the bound is 4 x 0.2 s
    assert b.stats()["calls"] == 1


def test_concurrency_limit_is_respected():
    with FakeOpenAIServer(FakeServerConfig(latency_s=0.05)) as s, make(s, max_concurrency=3) as b:
        b.candidate_logprobs([CandidateRequest(f"{i}\n- A: ", SCALE) for i in range(12)])
        assert s.max_in_flight == 3


def test_requests_per_minute_limit():
    with FakeOpenAIServer() as s, make(s, requests_per_minute=1200, rate_burst_s=0.25) as b:
        t = time.monotonic()
        b.candidate_logprobs([CandidateRequest(f"{i}\n- A: ", SCALE) for i in range(15)])
        elapsed = time.monotonic() - t
        # 20/s with a burst of 5: the other 10 need >= 0.5 s
        assert elapsed >= 0.45
        assert b.stats()["rate_limit_wait_s"] > 0


def test_tokens_per_minute_limit_uses_reported_usage():
    with FakeOpenAIServer() as s, make(s, tokens_per_minute=6000, rate_burst_s=0.1) as b:
        prompt = "word " * 40 + "\n- A: "  # ~45 tokens per request; 100 tokens/s, burst of 10
        t = time.monotonic()
        b.candidate_logprobs([CandidateRequest(prompt, SCALE) for _ in range(4)])
        # the reported usage (~45) is charged, not just the burst: 3 waits of >= 0.35 s
        assert time.monotonic() - t >= 1.0
        assert b.stats()["prompt_tokens"] == 4 * len(tokenize(prompt))


def test_sync_call_inside_a_running_event_loop_and_async_api(server):
    with make(server) as b:
        async def inside():
            sync = b.candidate_logprobs([CandidateRequest(SLOT, SCALE)])  # blocks this loop, must not deadlock
            both = await asyncio.gather(
                b.acandidate_logprobs([CandidateRequest(SLOT, SCALE)]),
                b.agenerate([GenerationRequest("Say", n=2, temperature=0.7, max_new_tokens=3, seed=3)]),
            )
            return sync, both

        sync, (cand, gen) = asyncio.run(inside())
    assert sync[0].logprobs == cand[0].logprobs
    assert len(gen[0].texts) == 2


# -- GPTScore: echo, prompt_logprobs, llama.cpp behaviours ---------------------------------------

LLAMACPP_NO_BOS = FakeServerConfig(no_bos_echo_shift=True, max_logprobs=100_000)  # llama.cpp has no cap
CONTEXT = "Article: the cat sat on the mat and the dog ran.\nSummary:"
CONT = " the cat sat."


def test_echo_continuation_logprobs_match_the_model(server):
    with make(server) as b:
        res = b.continuation_logprobs([ContinuationRequest(CONTEXT, CONT), ContinuationRequest(CONTEXT, " a dog ran")])
        caps = b.capabilities()
    assert caps["continuation_mode"] == "echo" and caps["echo_shift"] == 0
    for r, cont in zip(res, [CONT, " a dog ran"]):
        want = expected_continuation(CONTEXT, cont)
        assert r.tokens == [t for t, _ in want]
        assert r.token_logprobs == pytest.approx([lp for _, lp in want])
        assert r.details["mode"] == "echo"
    body = server.requests_to("/v1/completions")[-1].body
    assert body["echo"] is True and body["max_tokens"] == 1 and body["logprobs"] == 1


def test_prompt_logprobs_when_echo_is_ignored():
    with FakeOpenAIServer(FakeServerConfig(echo=False, prompt_logprobs=True)) as s, make(s) as b:
        res = b.continuation_logprobs([ContinuationRequest(CONTEXT, CONT)])[0]
        assert b.capabilities()["continuation_mode"] == "prompt_logprobs"
        assert s.requests_to("/v1/completions")[-1].body["prompt_logprobs"] == 1
    want = expected_continuation(CONTEXT, CONT)
    assert res.tokens == [t for t, _ in want]
    assert res.token_logprobs == pytest.approx([lp for _, lp in want])


def test_server_with_neither_is_named():
    with FakeOpenAIServer(FakeServerConfig(echo=False, prompt_logprobs=False)) as s, make(s) as b:
        with pytest.raises(BackendError, match="neither"):
            b.continuation_logprobs([ContinuationRequest(CONTEXT, CONT)])


def test_no_bos_llamacpp_echo_shift_is_detected_and_undone():
    with FakeOpenAIServer(LLAMACPP_NO_BOS) as s, make(s) as b:
        res = b.continuation_logprobs([ContinuationRequest(CONTEXT, CONT)])[0]
        caps = b.capabilities()
        assert s.requests_to("/v1/completions")[-1].body["logprobs"] == 100
    assert caps["echo_shift"] == 1 and "missing" in caps["echo_shift_evidence"]
    want = expected_continuation(CONTEXT, CONT)  # the aligned truth
    assert res.tokens == [t for t, _ in want]
    assert res.token_logprobs == pytest.approx([lp for _, lp in want])
    assert res.details["echo_shift"] == 1


def test_shifted_echo_token_outside_the_top_list_fails_by_name():
    with FakeOpenAIServer(LLAMACPP_NO_BOS) as s, make(s, shifted_echo_top_logprobs=1) as b:
        res = b.continuation_logprobs([ContinuationRequest(CONTEXT, " zebra quartz")])[0]
    assert res.token_logprobs is None and "shifted" in res.error and "shifted_echo_top_logprobs" in res.error


def test_shift_statistic_tells_aligned_from_shifted_without_a_generated_token():
    # When generation ends at once there is no missing token to see; the top lists must decide.
    import openai

    for shifted in (False, True):
        with FakeOpenAIServer(FakeServerConfig(no_bos_echo_shift=shifted)) as s:
            c = openai.OpenAI(base_url=s.base_url, api_key="x", max_retries=0)
            lp = c.completions.create(model="m", prompt=PROBE_TEXT, echo=True, logprobs=1, max_tokens=1).choices[0].logprobs
            n = len(tokenize(PROBE_TEXT))
            shift, evidence = _echo_shift_from_statistics(lp.tokens[:n], lp.top_logprobs[:n])
            assert shift == int(shifted), evidence


def test_echo_alignment_can_be_forced():
    with FakeOpenAIServer(LLAMACPP_NO_BOS) as s, make(s, echo_alignment="shifted") as b:
        b.continuation_logprobs([ContinuationRequest(CONTEXT, CONT)])
        assert b.capabilities()["echo_shift_evidence"] == "configured"


def test_continuation_faults_are_per_item():
    with FakeOpenAIServer() as s, make(s, max_retries=1) as b:
        res = b.continuation_logprobs([
            ContinuationRequest(CONTEXT, CONT),
            ContinuationRequest(CONTEXT + "<<fault:500>>", CONT),
            ContinuationRequest(CONTEXT, "   "),
            ContinuationRequest(CONTEXT + "<<fault:no_logprobs>>", CONT),
        ])
    assert res[0].error is None
    assert "HTTP 500" in res[1].error and "no logprobs" in res[3].error
    assert "empty" in res[2].error
    assert [r.token_logprobs is None for r in res] == [False, True, True, True]


def test_probe_failure_fails_the_call_items_and_is_retried_next_call():
    with FakeOpenAIServer(FakeServerConfig(fault="500", fault_count=2)) as s, make(s, max_retries=1) as b:
        first = b.continuation_logprobs([ContinuationRequest(CONTEXT, CONT)] * 2)
        assert all("could not probe" in r.error for r in first)
        second = b.continuation_logprobs([ContinuationRequest(CONTEXT, CONT)])
        assert second[0].error is None


# -- generate -------------------------------------------------------------------------------------


def test_generate_uses_n_and_matches_the_model(server):
    with make(server) as b:
        out = b.generate([GenerationRequest("Write:", n=3, temperature=0.8, max_new_tokens=4, seed=7)])[0]
    assert len(server.requests_to("/v1/completions")) == 1
    want = [FakeModel().generate("Write:", 4, 0.8, f"7|{i}")[1] for i in range(3)]
    assert out.texts == want


@pytest.mark.parametrize("personality", ["reject_n", "ignore_n"])
def test_generate_falls_back_to_separate_requests(personality):
    with FakeOpenAIServer(FakeServerConfig(**{personality: True})) as s, make(s) as b:
        out = b.generate([GenerationRequest("Write:", n=3, temperature=0.8, max_new_tokens=4, seed=7)])[0]
        assert out.error is None and len(out.texts) == 3
        assert b.capabilities()["n_supported"] is False
        sent = len(s.requests_to("/v1/completions"))
        assert sent == (4 if personality == "reject_n" else 3)
        b.generate([GenerationRequest("Write:", n=2, temperature=0.8, max_new_tokens=4)])
        later = [r.body.get("n") for r in s.requests_to("/v1/completions")[sent:]]
        assert later == [1, 1]  # no more n > 1 once it is known to fail


def test_generate_stop_and_chat(server):
    with make(server, endpoint="chat") as b:
        out = b.generate([GenerationRequest("Count:", n=1, temperature=0.0, max_new_tokens=8, stop=(" 0",))])[0]
    full = FakeModel().generate("Count:", 8, 0.0)[1]
    assert out.texts == [full.split(" 0", 1)[0]]
    assert server.requests_to("/v1/chat/completions")[0].body["stop"] == [" 0"]


def test_generate_caps_max_tokens(server):
    with make(server, max_tokens=2) as b:
        b.generate([GenerationRequest("x", max_new_tokens=50)])
    assert server.requests_to("/v1/completions")[0].body["max_tokens"] == 2


# -- tokens, context, configuration ---------------------------------------------------------------


def test_tokenizer_endpoints_and_context(server):
    with make(server) as b:
        text = "hello world 1234 end"
        assert b.count_tokens(text) == len(tokenize(text))
        assert b.truncate_tokens(text, 3) == "".join(tokenize(text)[:3])
        assert b.truncate_tokens(text, 100) == text
        assert b.max_context_tokens == 2048


def test_without_tokenizer_endpoint_counts_are_unknown():
    with FakeOpenAIServer(FakeServerConfig(tokenize_endpoints=False, max_model_len=None)) as s, make(s) as b:
        assert b.count_tokens("hello") is None
        assert b.truncate_tokens("abcdefghij" * 10, 5) == ("abcdefghij" * 10)[:20]
        assert b.max_context_tokens is None


@pytest.mark.parametrize(
    "field,value",
    [("model", ""), ("endpoint", "responses"), ("timeout_s", 0), ("max_retries", -1),
     ("continuation_mode", "magic"), ("requests_per_minute", -5), ("temperature", -1.0)],
)
def test_config_errors_name_field_and_value(field, value):
    kw = {"model": "m", field: value}
    with pytest.raises(ValueError) as err:
        OpenAIBackendConfig(**kw)
    assert field in str(err.value) and repr(value) in str(err.value)


def test_env_vars_supply_url_and_key(monkeypatch, server):
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with OpenAIBackend(model="fake") as b:
        assert b.base_url == server.base_url
        assert b.candidate_logprobs([CandidateRequest(SLOT, SCALE)])[0].error is None
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(BackendError, match="OPENAI_API_KEY"):
        OpenAIBackend(model="fake")


def test_engine_builds_this_backend(server):
    from judge_reward.judge import build_backend

    b = build_backend({"kind": "openai", "model": "fake", "base_url": server.base_url, "max_concurrency": 4})
    try:
        assert isinstance(b, OpenAIBackend) and b.config.max_concurrency == 4
    finally:
        b.close()


# -- the capability probe's transient faults; the private event loop across fork() and close() -----


def test_transient_empty_choices_on_the_echo_probe_is_retried_not_fatal():
    with FakeOpenAIServer(FakeServerConfig(fault="empty_choices", fault_count=1)) as s:
        with OpenAIBackend(OpenAIBackendConfig(model="fake", base_url=s.base_url, backoff_initial_s=0.01,
                                               backoff_max_s=0.05)) as b:
            res = b.continuation_logprobs([ContinuationRequest("The cat sat on the mat. Summary:", " a cat sat")])
            assert res[0].error is None and res[0].details["mode"] == "echo"
            assert b.stats()["retries_by_reason"] == {"malformed": 1}


def test_echo_cost_is_measured_on_the_answering_attempt_not_across_retry_waits():
    # one 429 with Retry-After 0.8 s on the probe must not be taken for slow echo (llama.cpp)
    with FakeOpenAIServer(FakeServerConfig(fault="429", fault_count=1, retry_after_s=0.8)) as s:
        with OpenAIBackend(OpenAIBackendConfig(model="fake", base_url=s.base_url, timeout_s=2.0)) as b:
            res = b.continuation_logprobs([ContinuationRequest("The cat sat on the mat. Summary:", " a cat sat")])
            assert res[0].error is None and b.stats()["retries"] == 1
            assert "echo_s_per_token" not in b.capabilities()
            assert b._echo_timeout("word " * 800) == 2.0


def _score_in_child(backend, queue):
    queue.put(backend.candidate_logprobs([CandidateRequest(SLOT, tuple("12345"))])[0].error)


@pytest.mark.skipif(sys.platform != "linux", reason="fork start method")
def test_backend_used_before_fork_works_in_the_child():
    with FakeOpenAIServer() as s, OpenAIBackend(OpenAIBackendConfig(model="fake", base_url=s.base_url)) as b:
        assert b.candidate_logprobs([CandidateRequest(SLOT, tuple("12345"))])[0].error is None  # loop started
        ctx = mp.get_context("fork")
        queue = ctx.Queue()
        child = ctx.Process(target=_score_in_child, args=(b, queue))
        child.start()
        child.join(20)
        hung = child.is_alive()
        if hung:
            child.kill()
            child.join()
        assert not hung, "the forked child hung on the parent's event loop"
        assert child.exitcode == 0 and queue.get(timeout=5) is None


def test_close_with_a_call_in_flight_does_not_hang_the_caller():
    with FakeOpenAIServer() as s:
        b = OpenAIBackend(OpenAIBackendConfig(model="fake", base_url=s.base_url))
        got = {}

        def caller():
            try:
                got["result"] = b.candidate_logprobs([CandidateRequest(SLOT + "<<delay:3>>", tuple("12345"))])
            except BaseException as err:  # noqa: BLE001 (the test inspects it)
                got["error"] = err

        t = threading.Thread(target=caller, daemon=True)
        t.start()
        time.sleep(0.3)
        b.close()
        t.join(2)
        assert not t.is_alive(), "the caller still waits on a loop that close() stopped"
        assert isinstance(got.get("error"), BackendError) and "closed" in str(got["error"])
        stats = b.stats()  # the input is accounted for: counted, and failed as cancelled
        assert (stats["inputs"], stats["succeeded"], stats["failed"], stats["failures"]) == (1, 0, 1, {"cancelled": 1})


def test_a_pickled_backend_counts_its_own_calls_from_zero():
    import pickle

    with FakeOpenAIServer() as s:
        b = OpenAIBackend(OpenAIBackendConfig(model="fake", base_url=s.base_url))
        assert b.candidate_logprobs([CandidateRequest(SLOT, tuple("12345"))])[0].error is None
        copy = pickle.loads(pickle.dumps(b))
        assert b.stats()["inputs"] == 1 and copy.stats()["inputs"] == 0
        assert copy.candidate_logprobs([CandidateRequest(SLOT, tuple("12345"))])[0].error is None
        assert (copy.stats()["inputs"], copy.stats()["succeeded"], b.stats()["inputs"]) == (1, 1, 1)
        copy.close()
        b.close()


def test_a_429_for_an_account_out_of_credit_is_not_retried():
    import httpx
    import openai

    from judge_reward.backends.openai_transport import _status_failure

    def rate_error(body):
        response = httpx.Response(429, request=httpx.Request("POST", "http://127.0.0.1/v1/completions"))
        return openai.RateLimitError("429", response=response, body=body)

    quota = _status_failure(rate_error({"message": "You exceeded your current quota.", "type": "insufficient_quota",
                                        "code": "insufficient_quota"}))
    assert (quota.kind, quota.retryable) == ("client_error", False) and "insufficient_quota" in quota.reason
    busy = _status_failure(rate_error({"message": "Rate limit reached.", "type": "requests", "code": "rate_limit_exceeded"}))
    assert (busy.kind, busy.retryable) == ("rate_limited", True)
