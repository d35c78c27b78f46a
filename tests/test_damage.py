"""Each damage generator (judge_reward/damage.py): what it changes, when it declines, determinism."""

import random

import pytest

from judge_reward.damage import FAMILIES, damage

SOURCE = ("The town council of Millbrook voted 7 to 2 on Tuesday to close the Elm Street bridge to cars. "
          "Mayor Ruth Alder said repairs would cost $2.4 million. Engineers from Halvorsen found cracks in 2019.")
OUTPUT = ("The Millbrook council voted 7 to 2 to close the Elm Street bridge. The repairs will cost $2.4 million. "
          "Mayor Ruth Alder said the work was urgent.")


def rng():
    return random.Random(0)


def test_change_number_changes_exactly_one_number():
    out = FAMILIES["change_number"](OUTPUT, SOURCE, rng())
    assert out != OUTPUT and len(out.split()) == len(OUTPUT.split())
    changed = [(a, b) for a, b in zip(OUTPUT.split(), out.split()) if a != b]
    assert len(changed) == 1 and any(ch.isdigit() for ch in changed[0][0])
    assert FAMILIES["change_number"]("Seven people were hurt.", SOURCE, rng()) == "Eight people were hurt."
    assert FAMILIES["change_number"]("The bridge closed.", SOURCE, rng()) is None
    assert FAMILIES["change_number"]("Three people were hurt.", SOURCE, rng()) == "Four people were hurt."
    assert FAMILIES["change_number"]("It opened in 2019.", SOURCE, rng()) == "It opened in 2016."


def test_flip_negation_adds_after_an_auxiliary_or_removes_one():
    assert FAMILIES["flip_negation"]("The bridge was closed.", "", rng()) == "The bridge was not closed."
    assert FAMILIES["flip_negation"]("The bridge was not closed.", "", rng()) == "The bridge was closed."
    assert FAMILIES["flip_negation"]("He didn't vote.", "", rng()) == "He did vote."
    assert FAMILIES["flip_negation"]("He won't vote.", "", rng()) == "He will vote."
    assert FAMILIES["flip_negation"]("The council voted.", "", rng()) is None


def test_swap_content_words_trades_two_different_words():
    out = FAMILIES["swap_content_words"](OUTPUT, SOURCE, rng())
    a, b = OUTPUT.split(), out.split()
    diff = [k for k, (x, y) in enumerate(zip(a, b)) if x != y]
    assert len(diff) == 2 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
    assert FAMILIES["swap_content_words"]("It is the bridge.", "", rng()) is None  # one content word


def test_swap_names_uses_another_name_from_the_source():
    out = FAMILIES["swap_names"](OUTPUT, SOURCE, rng())
    new = set(out.split()) - set(OUTPUT.split())
    assert len(new) == 1 and new.pop().strip(".") in SOURCE
    assert FAMILIES["swap_names"]("the council voted .", SOURCE, rng()) is None  # lower-cased: no names


def test_sentence_level_families():
    assert FAMILIES["reverse_sentences"](OUTPUT, SOURCE, rng()).startswith("Mayor Ruth Alder said")
    assert FAMILIES["reverse_sentences"]("One sentence only.", SOURCE, rng()) is None
    dup = FAMILIES["duplicate_sentence"](OUTPUT, SOURCE, rng())
    assert len(dup) > len(OUTPUT) and sorted(set(dup.split(". "))) == sorted(set(OUTPUT.split(". ")))
    shuffled = FAMILIES["shuffle_words"](OUTPUT, SOURCE, rng())
    assert sorted(shuffled.split()) == sorted(OUTPUT.split()) and shuffled != OUTPUT


def test_append_invented_names_the_subject_and_keeps_the_output():
    out = FAMILIES["append_invented"](OUTPUT, SOURCE, rng())
    assert out.startswith(OUTPUT) and len(out) > len(OUTPUT)
    tail = out[len(OUTPUT):]
    assert any(name in tail for name in ("Millbrook", "Alder", "Ruth", "Elm", "Halvorsen", "Street"))


def test_cut_mid_sentence_keeps_earlier_sentences_and_drops_the_ending():
    out = FAMILIES["cut_mid_sentence"](OUTPUT, SOURCE, rng())
    assert out.startswith("The Millbrook council voted 7 to 2 to close the Elm Street bridge. The repairs will cost")
    assert not out.rstrip().endswith(".") and len(out) < len(OUTPUT)
    assert FAMILIES["cut_mid_sentence"]("Too short.", SOURCE, rng()) is None


def test_damage_is_deterministic_drops_unchanged_copies_and_checks_names():
    a, b = damage(OUTPUT, SOURCE, seed=3), damage(OUTPUT, SOURCE, seed=3)
    assert a == b and set(a) <= set(FAMILIES) and OUTPUT not in a.values()
    assert set(damage("Short.", SOURCE)) == {"append_invented", "duplicate_sentence"}  # the others decline
    with pytest.raises(ValueError, match="unknown damage family 'typo'"):
        damage(OUTPUT, SOURCE, families=["typo"])
