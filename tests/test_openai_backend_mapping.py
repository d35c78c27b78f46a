"""Mapping a server's top_logprobs onto candidate values (judge_reward.candidates, appended section)."""

import itertools
import math
import random

import pytest

from judge_reward.candidates import (
    TopPosition,
    map_top_logprobs,
    needs_termination,
    positions_needed,
    strip_token_space,
)

L = math.log
ONE_TO_FIVE = tuple("12345")
ONE_TO_TEN = tuple(str(i) for i in range(1, 11))


def pos(chosen, **probs):
    return TopPosition(chosen, tuple((k, L(v)) for k, v in probs.items()))


def P(mapping, cands, value):
    lp = mapping.logprobs[cands.index(value)]
    return math.exp(lp) if lp > -math.inf else 0.0


def test_spaced_and_bare_digit_add_up_and_are_exact():
    top = TopPosition(" 4", ((" 4", L(0.3)), ("4", L(0.2)), ("\u25814", L(0.05)), (" 3", L(0.1)), ("x", L(0.1))))
    m = map_top_logprobs([top], ONE_TO_FIVE)
    assert P(m, ONE_TO_FIVE, "4") == pytest.approx(0.55)
    assert P(m, ONE_TO_FIVE, "3") == pytest.approx(0.1)
    assert m.logprobs[0] == -math.inf and m.logprobs[4] == -math.inf  # unlisted: nothing, not a guess
    assert m.exact == [True] * 5
    assert m.mass == pytest.approx(0.65)
    assert m.listed_mass == pytest.approx(0.75)
    assert m.unlisted_mass == pytest.approx(0.25)
    assert m.ambiguous_mass == 0.0


def test_openai_unlikely_sentinel_counts_as_zero():
    m = map_top_logprobs([TopPosition("4", (("4", L(0.9)), ("3", -9999.0)))], ONE_TO_FIVE)
    assert m.logprobs[2] == -math.inf
    assert P(m, ONE_TO_FIVE, "4") == pytest.approx(0.9)


def test_two_token_value_is_read_along_the_generated_path():
    # Gemma/Llama style: "10" is "1", "0"; "1" is a prefix of "10" so it needs the number to end.
    positions = [
        pos("1", **{"1": 0.4, "2": 0.2, " 1": 0.1}),
        pos("0", **{"0": 0.5, "\n": 0.3, "5": 0.1}),
    ]
    m = map_top_logprobs(positions, ONE_TO_TEN)
    assert P(m, ONE_TO_TEN, "10") == pytest.approx(0.4 * 0.5)
    assert P(m, ONE_TO_TEN, "1") == pytest.approx(0.4 * 0.3)  # "1" then a non-digit
    assert P(m, ONE_TO_TEN, "2") == pytest.approx(0.2)
    # "15" is no candidate; " 1" was listed but not generated, so what follows it is unknown
    assert m.ambiguous_mass == pytest.approx(0.1)
    assert m.exact[ONE_TO_TEN.index("2")] is True
    assert m.exact[ONE_TO_TEN.index("1")] is False and m.exact[ONE_TO_TEN.index("10")] is False


def test_prefix_value_without_second_position_is_ambiguous_not_assigned():
    m = map_top_logprobs([pos("1", **{"1": 0.6, "3": 0.2})], ONE_TO_TEN)
    assert m.logprobs[0] == -math.inf and m.logprobs[9] == -math.inf
    assert m.ambiguous_mass == pytest.approx(0.6)
    assert P(m, ONE_TO_TEN, "3") == pytest.approx(0.2)


def test_whole_number_tokens_and_three_token_values():
    # tiktoken style: "10" is one token and exact unless "1" could also start it
    m = map_top_logprobs([pos("10", **{"10": 0.5, "9": 0.3})], ONE_TO_TEN)
    assert P(m, ONE_TO_TEN, "10") == pytest.approx(0.5) and m.exact[9] is True
    # 0-100 as single digits: "1","0","0" needs three positions plus one to see "10" end
    cands = tuple(str(i) for i in range(0, 101))
    assert positions_needed(cands) == 4
    positions = [
        pos("1", **{"1": 0.5, "9": 0.2}),
        pos("0", **{"0": 0.6, "5": 0.3}),
        pos("0", **{"0": 0.7, " ": 0.2}),
        pos("\n", **{"\n": 0.9}),
    ]
    m = map_top_logprobs(positions, cands)
    assert P(m, cands, "100") == pytest.approx(0.5 * 0.6 * 0.7)
    assert P(m, cands, "10") == pytest.approx(0.5 * 0.6 * 0.2)
    assert P(m, cands, "15") == pytest.approx(0.5 * 0.3)
    # "9" starts "90".."99" too and was not generated: unresolved, so counted as ambiguous
    assert P(m, cands, "9") == 0.0 and m.ambiguous_mass == pytest.approx(0.2)


def test_strip_and_positions_needed():
    assert strip_token_space(" \u2581\u01204") == "4"
    assert positions_needed(ONE_TO_FIVE) == 1
    assert positions_needed(ONE_TO_TEN) == 3
    with pytest.raises(ValueError, match="candidates"):
        map_top_logprobs([pos("1", **{"1": 1.0})], ())
    with pytest.raises(ValueError, match="positions"):
        map_top_logprobs([], ONE_TO_FIVE)


# -- the documented bound, checked against a synthetic model whose every probability is known ----

VOCAB = ["0", "1", "5", " 1", " 5", "\n", "x"]


def _toy_model(seed):
    def dist(prefix):  # a pure function of the prefix, whatever order it is asked in
        rng = random.Random(f"{seed}|{'|'.join(prefix)}")
        w = [rng.random() ** 2 for _ in VOCAB]
        return {t: x / sum(w) for t, x in zip(VOCAB, w)}

    return dist


def _true_probs(dist, cands, max_len):
    """P(value) by enumeration, with the mapping's convention: a value that another candidate extends
    must be followed by a non-digit; one that none extends counts however it continues."""
    closed = {c for c in cands if not any(o != c and o.startswith(c) for o in cands)}
    out = {c: 0.0 for c in cands}
    for depth in range(1, max_len + 1):
        for seq in itertools.product(VOCAB, repeat=depth):
            if not strip_token_space(seq[0]) or any(t.startswith(" ") or t in ("\n", "x") for t in seq[1:]):
                continue  # the value starts at the first token (which may carry a space); words end it
            text = strip_token_space(seq[0]) + "".join(seq[1:])
            if text not in out:
                continue
            p = 1.0
            for i, t in enumerate(seq):
                p *= dist(seq[:i])[t]
            if text in closed:
                out[text] += p
            else:
                nxt = dist(seq)
                out[text] += p * sum(v for t, v in nxt.items() if not t[0].isdigit())
    return out


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("k", [2, 4, 7])
def test_reported_probabilities_are_lower_bounds_within_the_stated_slack(seed, k):
    cands = ("1", "5", "10", "15", "11")
    dist = _toy_model(seed)
    positions, prefix = [], ()
    for _ in range(positions_needed(cands)):
        d = dist(prefix)
        top = sorted(d.items(), key=lambda kv: -kv[1])[:k]
        chosen = top[0][0]
        positions.append(TopPosition(chosen, tuple((t, L(v)) for t, v in top)))
        prefix = prefix + (chosen,)
    m = map_top_logprobs(positions, cands)
    truth = _true_probs(dist, cands, positions_needed(cands))
    slack = m.ambiguous_mass + m.unlisted_mass
    total_reported = 0.0
    for c in cands:
        reported = P(m, cands, c)
        total_reported += reported
        assert reported <= truth[c] + 1e-12, (c, reported, truth[c])
        assert truth[c] <= reported + slack + 1e-12
        if m.exact[cands.index(c)]:
            # exact candidates miss only spellings that were not listed at the first position
            assert truth[c] - reported <= m.unlisted_mass + 1e-12
    assert m.mass == pytest.approx(total_reported)
    if k == len(VOCAB):  # everything listed: single-token, unextended values are exactly right
        assert P(m, cands, "5") == pytest.approx(truth["5"])
    assert needs_termination(cands)
