"""verl's compute_score (judge_reward.trainers.verl) and the client's replicas, against real services.

Every service here is a real uvicorn server on loopback (tests/test_service.py's helpers) serving the
tiny in-process judge; its scores are checked against the same judge weights scored in this process.
verl itself is not needed here (tests/test_verl_env.py runs verl's own reward loop worker).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from judge_reward.methods.base import Item
from judge_reward.service import JudgeServiceClient, ServiceError, ServiceRewardConfig
from judge_reward.trainers import verl
from test_service import ARTICLE, expected_reward, metric, serve, tiny_judge
from tests.doubles.servers import free_port

OUTPUTS = ["The council approved a park.", "A cycle lane was approved by the council.",
           "The council met on Tuesday.", "A park and a lane by the river."]
KEYS = {"score", "judge_ok", "judge_failure", "judge_reward", "judge/coherence", "judge/fluency", "judge_guard_penalty"}


@pytest.fixture(scope="module")
def reference_judge():
    return tiny_judge()


@pytest.fixture(scope="module")
def server():
    with serve(max_wait_ms=200.0) as s:
        yield s


@pytest.fixture
def env(monkeypatch):
    for name in verl.ENV.values():
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def sample(output: str, **extra) -> dict:
    return {"data_source": "news", "solution_str": output, "ground_truth": None,
            "extra_info": {"source": ARTICLE, "index": 0, **extra}}


def test_compute_score_async_returns_the_service_reward_and_its_components(server, reference_judge, env):
    env.setenv("JUDGE_REWARD_URLS", server.url)
    calls_before = metric(server, "judge_reward_batch_items_count")

    async def worker():  # what verl's reward loop worker does: every sample of its chunk at once
        return await asyncio.gather(*(verl.compute_score_async(**sample(o)) for o in OUTPUTS))

    results = asyncio.run(worker())
    judge_calls = metric(server, "judge_reward_batch_items_count") - calls_before
    expected = reference_judge.score([Item(o, ARTICLE) for o in OUTPUTS])
    for got, want in zip(results, expected):
        assert set(got) == KEYS
        assert got["judge_ok"] == 1.0 and got["judge_failure"] == ""
        assert got["score"] == got["judge_reward"] == pytest.approx(expected_reward(want, reference_judge), abs=1e-6)
        for aspect in ("coherence", "fluency"):
            scale = reference_judge.aspect_set.aspects[aspect].scale
            assert got[f"judge/{aspect}"] == pytest.approx(scale.normalise(want[aspect].value), abs=1e-6)
        assert got["judge_guard_penalty"] == 0.0
    # The four concurrent per-sample requests were merged by the service's batcher.
    assert judge_calls < len(OUTPUTS)


def test_compute_score_from_threads_matches_the_async_twin(server, env):
    env.setenv("JUDGE_REWARD_URLS", server.url)
    env.setenv("JUDGE_REWARD_ASPECTS", "coherence,fluency")
    with ThreadPoolExecutor(4) as pool:  # verl runs a plain function in its thread pool
        threaded = list(pool.map(lambda o: verl.compute_score(**sample(o)), OUTPUTS))
    direct = asyncio.run(verl.compute_score_async(**sample(OUTPUTS[0])))
    assert all(set(r) == KEYS and r["judge_ok"] == 1.0 for r in threaded)
    assert threaded[0]["score"] == pytest.approx(direct["score"], abs=1e-6)


def test_a_judge_failure_is_the_neutral_score_with_a_flag_never_an_unmarked_zero(server, env):
    env.setenv("JUDGE_REWARD_URLS", server.url)
    before = verl.stats()
    good = verl.compute_score(**sample(OUTPUTS[0]), neutral_score=-1.0)
    failed = verl.compute_score(**sample("   "), neutral_score=-1.0)  # an empty output cannot be judged
    assert set(failed) == set(good) == KEYS  # verl takes one array per key from all samples
    assert failed["score"] == -1.0 and failed["judge_ok"] == 0.0
    assert "empty" in failed["judge_failure"]
    assert failed["judge_reward"] is None and failed["judge/coherence"] is None and failed["judge_guard_penalty"] is None
    default = verl.compute_score(**sample(""))
    assert default["score"] == verl.NEUTRAL_SCORE and default["judge_ok"] == 0.0 and default["judge_failure"]
    after = verl.stats()
    assert after["failed"] - before["failed"] == 2 and after["scored"] - before["scored"] == 1


def test_unreachable_service_flags_every_sample(env):
    dead = f"http://127.0.0.1:{free_port()}"
    env.setenv("JUDGE_REWARD_URLS", dead)
    out = verl.compute_score(**sample(OUTPUTS[0]), aspects=["coherence"], retries=1)
    assert out["judge_ok"] == 0.0 and out["score"] == 0.0 and out["judge/coherence"] is None
    assert out["judge_failure"].startswith("service: ") and "ConnectError" in out["judge_failure"]
    # Without aspects the keys of a failed sample cannot match the others': an error, not a guess.
    with pytest.raises(ServiceError, match="JUDGE_REWARD_ASPECTS"):
        verl.compute_score(**sample(OUTPUTS[0]), retries=0)


def test_an_answer_later_than_the_deadline_is_flagged(server, env):
    env.setenv("JUDGE_REWARD_URLS", server.url)
    # The service waits up to 200 ms for other requests to join the batch: longer than this deadline.
    out = verl.compute_score(**sample(OUTPUTS[0]), aspects=["coherence"], deadline_s=0.05)
    assert out["judge_ok"] == 0.0 and out["score"] == 0.0 and "deadline_s=0.05s" in out["judge_failure"]


def test_requests_spread_over_replicas_and_fail_over_from_a_down_and_a_draining_one(server):
    down = f"http://127.0.0.1:{free_port()}"
    with serve(max_wait_ms=5.0) as draining, serve(max_wait_ms=5.0) as second:
        draining.app.state.service.batcher.close(timeout=30)  # answers 503 "shutting down" from now on
        urls = [down, draining.url, server.url, second.url]
        client = JudgeServiceClient(ServiceRewardConfig(urls=urls, retries=3, replica_cooldown_s=60.0,
                                                        aspects=["coherence"]))
        items = [{"source": ARTICLE, "output": o} for o in OUTPUTS]

        async def run():
            try:
                sequential = [await client.score([it]) for it in items * 3]
                concurrent = await asyncio.gather(*(client.score([it]) for it in items * 3))
                return sequential + list(concurrent)
            finally:
                await client.aclose()

        answers = asyncio.run(run())
    assert len(answers) == 24 and all(a[0].reward is not None for a in answers)  # nothing lost
    # Each failed replica cost one attempt, then sat out its cooldown; the healthy ones shared the rest.
    assert client.failures_by_url == {down: 1, draining.url: 1}
    assert client.requests_by_url[down] == 1 and client.requests_by_url[draining.url] == 1
    assert client.requests_by_url[server.url] >= 8 and client.requests_by_url[second.url] >= 8
    assert client.retried_by_reason == {"connection": 1, "server_error": 1}


def test_extra_info_urls_override_the_environment(server, env):
    env.setenv("JUDGE_REWARD_URLS", f"http://127.0.0.1:{free_port()}")  # nothing there
    out = verl.compute_score(**sample(OUTPUTS[0], judge_reward_urls=[server.url]))
    assert out["judge_ok"] == 1.0


def test_one_url_client_and_the_components_it_returns(server):
    client = JudgeServiceClient(ServiceRewardConfig(url=server.url))
    assert client.urls == [server.url]
    [got] = client.score_sync([Item(OUTPUTS[0], ARTICLE)])
    assert got.reward is not None and set(got.components) >= {"aspect/coherence", "aspect/fluency"}


def test_source_must_be_given_or_explicitly_taken_from_the_prompt(server, env):
    env.setenv("JUDGE_REWARD_URLS", server.url)
    prompt = [{"role": "system", "content": "Summarise."}, {"role": "user", "content": ARTICLE}]
    with pytest.raises(ValueError, match=r"extra_info\['source'\]: missing .*JUDGE_REWARD_SOURCE_FROM_PROMPT"):
        verl.compute_score("news", OUTPUTS[0], None, {"prompt": prompt})
    from_prompt = verl.compute_score("news", OUTPUTS[0], None, {"prompt": prompt}, source_from_prompt=True)
    from_source = verl.compute_score(**sample(OUTPUTS[0]))
    assert from_prompt["score"] == pytest.approx(from_source["score"], abs=1e-6)
    env.setenv("JUDGE_REWARD_SOURCE_KEY", "article")
    assert verl.compute_score("news", OUTPUTS[0], None, {"article": ARTICLE})["judge_ok"] == 1.0


@pytest.mark.parametrize("setting, value, message", [
    ("JUDGE_REWARD_URLS", "judge-0:8080", "JUDGE_REWARD_URLS: expected an http(s) URL, got 'judge-0:8080'"),
    ("JUDGE_REWARD_URLS", " , ", "JUDGE_REWARD_URLS: expected at least one name"),
    ("JUDGE_REWARD_NEUTRAL_SCORE", "nan", "JUDGE_REWARD_NEUTRAL_SCORE: expected a finite number, got 'nan'"),
    ("JUDGE_REWARD_TIMEOUT_S", "0", "JUDGE_REWARD_TIMEOUT_S: expected a positive number, got '0'"),
    ("JUDGE_REWARD_SOURCE_FROM_PROMPT", "maybe", "JUDGE_REWARD_SOURCE_FROM_PROMPT: expected 1/0"),
])
def test_bad_settings_are_one_line_errors_naming_the_variable(server, env, setting, value, message):
    env.setenv("JUDGE_REWARD_URLS", server.url)
    env.setenv(setting, value)
    with pytest.raises(ValueError) as err:
        verl.compute_score(**sample(OUTPUTS[0]))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_wrong_request_is_raised_not_flagged(server, env):
    env.setenv("JUDGE_REWARD_URLS", server.url)
    with pytest.raises(ServiceError, match="unknown aspect 'coherance'"):
        verl.compute_score(**sample(OUTPUTS[0]), aspects=["coherance"])
    with pytest.raises(TypeError, match=r"unknown keyword argument\(s\) \['aspect'\]"):
        verl.compute_score(**sample(OUTPUTS[0]), aspect="coherence")
    with pytest.raises(ValueError, match="JUDGE_REWARD_URLS: not set"):
        env.delenv("JUDGE_REWARD_URLS")
        verl.compute_score(**sample(OUTPUTS[0]))


def test_the_module_imports_no_torch_or_transformers():
    import subprocess
    import sys

    code = ("import sys, judge_reward.trainers.verl; "
            "print(sorted(m for m in ('torch', 'transformers', 'fastapi', 'uvicorn') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_rollout_longer_than_the_service_takes_is_flagged_not_raised(env):
    """The size limit is the sample's own doing (a policy that rambles): that sample fails, training goes on."""
    with serve(max_text_chars=400) as small:
        env.setenv("JUDGE_REWARD_URLS", small.url)
        long = verl.compute_score(**sample(" ".join([OUTPUTS[0]] * 20)), aspects=["coherence"])
        short = verl.compute_score(**sample(OUTPUTS[0]), aspects=["coherence"])
    assert long["judge_ok"] == 0.0 and long["score"] == verl.NEUTRAL_SCORE
    assert "the service's limit is 400 (max_text_chars)" in long["judge_failure"]
    assert short["judge_ok"] == 1.0 and set(long) == set(short)
