"""The open-ended preset: outputs with no source. The judge's prompt holds the aspect's instruction and
the output only, the config check refuses every guard that reads a source, and the scoreboard gives
the reward the outputs alone (damage and attack families that only the source exposes reported as not
applicable)."""

import json

import pytest
from typer.testing import CliRunner

from judge_reward import ConfigError, Item, JudgeConfig, load_aspects
from judge_reward.cli import app
from judge_reward.guards import words
from judge_reward.methods.base import Score
from judge_reward.metaeval.datasets import load_references, load_summeval
from judge_reward.prompts.gptscore import build_gptscore_prompt, unconditional_context
from judge_reward.reward import Reward, check_reward
from judge_reward.scoreboard import ScoreboardSettings, validate
from tiny_models import save_judge_config

SOURCE = "The town council voted 7 to 2 on Tuesday to close the old bridge to cars from June."


def test_the_open_ended_prompt_shows_the_judge_no_source():
    fluency = load_aspects("open_ended").get("fluency")
    assert fluency.task == "open_ended"
    for layout in ("instruction_first", "source_first"):
        p = build_gptscore_prompt(fluency, SOURCE, "The bridge is closed.", layout=layout)
        assert p.context == "Write a fluent and grammatical text.\n\nText:" and "council" not in p.context
        assert p.continuation == " The bridge is closed." and p.shared == p.context  # one prefix for every output
        assert unconditional_context(fluency, layout) == p.context
    # demonstrations show their outputs only
    shown = build_gptscore_prompt(fluency, SOURCE, "B.", demonstrations=((SOURCE, "A first text."),))
    assert shown.context == "Write a fluent and grammatical text.\n\nText: A first text.\n\nWrite a fluent and grammatical text.\n\nText:"
    # a summarisation aspect still reads its source
    assert "council" in build_gptscore_prompt(load_aspects("summeval").get("fluency"), SOURCE, "B.").context


def test_the_preset_loads_reads_no_source_and_refuses_guards_that_read_one():
    preset = JudgeConfig.load("open_ended")
    assert preset.aspects_file == "open_ended" and preset.method == "gptscore"
    check_reward(preset)
    from judge_reward.judge import JudgeSections

    reward = Reward(JudgeSections(preset))
    assert reward.aspect_names == ["fluency", "coherence"] and reward.reads_source is False
    assert reward.guards.requiring("source") == [] and reward.guards.enabled == [
        "injection", "repetition", "length", "ending", "word_list"]
    assert all(not getattr(reward.guards, g).requires() for g in reward.guards.enabled)  # needs nothing but the output
    assert Reward(JudgeSections(JudgeConfig.load("default"))).reads_source is True
    as_geval = JudgeConfig.load("open_ended")
    as_geval.method = "geval"  # G-Eval's form shows a source whenever an item has one
    assert Reward(JudgeSections(as_geval)).reads_source is True
    guards = preset.reward["guards"]
    for extra, message in [
        ({"length": {**guards["length"], "max_source_ratio": 0.5}},
         r"reward\.guards\.length\.max_source_ratio: max_source_ratio 0\.5 measures the output against its source"),
        ({"grounding": {"enabled": True}}, r"reward\.guards\.grounding: enabled: true, and grounding compares"),
        ({"copy": {"enabled": True}}, r"reward\.guards\.copy: enabled: true, and copy compares"),
    ]:
        with pytest.raises(ConfigError, match=message) as err:
            check_reward(preset, {"guards": {**guards, **extra}})
        assert "open_ended.yaml" in str(err.value)
    with pytest.raises(ConfigError, match=r"reward\.term: 'information' measures what the output says about its source"):
        check_reward(preset, {"term": "information"})
    preset.gptscore = {**preset.gptscore, "direction": "ref_hypo"}
    with pytest.raises(ConfigError, match=r"gptscore\.direction: .*direction 'ref_hypo' reads a reference"):
        check_reward(preset)


@pytest.mark.slow
def test_the_embedded_judge_scores_an_output_with_no_source(gemma_backend):
    """The real judge: an item without a source gets a reward, the same one whatever source it carries
    (the judge never reads it), and a copy with its words shuffled gets less."""
    from judge_reward import Judge

    judge = Judge(JudgeConfig.load("open_ended"), gemma_backend)
    reward = Reward(judge)
    text = ("The council has closed the old bridge to cars. Drivers must now use the ring road, "
            "which adds about ten minutes to the journey into town.")
    shuffled = " ".join(sorted(text.split(), key=lambda w: (len(w), w)))
    alone, with_source, garbled = reward([Item(text), Item(text, SOURCE), Item(shuffled)])
    assert alone.value is not None and alone.reason is None
    assert set(alone.scores) == {"fluency", "coherence"} and all(s.value < 0 for s in alone.scores.values())
    assert with_source.value == pytest.approx(alone.value, abs=1e-5)
    assert garbled.value < alone.value - 0.5, (alone.value, garbled.value)


class SourceRecordingJudge:
    """A stand-in judge on the open-ended aspects that records the sources it is given; every aspect
    scores a text -(its words)/10."""

    def __init__(self):
        self.aspects = list(load_aspects("open_ended").aspects.values())
        self.config = type("C", (), {"method": "gptscore"})()
        self.sources: set[str] = set()

    def score(self, items, aspects=None, method=None):
        self.sources.update(it.source for it in items)
        return [{a: Score(-len(words(it.output)) / 10) for a in aspects} for it in items]


def test_the_scoreboard_gives_a_source_free_reward_the_outputs_alone(sample_data):
    refs = sample_data / "summeval" / "references.json"
    data, references = load_summeval(sample_data / "summeval" / "summeval.json", refs), load_references(refs)
    judge = SourceRecordingJudge()
    reward = Reward(judge, JudgeConfig.load("open_ended").reward)
    board = validate(reward, data, ScoreboardSettings(damage_per_group=1, probe_groups=2, n_bootstrap=0), "oe",
                     references, progress=False)
    assert judge.sources == {""}  # rated outputs, damaged copies and probes alike
    assert board.meta["source"] == {"withheld": True, "aspects": ["coherence", "fluency"],
                                    "aspects_left_out": ["consistency", "relevance"]}
    assert set(board.agreement["reward"]) == {"coherence", "fluency"}
    assert set(board.agreement["judge"]) == {"coherence", "fluency"}  # the preset's aspects match SummEval's names
    assert board.damage["not_applicable"] == ["change_number", "flip_negation", "swap_names", "append_invented"]
    assert not set(board.damage["families"]) & set(board.damage["not_applicable"])
    assert {"shuffle_words", "duplicate_sentence", "cut_mid_sentence"} <= set(board.damage["families"])
    assert board.attacks["not_applicable"] == ["copy_source", "invented_detail", "off_topic"]
    assert not set(board.attacks["families"]) & set(board.attacks["not_applicable"])
    # the wordings built from the source's words still run, judged without it
    assert board.attacks["families"]["repeat_word"]["variants"]["source_word_x30"]["n"] == 2
    text = board.to_markdown()
    assert "The reward reads no source" in text and "left out: consistency, relevance" in text
    assert "Not applicable without the source" in text and "off_topic" in text
    # SummEval's outputs are summaries: the lead's rewrites stay fair outputs, read alone
    assert "not_applicable_wordings" not in board.attacks
    assert "lead_invisible_characters" in board.attacks["fair"]["near_copy"]["variants"]


def test_read_alone_a_replys_copy_of_the_conversation_is_left_out(sample_data):
    from judge_reward.cli_validate import load_rated

    data, references = load_rated("topical_chat", sample_data)
    reward = Reward(SourceRecordingJudge(), JudgeConfig.load("open_ended").reward)
    board = validate(reward, data, ScoreboardSettings(damage_per_group=1, probe_groups=2, n_bootstrap=0), "oe",
                     references, progress=False)
    # a conversation's opening lines are no fair reply, and without the conversation no copy of it shows
    lead = board.attacks["not_applicable_wordings"]
    assert "lead_invisible_characters" in lead and "rewritten_lead_sentence_then_output" in lead
    variants = {v for table in ("families", "fair") for f in board.attacks[table].values() for v in f["variants"]}
    assert variants and not variants & set(lead)
    assert "Left out without the source" in board.to_markdown()


def test_a_tiny_validate_run_of_the_preset_end_to_end(tmp_path, monkeypatch, sample_data, one_torch_thread):
    """`judge-reward validate` with the preset's reward: section on a tiny judge: agreement with the
    source-free aspects only, damage and attacks run, the guards charge no honest SummEval output."""
    preset = JudgeConfig.load("open_ended")
    monkeypatch.setenv("JUDGE_REWARD_DATA", str(sample_data))
    config = save_judge_config(tmp_path, "char", aspects_file="open_ended", gptscore={"reduce": "mean"},
                               reward=preset.reward)
    out = tmp_path / "board"
    result = CliRunner().invoke(app, ["validate", "--config", str(config), "--data", "summeval", "--groups", "2", "--probe-groups", "2",
                                      "--damage-per-group", "1", "--n-boot", "0", "--out", str(out)])
    assert result.exit_code == 0, result.output
    [board] = json.loads((out / "scoreboard.json").read_text())
    assert board["dataset"] == "summeval" and board["meta"]["source"]["withheld"] is True
    assert set(board["agreement"]["reward"]) == {"coherence", "fluency"}
    assert board["damage"]["outputs"] == 2 and board["damage"]["families"]
    assert board["attacks"]["pairs"] == 2 and "off_topic" not in board["attacks"]["families"]
    assert board["attacks"]["families"]["repeat_output"]["win_rate"] is not None
    charged = {g: row["outputs_charged"] for g, row in board["guard_cost"].items() if not g.startswith("_")}
    assert set(charged) == {"injection", "repetition", "length", "ending", "word_list"}
    assert sum(charged.values()) == 0.0, charged
    assert "The reward reads no source" in result.output


def test_every_task_preset_is_listed_where_the_presets_are_enumerated():
    """docs/presets.md's table, the README's "A preset." step and docs/configs.md's built-in names
    list the same task presets, and each is a shipped judge config with a header."""
    import re
    from pathlib import Path

    from judge_reward.config import resolve_config_path

    root = Path(__file__).resolve().parents[1]
    # The presets table is the page's first table: its header row, separator, then one row per preset.
    page = (root / "docs" / "presets.md").read_text()
    [first_table] = re.findall(r"^\| preset \|.*?\n((?:\|.*\n)+)", page, flags=re.M)[:1]
    table = re.findall(r"^\| `(\w+)` \|", first_table, flags=re.M)
    assert table == ["default", "data_to_text", "dialogue", "open_ended"]
    readme = (root / "README.md").read_text()
    [step] = re.findall(r"\*\*A preset\.\*\*(.*?)\*\*Aspects\.\*\*", readme, flags=re.S)
    configs = (root / "docs" / "configs.md").read_text()
    for name in table:
        assert f"`{name}`" in step and f"`{name}`" in configs, name
        path = resolve_config_path(name, "judges")
        assert path.read_text().startswith("# ") and JudgeConfig.load(name).reward, name
