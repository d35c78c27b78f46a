"""The reward service on a real uvicorn server (loopback, free port) with a tiny in-process judge.

Every score the service returns is checked against the same judge weights scored in-process.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time

import httpx
import pytest
import torch

from judge_reward.judge import Judge, JudgeConfig
from judge_reward.methods.base import Item
from judge_reward.service import (
    JudgeServiceClient, ServiceConfig, ServiceError, ServiceRewardConfig, ServiceRewardFunction, create_app,
)
from judge_reward.service.server import ServerThread
from tiny_models import make_backend

ASPECTS = ["coherence", "fluency"]
ARTICLE = "The council met on Tuesday. It approved a new park and a cycle lane beside the river."


def tiny_judge(method: str = "geval", aspects=ASPECTS) -> Judge:
    cfg = JudgeConfig(aspects_file="summeval", aspects=list(aspects), method=method, cache={"memory": False})
    return Judge(cfg, backend=make_backend("char"))


@pytest.fixture(scope="module")
def reference_judge() -> Judge:
    """Same weights as the served judge (seeded), scored in this process."""
    return tiny_judge()


def config(**kw) -> ServiceConfig:
    return ServiceConfig(**{"port": 0, "log_level": "warning", "max_wait_ms": 5.0, **kw})


def serve(judge=None, **kw) -> ServerThread:
    cfg = config(**kw)
    return ServerThread(create_app(cfg, judge=judge if judge is not None else tiny_judge()), cfg)


def metric(server: ServerThread, name: str, **labels) -> float:
    """Read one sample from the app's Prometheus registry."""
    value = server.app.state.service.metrics.registry.get_sample_value(name, labels or None)
    return 0.0 if value is None else value


def expected_reward(scores: dict, judge: Judge) -> float:
    aspects = judge.aspect_set.aspects
    return sum(aspects[a].scale.normalise(s.value) for a, s in scores.items()) / len(scores)


# -- native protocol ---------------------------------------------------------------------------


def test_native_scores_match_in_process(reference_judge):
    items = [
        {"source": ARTICLE, "output": "The council approved a park.", "id": "a"},
        {"source": ARTICLE, "output": "A cycle lane was approved by the council.", "id": 2},
        {"source": "Another article about rain.", "output": "It rained.", "reference": "Rain fell."},
        {"source": ARTICLE, "output": "   ", "id": "empty"},
    ]
    with serve() as server:
        r = httpx.post(server.url + "/v1/score", json={"items": items})
        assert r.status_code == 200, r.text
        body = r.json()
        failures_metric = metric(server, "judge_reward_failures_total",
                                 reason="output: empty text cannot be judged")
    expected = reference_judge.score([Item(it["output"], it["source"], it.get("reference")) for it in items])
    assert body["method"] == "geval" and body["model"] == reference_judge.backend.model_id
    assert [res["id"] for res in body["results"]] == ["a", 2, None, "empty"]
    for res, exp in zip(body["results"][:3], expected[:3]):
        assert set(res["scores"]) == set(ASPECTS)
        for aspect in ASPECTS:
            got, want = res["scores"][aspect], exp[aspect]
            assert got["value"] == pytest.approx(want.value, abs=1e-6)
            assert got["details"]["distribution"] == pytest.approx(want.details["distribution"], abs=1e-6)
            assert got["normalised"] == pytest.approx((want.value - 1) / 4, abs=1e-6)
        assert res["reward"] == pytest.approx(expected_reward(exp, reference_judge), abs=1e-6)
        assert res["failure"] is None
    # A judge failure is a None value with its reason, never a 0.
    empty = body["results"][3]
    assert empty["reward"] is None
    assert all(s["value"] is None and "empty" in s["reason"] for s in empty["scores"].values())
    assert "empty" in empty["failure"]
    assert failures_metric == 2  # one per aspect


def test_per_item_aspects_and_method(reference_judge):
    gpt = tiny_judge("gptscore")
    items = [
        {"source": ARTICLE, "output": "The council met.", "aspects": ["fluency"]},
        {"source": ARTICLE, "output": "A park was approved."},
    ]
    with serve() as server:
        r = httpx.post(server.url + "/v1/score", json={"items": items, "aspects": ["coherence"], "method": "gptscore",
                                                       "details": False})
    assert r.status_code == 200, r.text
    res = r.json()["results"]
    assert list(res[0]["scores"]) == ["fluency"] and list(res[1]["scores"]) == ["coherence"]
    assert "details" not in res[0]["scores"]["fluency"]
    want0 = gpt.score([Item("The council met.", ARTICLE)], aspects=["fluency"])[0]["fluency"].value
    want1 = gpt.score([Item("A park was approved.", ARTICLE)], aspects=["coherence"])[0]["coherence"].value
    # One reward definition (judge_reward.reward): the tiny judge's config has no reward section, so
    # normalise is "unit", which for GPTScore is exp(mean log-prob), as in the TRL reward functions.
    assert res[0]["reward"] == pytest.approx(math.exp(want0), abs=1e-6) and want0 < 0
    assert res[1]["scores"]["coherence"]["value"] == pytest.approx(want1, abs=1e-6)
    assert res[1]["scores"]["coherence"]["normalised"] == pytest.approx(math.exp(want1), abs=1e-6)


# -- OpenRLHF protocol -------------------------------------------------------------------------


def test_openrlhf_get_reward(reference_judge):
    prompt = "<bos>Summarise: " + ARTICLE + "\nSummary:"
    responses = [" The council approved a park.<eos>", " A lane by the river.<|endoftext|><pad><pad>", ""]
    query = [prompt + resp for resp in responses] + ["an unrelated query"]
    prompts = [prompt] * 4
    labels = ["The council approved a park and a lane.", None, "", ""]
    with serve(failure_reward=-1.0) as server:
        r = httpx.post(server.url + "/get_reward", json={"query": query, "prompts": prompts, "labels": labels,
                                                         "datasources": ["x"] * 4})
        assert r.status_code == 200, r.text
        body = r.json()
        mismatch = metric(server, "judge_reward_failures_total", reason="query does not contain its prompt")
    assert set(body) == {"rewards", "scores", "extra_logs", "failures"}
    source = "Summarise: " + ARTICLE + "\nSummary:"
    exp = reference_judge.score([Item("The council approved a park.", source),
                                 Item("A lane by the river.", source)])
    assert body["rewards"][0] == pytest.approx(expected_reward(exp[0], reference_judge), abs=1e-6)
    assert body["rewards"][1] == pytest.approx(expected_reward(exp[1], reference_judge), abs=1e-6)
    assert body["rewards"][2:] == [-1.0, -1.0]  # the configured failure reward, flagged below
    assert body["extra_logs"]["judge_failed"] == [0.0, 0.0, 1.0, 1.0]
    assert "empty" in body["failures"][2] and "does not contain prompts[3]" in body["failures"][3]
    assert body["failures"][:2] == [None, None]
    assert body["extra_logs"]["judge/coherence"][0] == pytest.approx((exp[0]["coherence"].value - 1) / 4, abs=1e-6)
    assert mismatch == 1
    # What OpenRLHF does with the answer: tensors, one value per sample, split per experience.
    rewards = torch.tensor(body["rewards"])
    logs = {k: torch.tensor(v) for k, v in body["extra_logs"].items()}
    assert rewards.shape == (4,) and all(v.shape == (4,) for v in logs.values())


def test_failed_items_get_the_lowest_judged_reward_by_default():
    """An output the judge cannot score (empty) must not outscore one it can: by default it reports
    the lowest reward of its request, else the lowest the server has returned, else an error."""
    with serve() as server:
        url = server.url + "/get_reward"
        r = httpx.post(url, json={"query": [""]})  # nothing judged yet: no reward to fill with
        assert r.status_code == 500 and "--failure-reward" in r.json()["detail"] and "empty" in r.json()["detail"]
        body = httpx.post(url, json={"query": ["The council approved a park.", "", "A lane by the river."]}).json()
        judged = [body["rewards"][0], body["rewards"][2]]
        assert body["rewards"][1] == min(judged) and body["extra_logs"]["judge_failed"] == [0.0, 1.0, 0.0]
        body = httpx.post(url, json={"query": ["", ""]}).json()  # none judged here: the lowest so far
        assert body["rewards"] == [min(judged)] * 2 and body["failures"][0].endswith("empty text cannot be judged")


def test_openrlhf_query_only_and_mismatched_lengths(reference_judge):
    with serve() as server:
        ok = httpx.post(server.url + "/get_reward", json={"query": ["Just a whole text to judge."]})
        bad = httpx.post(server.url + "/get_reward", json={"query": ["a", "b"], "prompts": ["a"]})
        bad_labels = httpx.post(server.url + "/get_reward", json={"query": ["a"], "labels": [None, None]})
    assert ok.status_code == 200
    want = reference_judge.score([Item("Just a whole text to judge.", "")])[0]
    assert ok.json()["rewards"][0] == pytest.approx(expected_reward(want, reference_judge), abs=1e-6)
    assert bad.status_code == 422 and bad.json()["detail"].startswith("prompts: 1 entries for 2 queries")
    assert bad_labels.status_code == 422 and bad_labels.json()["errors"][0]["field"] == "labels"


# -- validation, limits, auth ------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload, status, field, words",
    [
        ({"items": [{"source": "x"}]}, 422, "items[0].output", "required"),
        ({"items": [{"output": "y", "outptu": "y"}]}, 422, "items[0].outptu", "Extra inputs"),
        ({"items": [{"output": 5}]}, 422, "items[0].output", "valid string"),
        ({"items": []}, 422, "items", "at least 1"),
        ({"items": [{"output": "y"}], "method": "bleu"}, 422, "method", "gptscore"),
        ({"items": [{"output": "y"}], "aspects": ["coherence", "nope"]}, 422, "aspects[1]", "unknown aspect 'nope'"),
        ({"items": [{"output": "y", "aspects": []}]}, 422, "items[0].aspects", "at least one aspect"),
        ({"items": [{"output": "y"}] * 9}, 413, "items", "limit is 8"),
        ({"items": [{"output": "y" * 101}]}, 422, "items[0].output", "101 characters"),
        ({"items": [{"output": "y"}], "method": "rating"}, 422, "method", "not available"),
    ],
)
def test_validation_errors_name_field_and_value(payload, status, field, words, served_small):
    r = httpx.post(served_small.url + "/v1/score", json=payload)
    assert r.status_code == status, r.text
    body = r.json()
    assert body["errors"][0]["field"] == field
    assert words in body["detail"] and field in body["detail"]


@pytest.fixture(scope="module")
def served_small():
    judge = tiny_judge()
    judge.config.rating = {"style": "no-such-style"}  # the rating section is broken: method unavailable
    with serve(judge, max_request_items=8, max_queue_items=64, max_text_chars=100, max_body_bytes=4096) as server:
        yield server


def test_a_method_the_configs_reward_cannot_use_is_a_422():
    judge = tiny_judge(method="gptscore")
    judge.config.reward = {"normalise": "none", "guards": {"likelihood_floor": {"enabled": True, "unconditional": False}}}  # reads GPTScore's tokens
    with serve(judge) as server:
        for path, payload in (("/v1/score", {"items": [{"output": "It met."}], "method": "geval"}),
                              ("/get_reward", {"query": ["It met."], "method": "geval"})):
            r = httpx.post(server.url + path, json=payload)
            assert r.status_code == 422, r.text
            assert r.json()["errors"][0]["field"] == "method" and "needs method 'gptscore'" in r.json()["detail"]
        assert httpx.post(server.url + "/v1/score", json={"items": [{"output": "It met."}]}).status_code == 200


def test_body_limits(served_small):
    url = served_small.url + "/v1/score"
    big = b'{"items": [{"output": "' + b"y" * 5000 + b'"}]}'
    r = httpx.post(url, content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and "4096" in r.json()["detail"]

    def chunks():  # no Content-Length: the limit must hold while streaming
        for _ in range(10):
            yield b" " * 1000

    r = httpx.post(url, content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and "more than 4096 bytes" in r.json()["detail"]
    r = httpx.post(url, content=b'{"items": [', headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"].startswith("body: not valid JSON")
    assert metric(served_small, "judge_reward_requests_total", endpoint="/v1/score", status="413") >= 2


def test_bearer_token_auth():
    with serve(token="s3cret") as server:
        url = server.url
        body = {"items": [{"output": "It met.", "source": ARTICLE}]}
        missing = httpx.post(url + "/v1/score", json=body)
        wrong = httpx.post(url + "/v1/score", json=body, headers={"Authorization": "Bearer nope"})
        right = httpx.post(url + "/v1/score", json=body, headers={"Authorization": "Bearer s3cret"})
        openrlhf = httpx.post(url + "/get_reward", json={"query": ["x"]})
        metrics_open = httpx.get(url + "/metrics")
        metrics_auth = httpx.get(url + "/metrics", headers={"Authorization": "Bearer s3cret"})
        probes = [httpx.get(url + p).status_code for p in ("/health", "/ready")]
    assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer")
    assert wrong.status_code == 401 and "bearer token" in wrong.json()["detail"]
    assert right.status_code == 200 and right.json()["results"][0]["reward"] is not None
    assert openrlhf.status_code == 401 and metrics_open.status_code == 401
    assert metrics_auth.status_code == 200 and "judge_reward_requests_total" in metrics_auth.text
    assert probes == [200, 200]


# -- batching, backpressure, readiness ---------------------------------------------------------


class Recording(Judge):
    """The real judge, recording the size of each score call (and optionally held at a gate)."""

    def __init__(self, *args, gate: threading.Event | None = None, **kw):
        super().__init__(*args, **kw)
        self.calls_seen: list[int] = []
        self.gate = gate
        self.entered = threading.Event()

    def score(self, items, aspects=None, method=None):
        self.calls_seen.append(len(items))
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(60), "test gate never opened"
        return super().score(items, aspects, method)


def recording_judge(**kw) -> Recording:
    cfg = JudgeConfig(aspects_file="summeval", aspects=["coherence"], method="geval", cache={"memory": False})
    return Recording(cfg, backend=make_backend("char"), **kw)


def test_concurrent_requests_merge_into_one_batch_with_prefix_sharing():
    judge = recording_judge()
    shared_runs = []
    original = judge.backend._run_shared
    judge.backend._run_shared = lambda rows, members, *a: (shared_runs.append(len(members)),
                                                          original(rows, members, *a))[1]
    outputs = [f"Summary {k}: the council approved item {k}." for k in range(16)]
    with serve(judge, max_wait_ms=1500, max_batch_size=16) as server:

        async def burst():
            async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
                reqs = [client.post("/v1/score", json={"items": [{"source": ARTICLE, "output": o}
                                                                 for o in outputs[2 * k:2 * k + 2]]})
                        for k in range(8)]
                return await asyncio.gather(*reqs)

        responses = asyncio.run(burst())
        batch_hist = metric(server, "judge_reward_batch_requests_sum")
    assert all(r.status_code == 200 for r in responses)
    # 8 requests x 2 items, one judge call of 16 items: the batch filled up before the 1.5 s wait ran out.
    assert judge.calls_seen == [16]
    assert all(r.json()["batches"] == [{**r.json()["batches"][0], "items": 16, "requests": 8}] for r in responses)
    assert batch_hist == 8
    # Items of different requests with the same source shared one prefix forward.
    assert shared_runs == [16]
    reference = tiny_judge(aspects=["coherence"]).score([Item(o, ARTICLE) for o in outputs])
    got = [res["scores"]["coherence"]["value"] for r in responses for res in r.json()["results"]]
    assert got == pytest.approx([s["coherence"].value for s in reference], abs=1e-6)


def test_queue_full_gives_503_with_retry_after():
    gate = threading.Event()
    judge = recording_judge(gate=gate)
    with serve(judge, max_queue_items=4, max_request_items=4, max_batch_size=4, max_wait_ms=0) as server:
        body = {"items": [{"source": ARTICLE, "output": f"Summary {k}."} for k in range(4)]}

        async def scenario():
            async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
                first = asyncio.create_task(client.post("/v1/score", json=body))
                await asyncio.to_thread(judge.entered.wait, 30)  # the worker holds batch 1
                second = asyncio.create_task(client.post("/v1/score", json=body))
                while server.app.state.service.batcher.queued_items < 4:  # batch 2 fills the queue
                    await asyncio.sleep(0.01)
                third = await client.post("/v1/score", json=body)
                openrlhf = await client.post("/get_reward", json={"query": ["x"]})
                # The judge is busy, yet the event loop answers at once: it never waits on the judge.
                start = time.perf_counter()
                health = await client.get("/health")
                assert health.status_code == 200 and time.perf_counter() - start < 2.0
                queued = metric(server, "judge_reward_queue_items")
                gate.set()
                return third, openrlhf, queued, await first, await second

        third, openrlhf, queued, first, second = asyncio.run(scenario())
        rejected = metric(server, "judge_reward_rejected_total", reason="queue_full")
    assert third.status_code == 503 and openrlhf.status_code == 503
    assert int(third.headers["retry-after"]) >= 1 and "queue full" in third.json()["detail"]
    assert queued == 4 and rejected == 2
    assert first.status_code == 200 and second.status_code == 200
    assert judge.calls_seen == [4, 4]


def test_readiness_while_loading_and_after_a_failed_load():
    gate = threading.Event()

    def slow_factory():
        assert gate.wait(60)
        return tiny_judge()

    cfg = config()
    server = ServerThread(create_app(cfg, judge_factory=slow_factory), cfg).start(wait_ready=False)
    try:
        assert httpx.get(server.url + "/health").status_code == 200
        not_ready = httpx.get(server.url + "/ready")
        early = httpx.post(server.url + "/v1/score", json={"items": [{"output": "x"}]})
        gate.set()
        assert server.app.state.service.batcher.wait_ready(60)
        ready = httpx.get(server.url + "/ready")
    finally:
        server.stop()
    assert not_ready.status_code == 503 and not_ready.json()["state"] == "loading"
    assert early.status_code == 503 and early.headers["retry-after"] == "5" and "loading" in early.json()["detail"]
    assert ready.status_code == 200 and ready.json()["ready"] is True

    def broken():
        raise FileNotFoundError("model: /nowhere is not a model directory")

    with ServerThread(create_app(cfg, judge_factory=broken), cfg).start(wait_ready=False) as server:
        server.app.state.service.batcher.wait_ready(30)
        health, ready = httpx.get(server.url + "/health"), httpx.get(server.url + "/ready")
    assert health.status_code == 503 and "/nowhere" in health.json()["error"]
    assert ready.status_code == 503 and ready.json()["state"] == "failed"


def test_judge_exception_becomes_counted_none_per_request():
    class Exploding(Recording):
        def score(self, items, aspects=None, method=None):
            if any("boom" in it.output for it in items):
                raise RuntimeError("backend lost its device")
            return super().score(items, aspects, method)

    cfg = JudgeConfig(aspects_file="summeval", aspects=["coherence"], method="geval", cache={"memory": False})
    judge = Exploding(cfg, backend=make_backend("char"))
    with serve(judge, max_wait_ms=1000, max_batch_size=2) as server:

        async def both():
            async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
                return await asyncio.gather(
                    client.post("/v1/score", json={"items": [{"output": "boom", "source": ARTICLE}]}),
                    client.post("/v1/score", json={"items": [{"output": "fine", "source": ARTICLE}]}),
                )

        bad, good = asyncio.run(both())
        counted = metric(server, "judge_reward_failures_total",
                         reason="judge error: RuntimeError: backend lost its device")
    assert bad.status_code == 200 and bad.json()["results"][0]["reward"] is None
    assert "backend lost its device" in bad.json()["results"][0]["failure"]
    # The poisoned merged batch was rerun per request: the other request still got its score.
    assert good.json()["results"][0]["reward"] is not None
    assert counted == 1


# -- client and TRL reward function ------------------------------------------------------------


def test_client_splits_requests_and_keeps_order(reference_judge):
    items = [Item(f"Summary number {k}.", ARTICLE if k % 2 else "Other source.") for k in range(7)]
    with serve() as server:
        client = JudgeServiceClient(url=server.url, max_items_per_request=3)
        results = client.score_sync(items, details=True)
        # the server counts a request after its answer is sent: wait for the last count
        deadline = time.monotonic() + 10
        while (requests := metric(server, "judge_reward_requests_total", endpoint="/v1/score", status="200")) < 3 \
                and time.monotonic() < deadline:
            time.sleep(0.01)
    expected = reference_judge.score(items)
    assert requests == 3 and len(results) == 7
    for got, want in zip(results, expected):
        assert got.reward == pytest.approx(expected_reward(want, reference_judge), abs=1e-6)
        assert got.scores["coherence"]["details"]["entropy"] == pytest.approx(want["coherence"].details["entropy"])


def test_reward_function_retries_503_then_scores(reference_judge):
    gate = threading.Event()

    def slow_factory():
        assert gate.wait(60)
        return tiny_judge()

    cfg = config()
    with ServerThread(create_app(cfg, judge_factory=slow_factory), cfg).start(wait_ready=False) as server:
        threading.Timer(0.5, gate.set).start()  # ready after the first attempt was refused
        fn = ServiceRewardFunction(url=server.url, retries=20, backoff_s=0.2, max_backoff_s=1.0)
        rewards = asyncio.run(fn(prompts=[ARTICLE, ARTICLE], completions=["A park.", "A lane."],
                                 completion_ids=[[1], [2]], reference=[None, None]))
    want = reference_judge.score([Item("A park.", ARTICLE), Item("A lane.", ARTICLE)])
    assert rewards == pytest.approx([expected_reward(w, reference_judge) for w in want], abs=1e-6)
    assert fn.client.retried >= 1 and fn.failures == {}


def test_reward_function_none_on_failures(reference_judge):
    # Nothing listens on this port: every attempt is refused; the rewards are None, counted.
    with serve() as server:
        url = server.url
    dead = ServiceRewardFunction(url=url, retries=1, backoff_s=0.05)
    metrics_logged = {}
    rewards = asyncio.run(dead(prompts=["p", "q"], completions=["a", "b"],
                               log_metric=lambda k, v: metrics_logged.__setitem__(k, v)))
    assert rewards == [None, None]
    [(reason, count)] = dead.failures.items()
    assert count == 2 and "ConnectError" in reason and dead.client.requests == 2
    assert metrics_logged["judge_service/failure_rate"] == 1.0

    gate = threading.Event()
    with serve(recording_judge(gate=gate)) as server:
        slow = ServiceRewardFunction(url=server.url, retries=0, timeout_s=0.5)
        timed_out = asyncio.run(slow(prompts=["p"], completions=["a"]))
        bad = ServiceRewardFunction(url=server.url, aspects=["nope"], retries=3)
        with pytest.raises(ServiceError) as info:
            asyncio.run(bad.client.score([Item("a", "p")]))
        refused = asyncio.run(bad(prompts=["p"], completions=["a"]))
        gate.set()
        per_item = ServiceRewardFunction(url=server.url)
        extra = {}
        mixed = asyncio.run(per_item(prompts=["p", "p"], completions=["fine", " "],
                                     log_extra=lambda k, v: extra.__setitem__(k, v)))
    assert timed_out == [None] and "ReadTimeout" in next(iter(slow.failures))
    assert info.value.status == 422 and bad.client.retried == 0  # a 4xx is not retried
    assert refused == [None] and "unknown aspect 'nope'" in next(iter(bad.failures))
    assert mixed[0] is not None and mixed[1] is None
    # One reward definition: a one-aspect reward reports the judge's reason as it is (judge_reward.trainers.reward does the same).
    assert per_item.failures == {"output: empty text cannot be judged": 1}
    assert extra["judge_service_failure"] == ["", "output: empty text cannot be judged"]


def test_reward_function_reads_chat_messages_and_columns():
    fn = ServiceRewardFunction(ServiceRewardConfig(source_column="article", name="judge"))
    prompts = [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Summarise the article."}]]
    completions = [[{"role": "assistant", "content": "A park was approved."}]]
    [item] = fn.items(prompts, completions, {"article": [ARTICLE], "reference": ["Ref."]})
    assert item == Item("A park was approved.", ARTICLE, "Ref.")
    plain = ServiceRewardFunction(reference_column=None)
    [item] = plain.items(prompts, completions, {"reference": ["Ref."]})
    assert item.source == "Summarise the article." and item.reference is None
    assert fn.__name__ == "judge"
    with pytest.raises(KeyError, match="source_column"):
        fn.items(prompts, completions, {})
    with pytest.raises(ValueError, match="url"):
        ServiceRewardConfig(url="judge-host:8080")


def test_service_config_defaults_and_errors():
    from judge_reward.aspects import ConfigError
    from judge_reward.service.server import _is_loopback

    assert ServiceConfig().host == "127.0.0.1" and ServiceConfig().token is None
    assert _is_loopback("127.0.0.1") and _is_loopback("::1") and _is_loopback("localhost")
    assert not _is_loopback("0.0.0.0")
    for kwargs, words in [
        ({"max_batch_size": 0}, "max_batch_size: expected a positive integer, got 0"),
        ({"max_wait_ms": -1}, "max_wait_ms: expected a non-negative number, got -1"),
        ({"max_queue_items": 10, "max_request_items": 20}, "max_queue_items: 10 is below max_request_items (20)"),
        ({"reward_weights": {"coherence": -1}}, "reward_weights.coherence: expected a non-negative number, got -1"),
        ({"failure_reward": float("nan")}, "failure_reward: expected a finite number or one of 'lowest', got nan"),
        ({"token": " "}, "token: expected a non-empty string"),
        ({"port": 70000}, "port: expected 0..65535, got 70000"),
    ]:
        with pytest.raises(ConfigError) as err:
            ServiceConfig(**kwargs)
        assert words in str(err.value)


def test_reward_weights_combine_aspects(reference_judge):
    item = {"source": ARTICLE, "output": "The council approved a park."}
    with serve(reward_weights={"coherence": 3.0, "fluency": 1.0}) as server:
        res = httpx.post(server.url + "/v1/score", json={"items": [item]}).json()["results"][0]
    want = reference_judge.score([Item(item["output"], ARTICLE)])[0]
    norm = {a: (want[a].value - 1) / 4 for a in ASPECTS}
    assert res["reward"] == pytest.approx((3 * norm["coherence"] + norm["fluency"]) / 4, abs=1e-6)
    with pytest.raises(RuntimeError, match="reward_weights: unknown aspect"):
        serve(reward_weights={"wit": 1.0}).start()


def _idle_then_reuse(url: str, idle_s: float) -> bytes:
    """One keep-alive connection: a request, ``idle_s`` of silence, a second request; its answer."""
    import socket
    from urllib.parse import urlsplit

    def read_response(sock) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lengths = [line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")]
        length = int(lengths[0])
        while len(body) < length:
            body += sock.recv(65536)
        return data

    parts = urlsplit(url)
    request = f"GET /health HTTP/1.1\r\nHost: {parts.hostname}\r\n\r\n".encode()
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(request)
        assert read_response(sock).startswith(b"HTTP/1.1 200")
        time.sleep(idle_s)
        try:
            sock.sendall(request)
            return read_response(sock)
        except OSError:
            return b""


def test_idle_keep_alive_connections_outlive_client_pools():
    # httpx keeps idle connections 5 s; a server closing at the same moment resets reused ones.
    with serve(keep_alive_s=1) as short, serve() as default:
        closed = _idle_then_reuse(short.url, 2.5)
        kept = _idle_then_reuse(default.url, 6.0)
    assert closed == b""  # the 1 s server closed the idle connection (what 5 s did to httpx)
    assert kept.startswith(b"HTTP/1.1 200")  # the default (75 s) outlives the 5 s client expiry


def test_reward_function_sends_the_prompt_as_source_only_when_the_service_reward_allows_it():
    """With no source column, the prompt stands in for the source unless the service's reward has
    guards that compare the completion with its source (``/v1/info``'s ``source_guards``): then the
    call fails naming them, until the config says ``source_from_prompt=True``."""
    guarded = tiny_judge()
    guarded.config.reward = {"guards": {"grounding": True, "length": True}}
    with serve(guarded) as strict, serve() as plain:
        info = httpx.get(f"{strict.url}/v1/info").json()
        assert info["source_guards"] == ["length", "grounding"]
        assert httpx.get(f"{plain.url}/v1/info").json()["source_guards"] == []
        call = dict(prompts=["The council approved a park."], completions=["A park was approved."])
        with pytest.raises(ValueError, match="the service's reward: length, grounding compare the completion"):
            asyncio.run(ServiceRewardFunction(url=strict.url)(**call))
        [forced] = asyncio.run(ServiceRewardFunction(url=strict.url, source_from_prompt=True)(**call))
        [free] = asyncio.run(ServiceRewardFunction(url=plain.url)(**call))
        assert forced is not None and free is not None
        with pytest.raises(ValueError, match="source_column: unset, and source_from_prompt is False"):
            asyncio.run(ServiceRewardFunction(url=plain.url, source_from_prompt=False)(**call))
        # a source column is read, whatever the service's guards
        [judged] = asyncio.run(ServiceRewardFunction(url=strict.url, source_column="article")(
            **call, article=["The council met on Tuesday and approved a new park by the river."]))
        assert judged is not None


def test_a_reward_that_needs_the_tasks_inputs_refuses_to_serve():
    """``data_values.domain: inputs`` is the data a command runs on; a server has none, so it
    refuses at start-up and says to give a file instead."""
    judge = tiny_judge(method="gptscore")
    judge.config.reward = {"normalise": "none", "guards": {"data_values": {"enabled": True, "domain": "inputs"}}}
    with pytest.raises(RuntimeError, match=r"reward.guards.data_values.domain: 'inputs' is the data a command runs on"):
        serve(judge).start()
