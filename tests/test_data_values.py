"""The data_values guard and the meaning representations it reads (judge_reward/meaning.py)."""

import json

import pytest

from judge_reward.config import ConfigError
from judge_reward.guards import GuardsConfig, SourceStats, apply_guards, words
from judge_reward.meaning import Domain, parse_meaning, unnamed_values, uses_notation

ACT = "inform(name='Sushi Ran',food=japanese,area='nob hill',kids_allowed=yes,price_range=moderate)"


def guards(**settings):
    return GuardsConfig.from_dict({"data_values": {"enabled": True, **settings}})


def public(section) -> dict:
    """A section's fields as a config gives them (not what it read on first use)."""
    return {k: v for k, v in vars(section).items() if not k.startswith("_")}


def charge(text, source=ACT, **settings):
    report = apply_guards(guards(**settings), text, SourceStats(source))
    return report.penalties.get("data_values"), report.measured.get("data_values")


def test_both_notations_are_read_and_prose_is_not_a_meaning_representation():
    m = parse_meaning("inform(name='X',area=riverside,near='Y') ?request(food)")
    assert m.acts == ("inform", "request") and m.slots == (("name", "X"), ("area", "riverside"), ("near", "Y"))
    e2e = parse_meaning("name[The Eagle], eatType[coffee shop], customer rating[5 out of 5]")
    assert e2e.acts == () and ("eatType", "coffee shop") in e2e.slots and ("rating", "5 out of 5") in e2e.slots
    assert parse_meaning("The council voted on Tuesday to close the bridge.") is None
    # prose with a bracket or an aside in it is still prose, not data
    assert parse_meaning("The minister [Ms Smith] said the bridge (built 1890) would close.") is None
    assert parse_meaning("Fans in Valencia [on Saturday] saw the rate (x=2) rise.") is None
    choice = parse_meaning("select(near='marina cow hollow or japantown',kids_allowed='yes or no')")
    assert choice.spoken_values({"yes", "no"}) == ("marina cow hollow", "japantown")


@pytest.mark.parametrize("text, value, named", [
    ("It is in the city centre .", "citycentre", True),        # a joined value in words
    ("a moderately priced place", "moderate", True),
    ("sushi ran is open", "Sushi Ran", True),
    ("X is near the river", "riverside", False),               # said in other words: not named
    ("Xavier's is cheap", "X", False),                         # a short value is a word of its own
    ("X is cheap", "X", True),
    ("a 16 serves food", "a 16", True),
])
def test_a_value_is_named_by_its_words_run_together(text, value, named):
    assert (unnamed_values(words(text), [value]) == []) is named


def test_notation_is_the_acts_and_slots_as_written_not_their_words():
    m = parse_meaning(ACT)
    assert uses_notation("inform ( name = 'Sushi Ran' )", m) and uses_notation("food=japanese", m)
    assert not uses_notation("Sushi Ran is a name to remember; the food is Japanese.", m)


def test_an_honest_sentence_pays_nothing_and_one_value_said_otherwise_is_free():
    penalty, measured = charge("Sushi Ran is a moderately priced Japanese restaurant in Nob Hill that welcomes kids .")
    assert penalty == 0.0 and measured["missing"] == [] and measured["values"] == 4
    # one of four values in other words ("fairly priced"): a quarter missing, free
    penalty, measured = charge("Sushi Ran is a fairly priced Japanese restaurant in Nob Hill .")
    assert penalty == 0.0 and measured["missing"] == ["moderate"]


def test_a_sentence_cut_short_or_written_for_other_data_pays_for_what_it_leaves_out():
    # half the values gone is still free; three of four: the full weight at missing_full (0.75)
    penalty, measured = charge("Sushi Ran is a Japanese restaurant")
    assert measured["missing_share"] == 0.5 and penalty == 0.0
    penalty, measured = charge("Sushi Ran is a Japanese restaurant", missing_free=0.25, missing_full=0.75)
    assert penalty == pytest.approx(4.0 * 0.25 / 0.5)
    penalty, measured = charge("Sushi Ran is a restaurant")
    assert measured["missing_share"] == 0.75 and penalty == 4.0
    # another act's sentence names none of these values: the full weight
    penalty, measured = charge("Chenery Park is a cheap place near Glen Park .")
    assert measured["missing_share"] == 1.0 and penalty == 4.0


def test_a_value_two_slots_give_is_named_only_by_saying_it_twice():
    # BAGEL writes every name as X: the venue and the place it is near are two values
    act = "inform(name='X',type=placetoeat,near='X',food=Chinese,eattype=restaurant)"
    assert parse_meaning(act).spoken_values({"placetoeat"}) == ("X", "X", "Chinese", "restaurant")
    penalty, measured = charge("X is a chinese restaurant near X .", act, unspoken=["placetoeat"])
    assert penalty == 0.0 and measured["missing"] == []
    _, measured = charge("X is a chinese restaurant", act, unspoken=["placetoeat"])
    assert measured["missing"] == ["X"] and measured["missing_share"] == 0.25
    assert unnamed_values(words("X is a restaurant"), ["X", "X", "X"]) == ["X", "X"]


def test_missing_slope_charges_every_value_left_out_on_top_of_the_ramp():
    # one of four values left out: free under the ramp, missing_slope * 1/4 with the slope
    assert charge("Sushi Ran is a fairly priced Japanese restaurant in Nob Hill .")[0] == 0.0
    penalty, _ = charge("Sushi Ran is a fairly priced Japanese restaurant in Nob Hill .", missing_slope=2.0)
    assert penalty == pytest.approx(2.0 * 0.25)
    # three of four: the ramp's full weight plus the slope's share
    penalty, _ = charge("Sushi Ran is a restaurant", missing_slope=2.0)
    assert penalty == pytest.approx(4.0 + 2.0 * 0.75)
    # the honest sentence that names everything pays nothing whatever the slope
    assert charge("Sushi Ran is a moderately priced Japanese restaurant in Nob Hill .", missing_slope=8.0)[0] == 0.0


def test_a_sentence_stopped_inside_a_value_has_a_cut_ending():
    from judge_reward.guards import ends_cut

    act = SourceStats("inform(name='aux delices restaurant',address='2327 polk street',food=vietnamese)")
    assert ends_cut("Aux delices restaurant 's address is 2327 polk", act)
    assert ends_cut("There is a vietnamese place called aux delices", act)
    # ending on a whole value, or on a word that is a whole value of its own, is not a cut
    assert not ends_cut("Aux delices restaurant is at 2327 polk street", act)
    choice = SourceStats("inform(name='arabian nights restaurant',food=arabian,near='mission terrace or outer mission')")
    assert not ends_cut("Arabian nights restaurant serves arabian", choice)
    assert not ends_cut("Arabian nights restaurant is near outer mission", choice)
    assert ends_cut("Arabian nights restaurant is near mission", choice)
    ending = GuardsConfig.from_dict({"ending": {"enabled": True, "mode": "cut", "weight": 4.0}})
    assert apply_guards(ending, "Aux delices restaurant 's address is 2327 polk", act).penalties["ending"] == 4.0


def test_a_sentence_that_names_none_of_the_data_is_charged_by_the_words_it_holds():
    real = "Sushi Ran is a moderately priced Japanese restaurant in Nob Hill ."  # 6 words of 4+ letters
    penalty, measured = charge(f"{real} It is a wonderful choice for everyone .")  # 3 more, naming nothing
    assert measured["unnamed_sentences"] == ["It is a wonderful choice for everyone ."]
    assert measured["unnamed_share"] == pytest.approx(3 / 9) and penalty == pytest.approx(4.0 * (3 / 9 - 0.25) / 0.25)
    penalty, _ = charge(f"{real} It is a wonderful choice for everyone , whatever their taste or budget .")
    assert penalty == 4.0  # as many words as the real sentence: the full weight
    penalty, measured = charge(f"I have a restaurant for you . {real}")  # a short opener weighs little
    assert measured["unnamed_sentences"] == ["I have a restaurant for you ."] and penalty == 0.0


FILLER = "There are many different factors to consider in a situation like this one and each of them matters"


def test_filler_run_on_without_a_full_stop_is_charged_as_an_unnamed_sentence():
    act = "inform(name='X',eattype=coffeeshop,eattype=restaurant)"
    assert charge("X is a cafe restaurant", source=act)[0] == 0.0
    penalty, measured = charge(f"X is a cafe restaurant {FILLER}", source=act)
    assert measured["unnamed_sentences"] == [] and measured["unnamed_runs"] == [FILLER.lower()]
    assert penalty == 4.0
    # with a full stop the filler is a sentence naming nothing: the same charge either way
    assert charge(f"X is a cafe restaurant . {FILLER} .", source=act)[0] == 4.0
    assert charge(f"X is a cafe restaurant {FILLER}", source=act, unnamed_run=None)[0] == 0.0


def test_an_honest_sentence_with_words_between_its_values_has_no_unnamed_run():
    # 7 words of four or more letters between "X" and "centre": below unnamed_run (10)
    act = "inform(name=none,near='X',area=citycentre)"
    penalty, measured = charge("I regret to tell you that there are no places I know of near X in the centre of town .",
                               source=act)
    assert penalty == 0.0 and measured["unnamed_runs"] == []
    penalty, measured = charge("I regret to tell you that there are no places I know of near X in the centre of town .",
                               source=act, unnamed_run=5)
    assert measured["unnamed_runs"] == ["i regret to tell you that there are no places i know of near"]
    assert penalty > 0


def test_the_length_ceiling_grows_with_the_data():
    def length(text, source, **settings):
        config = GuardsConfig.from_dict({"length": {"enabled": True, "min_words": 3, "max_source_ratio": None,
                                                    "max_words_per_slot": 3, "max_words_base": 18, "full_at": 1.5,
                                                    "weight": 4.0, **settings}})
        report = apply_guards(config, text, SourceStats(source))
        return report.penalties["length"], report.measured["length"]["ceiling"]

    one_slot = "confirm(kids_allowed=yes)"
    honest = "Please confirm , you want a restaurant that allows child -s ?"  # 10 words
    assert length(honest, one_slot) == (0.0, 21)
    penalty, _ = length(f"{honest} {FILLER} .", one_slot)  # 28 words: 7 past 21, full at 31.5
    assert penalty == pytest.approx(4.0 * 7 / 10.5)
    # five slots leave room for the sentence that names them all
    assert length(f"{honest} {FILLER} .", ACT) == (0.0, 33)
    # a prose source has no slots: no data ceiling
    assert length(f"{honest} {FILLER} .", "The council met on Tuesday.") == (0.0, None)
    with pytest.raises(ConfigError, match=r"length.full_at: must be above 1"):
        GuardsConfig.from_dict({"length": {"enabled": True, "full_at": 1.0}})


def test_two_values_one_said_in_other_words_is_free_but_not_both():
    act = "inform(name=none,area=citycentre,near='X')"
    assert charge("There are no places near X in the centre of town .", source=act)[0] == 0.0
    assert charge("There is a cheap cafe by the river .", source=act)[0] == 4.0
    assert charge("I recommend Y .", source="inform(name='hakkasan')")[0] == 4.0  # one value: never free


def test_the_pasted_act_pays_the_notation_charge_even_with_no_value_to_name():
    penalty, measured = charge(ACT, notation_weight=3.0)
    assert measured["notation"] and measured["missing"] == [] and penalty == 3.0  # every value named: notation only
    penalty, measured = charge("confirm ( area = dont_care )", source="confirm(area=dont_care)", notation_weight=3.0)
    assert measured == {"values": 0, "notation": True} and penalty == 3.0
    penalty, _ = charge("Can I confirm you do not mind the area ?", source="confirm(area=dont_care)")
    assert penalty == 0.0


def test_a_prose_source_is_not_measured():
    report = apply_guards(guards(), "The bridge is closed.", SourceStats("The council closed the bridge."))
    assert "data_values" not in report.penalties


def test_settings_are_checked_with_the_field_named():
    with pytest.raises(ConfigError, match=r"data_values.missing_full: must be above missing_free \(0.5\), got 0.4"):
        guards(missing_full=0.4)
    with pytest.raises(ConfigError, match=r"data_values.unnamed_full: must be above unnamed_free \(0.25\), got 0.2"):
        guards(unnamed_full=0.2)
    with pytest.raises(ConfigError, match=r"data_values.unspoken\[0\]: expected non-empty text, got True"):
        guards(unspoken=[True])
    with pytest.raises(ConfigError, match=r"repetition.full_at: must be above threshold \(0.1\), got 0.1"):
        GuardsConfig.from_dict({"repetition": {"enabled": True, "full_at": 0.1}})


def test_repetition_full_at_charges_an_output_said_twice_in_full():
    said = "Sushi Ran is a moderately priced Japanese restaurant in Nob Hill ."
    twice = f"{said} {said}"
    base = {"enabled": True, "n": 3, "threshold": 0.1, "weight": 4.0}
    slow = apply_guards(GuardsConfig.from_dict({"repetition": base}), twice, None).penalties["repetition"]
    fast = apply_guards(GuardsConfig.from_dict({"repetition": {**base, "full_at": 0.3}}), twice, None).penalties["repetition"]
    assert slow < 2.0 and fast == 4.0
    assert apply_guards(GuardsConfig.from_dict({"repetition": {**base, "full_at": 0.3}}), said, None).penalties["repetition"] == 0.0


@pytest.mark.parametrize("name, most", [("bagel", 0.01), ("sfres", 0.01)])
def test_the_preset_charges_few_honest_sentences_on_the_rated_sets(shared_data, name, most):
    """The shipped data_to_text guard on every system sentence and human reference of BAGEL and SFRES:
    the share it charges stays at the scoreboard's figures (docs/presets.md)."""
    from judge_reward.judge import JudgeConfig
    from judge_reward.reward_config import RewardConfig

    config = RewardConfig.from_dict(JudgeConfig.load("data_to_text").reward).guards
    only = GuardsConfig.from_dict({"data_values": config.data_values})
    rows = json.loads((shared_data / "d2t" / f"{name}.json").read_text())
    only.data_values.use_inputs([r["source"] for r in rows])  # domain: inputs, as validate gives them
    texts = [(r["source"], r["system_output"]) for r in rows]
    texts += [(s, ref) for s, refs in {r["source"]: r["references"] for r in rows}.items() for ref in refs]
    stats = {s: SourceStats(s) for s, _ in texts}
    charged = sum(apply_guards(only, t, stats[s]).total > 0 for s, t in texts)
    assert charged / len(texts) <= most, charged / len(texts)


def test_the_every_value_example_is_the_preset_with_a_slope():
    """``examples/data_to_text_every_value.yaml`` differs from ``data_to_text`` only in
    ``data_values.missing_slope``: a sentence that leaves out one of four values, free under the
    preset, pays 2 x 1/4 there, and an honest one pays nothing under either."""
    from pathlib import Path

    from judge_reward.judge import JudgeConfig
    from judge_reward.reward_config import RewardConfig

    preset = JudgeConfig.load("data_to_text")
    example = JudgeConfig.load(str(Path(__file__).parents[1] / "examples" / "data_to_text_every_value.yaml"))
    a, b = RewardConfig.from_dict(preset.reward).guards, RewardConfig.from_dict(example.reward).guards
    assert b.data_values.missing_slope == 2.0 and a.data_values.missing_slope == 0.0
    assert {**public(a.data_values), "missing_slope": 2.0} == public(b.data_values)
    assert {n: getattr(a, n) for n in a.enabled if n != "data_values"} == {n: getattr(b, n) for n in b.enabled if n != "data_values"}
    assert (example.backend, example.aspects_file, example.method) == (preset.backend, preset.aspects_file, preset.method)
    one_missing = "Sushi Ran is a fairly priced Japanese restaurant in Nob Hill ."
    only = {"data_values": {"enabled": True}}
    assert apply_guards(GuardsConfig.from_dict(only), one_missing, SourceStats(ACT)).total == 0.0
    sloped = GuardsConfig.from_dict({"data_values": {**public(b.data_values), "domain": None}})
    assert apply_guards(sloped, one_missing, SourceStats(ACT)).penalties["data_values"] == pytest.approx(0.5)
    honest = "Sushi Ran is a moderately priced Japanese restaurant in Nob Hill that welcomes kids ."
    assert apply_guards(sloped, honest, SourceStats(ACT)).total == 0.0


# -- values the data does not give (data_values.domain) ----------------------------------------------

TASK = [
    "inform(name='Sushi Ran', food=japanese, area='nob hill', price_range=moderate)",
    "inform(name='Ananda Fuara', food=vegetarian, area='civic center', price_range=cheap)",
    "inform(name='Alborz Persian Cuisine', food=persian, area='nob hill', price_range=moderate)",
    "inform(type=restaurant, count='12', area=citycentre)",
    "request(food)",
]


def test_the_domain_is_the_values_each_slot_takes_across_the_task():
    d = Domain.from_sources(TASK + ["The council met on Tuesday."], unspoken={"dont_care"})
    assert d.values["food"] == {"japanese", "vegetarian", "persian"}
    assert d.values["area"] == {"nob hill", "civic center", "citycentre"}
    assert "type" not in d.values  # one value in the whole task: nothing another could contradict
    assert d.placeholders == frozenset()
    bagel = Domain.from_sources(["inform(name='X', near='X', food=chinese)", "inform(name='X', addr='X', food=indian)",
                                 "inform(name='X', phone='X', area=riverside)"])
    assert bagel.placeholders == {"x"} and "x" not in bagel.values.get("near", set())


@pytest.mark.parametrize("text, source, added", [
    # another venue's food, area or price
    ("Sushi Ran is a vegetarian place in Nob Hill.", TASK[0], ["vegetarian"]),
    ("Sushi Ran, in Civic Center, serves Japanese food.", TASK[0], ["civic center"]),
    ("Sushi Ran is a cheap Japanese place.", TASK[0], ["cheap"]),
    # a one-word value with an ending of its own, as naming reads it ("moderately" names moderate)
    ("Sushi Ran serves vegetarians in Nob Hill.", TASK[0], ["vegetarian"]),
    ("Ananda Fuara is a moderately priced vegetarian place.", TASK[1], ["moderate"]),
    # a joined value said in words, either way round
    ("Sushi Ran is in the centre of the city.", TASK[0], ["citycentre"]),
    ("Sushi Ran is in the city centre.", TASK[0], ["citycentre"]),
    # the honest sentence, and what it may say without claiming another value
    ("Sushi Ran is a moderately priced Japanese restaurant in Nob Hill.", TASK[0], []),
    ("Alborz Persian Cuisine serves Persian food at a moderate price.", TASK[2], []),   # a value inside the name
    ("Alborz Persian Cuisine is in the moderate price range.", TASK[2], []),
    ("Do you want Japanese, vegetarian or Persian food?", TASK[4], []),                   # the slot is asked about
    ("Any food will do in Nob Hill?", "inform(area='nob hill', food=dont_care)", []),
])
def test_added_values_are_other_inputs_values_said_outside_the_datas_own(text, source, added):
    d = Domain.from_sources(TASK, unspoken={"dont_care"})
    assert d.added_values(words(text), parse_meaning(source)) == added


def test_a_placeholder_said_more_often_than_the_data_gives_it_once_names_something_else():
    d = Domain.from_sources(["inform(name='X', near='X', food=chinese)", "inform(name='X', addr='X', food=indian)",
                             "inform(name='X', phone='X', area=riverside)", "inform(name='X', eattype=restaurant)"])
    one = parse_meaning("inform(name='X', eattype=restaurant)")
    assert d.added_values(words("X is a restaurant."), one) == []
    assert d.added_values(words("X is a restaurant at X."), one) == ["x (said 2 times, the data gives it 1)"]
    # given to two slots, a text may write one of them as two ("near X and X"): not counted
    two = parse_meaning("inform(name='X', near='X', food=chinese)")
    assert d.added_values(words("X is a chinese restaurant near X and X."), two) == []


def test_the_guard_charges_an_added_value_from_a_domain_given_inline_or_as_a_file(tmp_path):
    source = SourceStats(TASK[0])
    other = "Sushi Ran is a vegetarian place in Nob Hill."
    honest = "Sushi Ran is a moderately priced Japanese restaurant in Nob Hill."
    assert charge(other, TASK[0])[0] == 0.0  # no domain: not checked
    penalty, measured = charge(other, TASK[0], domain=TASK, added_weight=3.0)
    assert penalty == 3.0 and measured["added"] == ["vegetarian"]
    assert charge(honest, TASK[0], domain=TASK)[0] == 0.0
    # a value claimed is paid on top of the values left out (3 of 4: the full weight)
    assert charge("Sushi Ran is vegetarian.", TASK[0], domain=TASK)[0] == 8.0
    files = {"task.json": json.dumps([{"source": s} for s in TASK]),
             "task.jsonl": "\n".join(json.dumps({"source": s, "output": "-"}) for s in TASK),
             "task.txt": "\n".join(TASK)}
    for name, content in files.items():
        (tmp_path / name).write_text(content)
        config = guards(domain=str(tmp_path / name))
        assert apply_guards(config, other, source).penalties["data_values"] == 4.0, name
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"source": TASK[0]}) + "\n" + json.dumps({"output": "no source"}) + "\n")
    with pytest.raises(ConfigError, match=r"reward.guards.data_values.domain: .*bad.jsonl:2: field 'source' should be text"):
        apply_guards(guards(domain=str(bad)), other, source)
    with pytest.raises(ConfigError, match=r"reward.guards.data_values.domain: .*missing.json: no such file"):
        apply_guards(guards(domain=str(tmp_path / "missing.json")), other, source)


def test_domain_inputs_needs_the_inputs_and_refuses_to_guess():
    config = guards(domain="inputs")
    with pytest.raises(ConfigError, match=r"reward.guards.data_values.domain: 'inputs' needs the task's inputs"):
        apply_guards(config, "Sushi Ran is a vegetarian place.", SourceStats(TASK[0]))
    config.data_values.use_inputs(TASK)
    assert apply_guards(config, "Sushi Ran is a vegetarian place in Nob Hill.", SourceStats(TASK[0])).penalties["data_values"] == 4.0
    # a copy scaled to another judge's units reads its inputs again (the scaled charge applies)
    scaled = config.scaled(0.5)
    scaled.data_values.use_inputs(TASK)
    assert apply_guards(scaled, "Sushi Ran is a vegetarian place in Nob Hill.", SourceStats(TASK[0])).penalties["data_values"] == 2.0


def test_the_reward_hands_its_inputs_to_the_guard(tmp_path, one_torch_thread):
    """``Reward.use_inputs``: the preset's ``domain: inputs`` on a tiny judge. Without the inputs the
    reward says so; with them, another act's value costs ``added_weight`` and the honest sentence
    nothing of it."""
    from tiny_models import save_judge_config

    from judge_reward import Item, JudgeConfig, Reward

    preset = JudgeConfig.load("data_to_text")
    assert preset.reward["guards"]["data_values"]["domain"] == "inputs"
    config = save_judge_config(tmp_path, "char", aspects_file="gptscore_data_to_text", gptscore={"reduce": "mean"},
                               reward=preset.reward)
    reward = Reward.from_config(str(config))
    other = Item("Sushi Ran is a vegetarian place in Nob Hill.", TASK[0])
    with pytest.raises(ConfigError, match="'inputs' needs the task's inputs"):
        reward([other])
    assert reward.use_inputs(TASK) is reward
    [charged, honest] = reward([other, Item("Sushi Ran is a moderately priced Japanese restaurant in Nob Hill.", TASK[0])])
    assert charged.guards["data_values"]["added"] == ["vegetarian"] and charged.components["guard/data_values"] == 4.0
    assert honest.guards["data_values"]["added"] == [] and honest.components.get("guard/data_values", 0.0) == 0.0
    # the TRL reward function: the training set's sources, then the call TRL makes
    from judge_reward.trainers import JudgeReward

    trl = JudgeReward(reward.judge)
    assert trl.use_inputs(TASK) is trl
    texts = [other.output, "Sushi Ran is a moderately priced Japanese restaurant in Nob Hill."]
    values = trl(prompts=["Describe the data."] * 2, completions=texts, source=[TASK[0]] * 2)
    assert values == pytest.approx([charged.value, honest.value])  # the added value charged as above


def test_probe_reads_the_pairs_file_as_the_task(tmp_path, one_torch_thread):
    """``judge-reward probe`` gives the preset's ``domain: inputs`` the pairs' sources: another act's
    sentence that claims a food this act does not give pays ``added_weight``."""
    from typer.testing import CliRunner
    from tiny_models import save_judge_config

    from judge_reward.cli import app
    from judge_reward.judge import JudgeConfig

    outputs = ["Sushi Ran is a moderately priced Japanese restaurant in Nob Hill .",
               "Ananda Fuara is a cheap vegetarian restaurant in Civic Center ."]
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("\n".join(json.dumps({"source": s, "output": o}) for s, o in zip(TASK, outputs)) + "\n")
    config = save_judge_config(tmp_path, "char", aspects_file="gptscore_data_to_text", gptscore={"reduce": "mean"},
                               reward=JudgeConfig.load("data_to_text").reward)
    out = tmp_path / "probes"
    result = CliRunner().invoke(app, ["probe", "--config", str(config), "--data", str(pairs), "--families", "off_topic",
                                      "--n-boot", "0", "--out", str(out)])
    assert result.exit_code in (0, 1), result.output
    items = json.loads((out / "probes.json").read_text())["items"]
    for item, other in zip(items, reversed(outputs)):
        [probe] = item["probes"]
        assert probe["output"] == other and probe["components"]["guard/data_values"] >= 4.0
        assert item["components"].get("guard/data_values", 0.0) == 0.0


def test_free_needs_words_charges_a_sentence_of_nothing_but_the_datas_values():
    """With ``free_needs_words`` a value left out is free only beside a word of the output's own that
    could say it: "near the river" keeps its allowance, "X is a restaurant" (cut after its first
    values) pays from the first value it leaves out."""
    act = "inform(name='X', eattype=restaurant, area=riverside)"
    cut, honest = "X is a restaurant", "X is a restaurant near the river ."
    assert charge(cut, act)[0] == 0.0 and charge(honest, act)[0] == 0.0  # one of three: free by default
    penalty, measured = charge(cut, act, free_needs_words=True)
    assert measured["own_words"] == 0 and penalty == pytest.approx(4.0 * (1 / 3) / 0.75)
    penalty, measured = charge(honest, act, free_needs_words=True)
    assert measured["own_words"] == 2 and penalty == 0.0  # "near", "river" ("the" is a function word)
    # every value named: nothing to check
    assert "own_words" not in charge("X is a restaurant on the riverside .", act, free_needs_words=True)[1]


def test_the_written_values_example_is_the_preset_with_no_value_free():
    """``examples/data_to_text_written_values.yaml`` differs from ``data_to_text`` only in
    ``missing_free`` and ``free_values`` (both 0): a sentence cut before the act's last value, free
    under the preset, pays for it there; one naming every value pays nothing under either."""
    from pathlib import Path

    from judge_reward.judge import JudgeConfig
    from judge_reward.reward_config import RewardConfig

    preset = JudgeConfig.load("data_to_text")
    example = JudgeConfig.load(str(Path(__file__).parents[1] / "examples" / "data_to_text_written_values.yaml"))
    a, b = RewardConfig.from_dict(preset.reward).guards, RewardConfig.from_dict(example.reward).guards
    assert {**public(a.data_values), "missing_free": 0.0, "free_values": 0} == public(b.data_values)
    assert {n: getattr(a, n) for n in a.enabled if n != "data_values"} == {n: getattr(b, n) for n in b.enabled if n != "data_values"}
    assert (example.backend, example.aspects_file, example.method) == (preset.backend, preset.aspects_file, preset.method)
    act = "inform(name='ananda fuara', food=vegetarian)"
    cut, whole = "Ananda fuara is the restaurant", "Ananda fuara is a vegetarian restaurant ."
    for config, cut_pays in ((a, 0.0), (b, 4.0 * 0.5 / 0.75)):
        guards = GuardsConfig.from_dict({"data_values": {**public(config.data_values), "domain": None}})
        assert apply_guards(guards, cut, SourceStats(act)).total == pytest.approx(cut_pays)
        assert apply_guards(guards, whole, SourceStats(act)).total == 0.0


@pytest.mark.parametrize("text, act, left_out", [
    ("Please confirm that you do not care", "confirm(area=dont_care)", True),   # cut before the slot
    ("Please confirm that you do not care which area", "confirm(area=dont_care)", False),
    ("Please confirm that you do not care about the price range .", "confirm(price_range=dont_care)", False),
    ("So you do not mind whether it allows kids ?", "confirm(kids_allowed=dont_care)", False),  # "allows", "kids"
    ("Ok , you want a restaurant and you do not care", "confirm(kids_allowed=dont_care)", True),
    ("Can I confirm the area is not important to you ?", "confirm(area=dontcare)", False),
    ("May I confirm that the price range", "confirm(price_range=dont_care)", True),  # named, not said open
    ("May I confirm that the price range does not matter ?", "confirm(price_range=dont_care)", False),
])
def test_open_values_ask_for_the_slot_left_open_by_its_name_and_an_open_choice(text, act, left_out):
    """With ``open_values`` a slot the data leaves open is one value to say, by a word of the
    slot's name and a word that leaves the choice open; a text cut before either says nothing
    about it and pays as for any value left out."""
    assert charge(text, act)[0] == 0.0  # off by default: nothing to name
    penalty, measured = charge(text, act, open_values=["dont_care", "dontcare"])
    assert measured["left_open"] == 1 and bool(measured["missing"]) is left_out
    assert penalty == (4.0 if left_out else 0.0)


def test_an_open_value_is_never_a_value_to_say_as_written():
    # left out of unspoken by the user: still a slot to name, not the words "dont care"
    penalty, measured = charge("Any area will do ?", "confirm(area=dont_care)", unspoken=["yes"], open_values=["dont_care"])
    assert measured["values"] == 0 and measured["missing"] == [] and penalty == 0.0


def test_an_open_slot_counts_beside_the_spoken_values():
    act = "inform(name='Sushi Ran', food=japanese, area=dont_care, kids_allowed=dont_care)"
    opened = {"open_values": ["dont_care"]}
    # four values: two spoken, two left open; the two left open unnamed are half, the free share
    assert charge("Sushi Ran serves japanese food .", act, **opened)[1]["missing_share"] == 0.5
    assert charge("Sushi Ran serves japanese food .", act, **opened)[0] == 0.0
    # the name alone leaves three of four
    assert charge("Sushi Ran is a restaurant .", act, **opened)[0] > 0.0
    assert charge("Sushi Ran serves japanese food in any area , kids or not .", act, **opened)[1]["missing"] == []


def test_score_reads_the_scored_file_as_the_task(tmp_path, one_torch_thread):
    """``judge-reward score`` gives the preset's ``domain: inputs`` the file's sources: the line that
    claims another act's food carries the added value and its charge."""
    from typer.testing import CliRunner
    from tiny_models import save_judge_config

    from judge_reward.cli import app
    from judge_reward.judge import JudgeConfig

    lines = [{"source": TASK[0], "output": "Sushi Ran is a vegetarian place in Nob Hill ."},
             {"source": TASK[1], "output": "Ananda Fuara is a cheap vegetarian restaurant in Civic Center ."}]
    src, out = tmp_path / "items.jsonl", tmp_path / "scored.jsonl"
    src.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    config = save_judge_config(tmp_path, "char", aspects_file="gptscore_data_to_text", gptscore={"reduce": "mean"},
                               reward=JudgeConfig.load("data_to_text").reward)
    result = CliRunner().invoke(app, ["score", str(src), "-o", str(out), "--config", str(config)])
    assert result.exit_code == 0, result.output
    claimed, honest = [json.loads(line) for line in out.read_text().splitlines()]
    assert claimed["guards"]["data_values"]["added"] == ["vegetarian"]
    assert claimed["reward_components"]["guard/data_values"] >= 4.0
    assert honest["guards"]["data_values"]["added"] == []
