"""The shared retry helper: backoff bounds, Retry-After, counting retries by reason."""

import asyncio
from collections import Counter

import pytest

from judge_reward.retry import Backoff, Failure, parse_retry_after, retry_async


def test_exponential_delay_stays_in_its_jitter_band_and_under_the_cap():
    b = Backoff(max_retries=9, initial_s=0.5, max_s=4.0, jitter=(0.5, 1.0))
    for retry, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (8, 4.0)]:
        for _ in range(50):
            assert 0.5 * ceiling <= b.delay(retry) <= ceiling
    up = Backoff(max_retries=3, initial_s=1.0, max_s=3.0, jitter=(1.0, 1.25))
    assert all(2.0 <= up.delay(2) <= 2.5 for _ in range(50)) and all(up.delay(3) == 3.0 for _ in range(5))


def test_retry_after_is_honoured_up_to_its_cap():
    b = Backoff(max_retries=1, initial_s=0.1, max_s=1.0, retry_after_max_s=5.0, retry_after_jitter=(1.0, 1.1))
    assert all(3.0 <= b.delay(1, 3.0) <= 3.3 for _ in range(50)) and 5.0 <= b.delay(1, 60.0) <= 5.5
    assert Backoff(max_retries=1, initial_s=0.1, max_s=1.0).delay(1, 7.0) == 1.0  # default cap: max_s
    assert parse_retry_after({"retry-after": "2"}) == 2.0 and parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({}) is None and parse_retry_after({"retry-after": "soon"}) is None


class Flaky(Exception):
    def __init__(self, reason, retryable=True):
        super().__init__(reason)
        self.failure = Failure(reason, retryable)


def run(faults, max_retries):
    faults, calls, counter = list(faults), [], Counter()

    async def attempt():
        calls.append(1)
        if faults:
            raise faults.pop(0)
        return "ok"

    backoff = Backoff(max_retries=max_retries, initial_s=0.001, max_s=0.002)
    classify = lambda err: err.failure if isinstance(err, Flaky) else None  # noqa: E731
    try:
        return asyncio.run(retry_async(attempt, classify, backoff, counter)), len(calls), counter
    except Exception as err:
        return err, len(calls), counter


def test_every_retry_is_counted_by_reason_and_the_last_error_is_raised():
    assert run([Flaky("timeout"), Flaky("rate_limited"), Flaky("timeout")], 5) == ("ok", 4, {"timeout": 2, "rate_limited": 1})
    err, calls, counter = run([Flaky("server_error")] * 4, 2)
    assert str(err) == "server_error" and calls == 3 and counter == {"server_error": 2}
    err, calls, counter = run([Flaky("client_error", retryable=False)], 5)
    assert str(err) == "client_error" and calls == 1 and counter == {}
    err, calls, counter = run([KeyError("bug")], 5)  # not classified: propagates at once
    assert isinstance(err, KeyError) and calls == 1 and counter == {}


@pytest.mark.parametrize("max_retries", [0, 1])
def test_no_retries_left_means_one_attempt_more_than_retries(max_retries):
    _, calls, _ = run([Flaky("timeout")] * 3, max_retries)
    assert calls == max_retries + 1
