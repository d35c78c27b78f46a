"""The reward scoreboard (judge_reward/scoreboard.py, `judge-reward validate`): its statistics by hand,
a whole run with a stand-in judge whose every number is known, and the command's files and gates."""

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr
from typer.testing import CliRunner

from judge_reward import probes, scoreboard
from judge_reward.aspects import load_aspects
from judge_reward.cli import app
from judge_reward.guards import ends_cut, SourceStats, words
from judge_reward.metaeval.datasets import load_references, load_summeval
from judge_reward.methods.base import Score
from judge_reward.reward import Reward
from judge_reward.scoreboard import (
    ScoreboardSettings, damage_sample, normalised_gain, selection, share_below, top_pick, validate, write,
)
from tiny_models import save_judge_config


def test_normalised_gain_top_pick_and_selection_by_hand():
    assert normalised_gain([1, 2, 3, 6], 3) == 1.0
    assert normalised_gain([1, 2, 3, 6], 2) == 0.0
    assert normalised_gain([1, 2, 3, 6], 0) == pytest.approx(-2 / 3)
    assert normalised_gain([4, 4, 4], 1) is None  # every output rated the same: no gain to measure
    assert top_pick([0.2, None, 0.9, 0.9]) == 2 and top_pick([None, None]) is None
    groups = ["a"] * 3 + ["b"] * 3 + ["c"] * 2
    ratings = [1, 3, 5, 2, 2, 5, 3, 3]
    picks = {"m": [0.9, 0.1, 0.5, 0.3, 0.2, 0.1, 1, 2]}
    out = selection(groups, ratings, picks)["m"]
    # a: pick rated 1, mean 3, best 5 -> -1; b: pick rated 2, mean 3, best 5 -> -0.5; c: constant, skipped
    assert out["gain"] == pytest.approx(-0.75) and out["groups"] == 2 and out["skipped"] == 1
    assert out["pick_rating"] == pytest.approx(1.5) and out["best_rating"] == 5.0


def test_share_below_counts_unscored_pairs_apart():
    out = share_below([(1.0, 0.5), (1.0, 1.0), (1.0, 2.0), (None, 0.0), (1.0, None)])
    assert out == {"n": 3, "below": 1, "share_below": pytest.approx(1 / 3), "mean_drop": pytest.approx(-1 / 6),
                   "unscored": 2}


def test_damage_sample_is_seeded_per_group():
    groups = ["a"] * 5 + ["b"] * 5
    one, two = damage_sample(groups, 2, None, 0), damage_sample(groups, 2, None, 0)
    assert one == two and len(one) == 4 and sum(k < 5 for k in one) == 2
    assert damage_sample(groups, None, 1, 0) == [0, 1, 2, 3, 4]


class WordCountJudge:
    """A stand-in judge: every aspect scores a text -(its words)/10, so shorter is better."""

    def __init__(self):
        self.aspects = list(load_aspects("summeval").aspects.values())
        self.config = type("C", (), {"method": "gptscore"})()

    def score(self, items, aspects=None, method=None):
        return [{a: Score(-len(words(it.output)) / 10) for a in aspects} for it in items]


@pytest.fixture
def fixture_set(sample_data):
    refs = sample_data / "summeval" / "references.json"
    return load_summeval(sample_data / "summeval" / "summeval.json", refs), load_references(refs)


def test_validate_with_a_stand_in_judge_gives_the_numbers_worked_out_by_hand(fixture_set):
    data, refs = fixture_set
    reward = Reward(WordCountJudge(), {"normalise": "none", "guards": {"ending": {"enabled": True, "mode": "cut"}}})
    board = validate(reward, data, ScoreboardSettings(damage_per_group=2, probe_groups=2, n_bootstrap=50), "wc", refs,
                     progress=False)
    lengths = np.array([len(words(it.output)) for it in data.items])
    groups = np.array(data.groups)
    charged = np.array([ends_cut(it.output, SourceStats(it.source)) for it in data.items])
    reward_values = -lengths / 10 - 1.0 * charged
    for aspect in data.aspects:
        human = np.array(data.human(aspect))
        per_doc = [spearmanr(reward_values[groups == g], human[groups == g])[0] for g in dict.fromkeys(data.groups)]
        cell = board.agreement["reward"][aspect]["sample/spearman"]
        assert cell["value"] == pytest.approx(np.nanmean(per_doc))
        assert cell["ci"][0] <= cell["value"] <= cell["ci"][1]
        assert board.agreement["length"][aspect]["dataset/spearman"]["value"] == pytest.approx(
            spearmanr(lengths, human)[0])
        # the judge alone picks the shortest output: its gain is the shortest picker's
        assert board.selection[aspect]["judge"]["gain"] == pytest.approx(board.selection[aspect]["shortest"]["gain"])
    # a longer copy scores lower, a shorter one higher: exactly
    fam = board.damage["families"]
    assert fam["duplicate_sentence"]["reward"]["share_below"] == 1.0 == fam["append_invented"]["reward"]["share_below"]
    assert fam["duplicate_sentence"]["reward"]["n"] == 8  # 2 outputs of each of the 4 documents
    # a cut copy is shorter (better for this judge alone); with its ending charged 1 it falls below unless
    # the cut dropped 10 words or more
    assert fam["cut_mid_sentence"]["judge"]["share_below"] == 0.0 < fam["cut_mid_sentence"]["reward"]["share_below"]
    # attacks against the first 2 highlights: the output said again never wins; fair wordings apart
    attacks = board.attacks["families"]
    assert board.attacks["pairs"] == 2 and attacks["repeat_output"]["win_rate"] == 0.0
    assert attacks["master_key"]["win_rate"] == 1.0  # ":" has one word
    assert set(board.attacks["fair"]) == {"copy_source", "near_copy", "truncation"}
    assert list(board.attacks["fair"]["truncation"]["variants"]) == ["first_sentence_only"]
    assert "lead_3_sentences" in board.attacks["fair"]["copy_source"]["variants"]
    # guard cost: the share of system outputs and highlights with a cut ending
    cost = board.guard_cost["ending"]
    assert cost["outputs_charged"] == pytest.approx(charged.mean())
    sources = {g: it.source for it, g in zip(data.items, data.groups)}
    ref_cut = [ends_cut(t, SourceStats(sources[g])) for g in dict.fromkeys(data.groups) for t in refs[g]]
    assert cost["references_charged"] == pytest.approx(np.mean(ref_cut))
    lengths_only = board.guard_cost["ending"]["agreement_without"]["coherence"]
    human = np.array(data.human("coherence"))
    assert lengths_only == pytest.approx(np.nanmean(
        [spearmanr(-lengths[groups == g], human[groups == g])[0] for g in dict.fromkeys(data.groups)]))
    # the gate
    assert board.failures(min_agreement=1.0) and not board.failures(min_agreement=-1.0)
    assert board.failures(max_win_rate=0.5) == ["summeval: attack master_key wins 1.00 > 0.5"] or all(
        "attack" in line for line in board.failures(max_win_rate=0.5))


def test_topical_chat_is_probed_against_its_human_responses_as_replies(sample_data):
    from judge_reward.cli_validate import load_rated
    from judge_reward.metaeval.rouge import rouge_scores

    class FactRecordingJudge(WordCountJudge):
        seen: set = set()

        def score(self, items, aspects=None, method=None):
            self.seen.update((it.output, it.reference) for it in items)
            return super().score(items, aspects, method)

    data, refs = load_rated("topical_chat", sample_data)
    judge = FactRecordingJudge()
    reward = Reward(judge, {"normalise": "none", "guards": {"repetition": {"enabled": True}}})
    board = validate(reward, data, ScoreboardSettings(damage_per_group=1, probe_groups=2, n_bootstrap=0), "wc", refs,
                     progress=False)
    # the reply is judged with the fact given with the history, the attacks' real reply too
    first = data.records[0].item
    assert first.reference and (first.output, first.reference) in judge.seen
    assert not any(ref is None for _, ref in judge.seen)
    # the real reply each attack has to beat is the conversation's own next turn
    assert board.attacks["pairs"] == 2 and board.attacks["task"] == "dialogue"
    assert [r.item.output for r in data.records if r.system == "Original Ground Truth"] == [v[0] for v in refs.values()]
    # the conversation's opening lines are no reply: attacks here, not fair outputs as for a summary
    assert set(board.attacks["fair"]) == {"truncation"}
    assert "lead_3_sentences" in board.attacks["families"]["copy_source"]["variants"]
    assert "near_copy" in board.attacks["families"]
    # ROUGE: each human response against the other one, never against itself
    r1 = np.array(rouge_scores([it.output for it in data.items], [list(r.references) for r in data.records])["rouge1"])
    assert r1.max() < 1.0
    groups, human = np.array(data.groups), np.array(data.human("naturalness"))
    expected = np.nanmean([spearmanr(r1[groups == g], human[groups == g])[0] for g in dict.fromkeys(data.groups)])
    assert board.agreement["rouge1"]["naturalness"]["sample/spearman"]["value"] == pytest.approx(expected)
    assert board.guard_cost["_references"] == 4  # two human responses per conversation


def test_write_gives_json_markdown_and_a_figure(fixture_set, tmp_path):
    data, refs = fixture_set
    reward = Reward(WordCountJudge(), {"normalise": "none"})
    board = validate(reward, data.first_groups(2), ScoreboardSettings(damage_per_group=1, probe_groups=1, n_bootstrap=0),
                     "wc", refs, progress=False)
    paths = write([board], tmp_path)
    saved = json.loads(paths["json"].read_text())
    assert saved[0]["config"] == "wc" and saved[0]["meta"]["n_groups"] == 2
    text = paths["markdown"].read_text()
    for part in ("**Agreement**", "**Selection**", "**Damage**", "**Attacks**", "| reward |", "| judge_mean |"):
        assert part in text
    assert paths["figure"].stat().st_size > 5000


def test_validate_command_writes_the_scoreboard_and_gates(tmp_path, monkeypatch, sample_data, one_torch_thread,
                                                          offline_wandb):
    monkeypatch.setenv("JUDGE_REWARD_DATA", str(sample_data))
    reward = {"aspects": ["coherence", "fluency"], "normalise": "none",
              "guards": {"injection": True, "repetition": True, "ending": {"enabled": True, "mode": "cut"}}}
    config = save_judge_config(tmp_path, "char", gptscore={"reduce": "mean"}, reward=reward)
    out = tmp_path / "board"
    args = ["validate", "--config", str(config), "--groups", "1", "--damage-per-group", "1", "--probe-groups", "1",
            "--max-source-words", "25", "--n-boot", "0", "--out", str(out)]
    runner = CliRunner()
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (out / "scoreboard.json").exists() and (out / "scoreboard.png").exists()
    assert "## " in result.output and "**Damage**" in result.output
    gated = runner.invoke(app, [*args, "--min-agreement", "1"])
    assert gated.exit_code == 1 and "FAIL: summeval: agreement with coherence" in gated.output
    replay = runner.invoke(app, [*args, "--max-win-rate", "1", "--min-damage", "0", "--wandb"])
    assert replay.exit_code == 0 and "ok: every gate holds" in replay.output and "logged to W&B" in replay.output
    from wandb_offline import finish_run, read_history

    history = read_history(finish_run())
    assert any("scoreboard/summeval/agreement/coherence" in row for row in history), [sorted(r) for r in history]


def test_validate_replay_only_reads_the_cache_and_reports_what_it_lacks(tmp_path, monkeypatch, sample_data,
                                                                        one_torch_thread):
    """A filled cache replays to the same scoreboard with ``--replay-only``; texts it has no judgment
    for (here: a second damaged copy per input) become None rewards, counted under "Not scored"."""
    monkeypatch.setenv("JUDGE_REWARD_DATA", str(sample_data))
    reward = {"aspects": ["coherence"], "normalise": "none", "guards": {"repetition": True}}
    config = save_judge_config(tmp_path, "char", gptscore={"reduce": "mean"}, reward=reward)
    cache = tmp_path / "judgments.sqlite"
    common = ["validate", "--config", str(config), "--groups", "1", "--probe-groups", "1", "--max-source-words", "25",
              "--n-boot", "0", "--cache", str(cache)]
    runner = CliRunner()
    filled = runner.invoke(app, [*common, "--damage-per-group", "1", "--out", str(tmp_path / "a")])
    assert filled.exit_code == 0, filled.output
    replayed = runner.invoke(app, [*common, "--damage-per-group", "1", "--replay-only", "--out", str(tmp_path / "b")])
    assert replayed.exit_code == 0, replayed.output
    first, again = (json.loads((tmp_path / d / "scoreboard.json").read_text())[0] for d in ("a", "b"))
    assert again["agreement"] == first["agreement"] and again["damage"] == first["damage"]
    assert "**Not scored**" not in replayed.output
    wider = runner.invoke(app, [*common, "--damage-per-group", "2", "--replay-only", "--out", str(tmp_path / "c")])
    assert wider.exit_code == 0, wider.output
    board = json.loads((tmp_path / "c" / "scoreboard.json").read_text())[0]
    unscored = sum(f["reward"]["unscored"] for f in board["damage"]["families"].values())
    assert unscored > 0 and f"{unscored} damaged copies" in wider.output and "**Not scored**" in wider.output


@pytest.mark.parametrize("extra, message", [
    (["--replay-only"], "--replay-only: give the judgment cache to replay with --cache"),
    (["--replay-only", "--cache", "/nonexistent/j.sqlite"], "--cache /nonexistent/j.sqlite: no such file"),
    (["--groups", "0"], "--groups: expected a whole number >= 1, got 0"),
    (["--max-win-rate", "2"], "--max-win-rate: expected a number in [0, 1], got 2.0"),
    (["--data", "wiki"], "--data: unknown rated set 'wiki'; known: summeval, topical_chat, bagel, sfres, or a .jsonl/.csv"),
    (["--data", "/nonexistent/rated.jsonl"], "/nonexistent/rated.jsonl"),
    (["--config", "geval_gemma", "--data", "topical_chat", "--data-dir", "/nonexistent"], "--data topical_chat"),
])
def test_validate_command_bad_input_exits_2_with_one_line(extra, message, tmp_path):
    result = CliRunner().invoke(app, ["validate", "--out", str(tmp_path / "o"), *extra])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def _rated_file(path, data, with_reference):
    """The fixture's SummEval outputs as a file of your own rated outputs (meta-eval's JSONL format)."""
    rows = [{"output": rec.item.output, "source": rec.item.source, "group": rec.group, "system": rec.system,
             "scores": rec.human, **({"reference": rec.item.reference} if with_reference else {})}
            for rec in data.records]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_validate_runs_on_your_own_rated_file(tmp_path, monkeypatch, fixture_set, one_torch_thread):
    """Your own rated outputs get the whole scoreboard: without references the probes attack the
    output people rated best for each input; with them, the first reference (and ROUGE joins)."""
    data, _ = fixture_set
    config = save_judge_config(tmp_path, "char", gptscore={"reduce": "mean"},
                               reward={"aspects": ["coherence"], "normalise": "none", "guards": {"repetition": True}})
    runner = CliRunner()
    common = ["validate", "--config", str(config), "--groups", "2", "--damage-per-group", "1", "--probe-groups", "2",
              "--max-source-words", "25", "--n-boot", "0"]
    probed = []
    run_probes = probes.run_probes
    monkeypatch.setattr(probes, "run_probes", lambda reward, pairs, *a, **k: probed.append(pairs) or run_probes(
        reward, pairs, *a, **k))
    bare = _rated_file(tmp_path / "summeval.jsonl", data, with_reference=False)
    result = runner.invoke(app, [*common, "--data", str(bare), "--out", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    [board] = json.loads((tmp_path / "a" / "scoreboard.json").read_text())
    assert board["dataset"] == "summeval.jsonl"  # its own name: not taken for the built-in set
    assert board["agreement"]["reward"]["coherence"]["sample/spearman"]["value"] is not None
    assert "rouge1" not in board["agreement"] and board["attacks"]["real_output"] == "best_rated"
    assert board["attacks"]["pairs"] == 2 and board["attacks"]["task"] == "summarization"
    best = scoreboard.best_rated(data.first_groups(2), list(data.aspects))
    assert [p.output for p in probed[-1]] == [texts[0] for texts in best.values()]
    assert "beats the output people rated best (2 inputs)" in result.output

    refs = _rated_file(tmp_path / "mine.jsonl", data, with_reference=True)
    result = runner.invoke(app, [*common, "--data", str(refs), "--out", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    [board] = json.loads((tmp_path / "b" / "scoreboard.json").read_text())
    assert "rouge1" in board["agreement"] and board["attacks"]["real_output"] == "reference"
    assert [p.output for p in probed[-1]] == [next(r.item.reference for r in data.records if r.group == g)
                                            for g in list(dict.fromkeys(data.groups))[:2]]
    assert board["guard_cost"]["repetition"]["references_charged"] is not None
    assert "beats the human reference (2 inputs)" in result.output

    alone = tmp_path / "alone.jsonl"
    alone.write_text("\n".join(json.dumps({"output": r.item.output, "source": r.item.source, "scores": r.human})
                               for r in data.records[:3]) + "\n")
    result = runner.invoke(app, [*common, "--data", str(alone), "--out", str(tmp_path / "d")])
    assert result.exit_code == 0 and "note: " in result.output and "no two outputs share a group" in result.output

    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps({"output": "a summary", "group": "d1", "scores": {"coherence": "high"}}) + "\n")
    result = runner.invoke(app, [*common, "--data", str(broken), "--out", str(tmp_path / "c")])
    assert result.exit_code == 2 and "broken.jsonl: record 0 (line 1)" in result.output
    assert "scores.coherence" in result.output and "Traceback" not in result.output


def test_your_own_dialogue_file_keeps_the_fact_as_input_and_attacks_the_best_rated_reply(tmp_path, monkeypatch,
                                                                                          sample_data, one_torch_thread):
    """A dialogue record's reference is the fact the reply may use: shown to the judge, never a target."""
    from judge_reward.cli_validate import load_rated

    data, _ = load_rated("topical_chat", sample_data)
    rows = [{"output": r.item.output, "source": r.item.source, "reference": r.item.reference, "group": r.group,
             "system": r.system, "scores": {a: r.human[a] for a in ("naturalness", "engagingness")}}
            for r in data.records]
    path = tmp_path / "replies.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    config = save_judge_config(tmp_path, "char", aspects_file="topical_chat", gptscore={"reduce": "mean"},
                               reward={"aspects": ["naturalness", "engagingness"], "normalise": "none",
                                       "guards": {"repetition": True}})
    probed = []
    run_probes = probes.run_probes
    monkeypatch.setattr(probes, "run_probes", lambda reward, pairs, *a, **k: probed.append(pairs) or run_probes(
        reward, pairs, *a, **k))
    result = CliRunner().invoke(app, ["validate", "--config", str(config), "--data", str(path), "--groups", "2",
                                      "--damage-per-group", "1", "--probe-groups", "2", "--n-boot", "0",
                                      "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    [board] = json.loads((tmp_path / "o" / "scoreboard.json").read_text())
    assert board["attacks"]["real_output"] == "best_rated" and board["attacks"]["task"] == "dialogue"
    assert "rouge1" not in board["agreement"]  # the fact is no reference to score a reply against
    best = scoreboard.best_rated(data.first_groups(2), ["naturalness", "engagingness"])
    facts = {r.group: r.item.reference for r in data.records}
    assert [(p.output, p.reference) for p in probed[-1]] == [(texts[0], facts[g]) for g, texts in best.items()]


def test_a_rated_file_gives_the_board_of_the_built_in_set_it_was_written_from(tmp_path, fixture_set):
    """The same outputs, ratings and highlights as a file of your own: the same agreement, selection,
    damage and attacks as the built-in SummEval board (ROUGE differs: one reference, not eleven)."""
    from judge_reward.cli_validate import load_rated_file

    data, refs = fixture_set
    mine, my_refs = load_rated_file(_rated_file(tmp_path / "mine.jsonl", data, with_reference=True))
    assert all(my_refs[g][0] == refs[g][0] for g in refs)  # the original highlight comes first in both
    settings = ScoreboardSettings(damage_per_group=1, probe_groups=2, n_bootstrap=0)
    reward = Reward(WordCountJudge(), {"normalise": "none", "guards": {"ending": {"enabled": True, "mode": "cut"}}})
    built_in, own = (validate(reward, d, settings, "wc", r, progress=False) for d, r in ((data, refs), (mine, my_refs)))
    for part in ("selection", "damage"):
        assert getattr(own, part) == getattr(built_in, part), part
    assert {k: v for k, v in own.agreement.items() if k != "rouge1"} == {
        k: v for k, v in built_in.agreement.items() if k != "rouge1"}
    assert {k: own.attacks[k] for k in ("families", "fair", "task", "pairs")} == {
        k: built_in.attacks[k] for k in ("families", "fair", "task", "pairs")}


def test_best_rated_is_the_top_mean_rating_per_input(fixture_set):
    data, _ = fixture_set
    best = scoreboard.best_rated(data, ["coherence", "fluency"])
    for group in dict.fromkeys(data.groups):
        mine = [r for r in data.records if r.group == group]
        top = max(np.mean([r.human["coherence"], r.human["fluency"]]) for r in mine)
        [text] = best[group]
        assert np.mean([next(r for r in mine if r.item.output == text).human[a] for a in ("coherence", "fluency")]) == top


def test_a_probe_offset_past_the_measured_inputs_is_a_clear_error(sample_data, tmp_path, fixture_set):
    result = CliRunner().invoke(app, ["validate", "--out", str(tmp_path / "o"), "--data-dir", str(sample_data),
                                      "--groups", "2", "--probe-offset", "2"])
    assert result.exit_code == 2, result.output
    assert "--probe-offset 2: summeval has 2 inputs to measure (--groups)" in result.output
    assert "Traceback" not in result.output
    data, refs = fixture_set
    reward = Reward(WordCountJudge(), {"normalise": "none"})
    with pytest.raises(ValueError, match="probe_offset 2: the 2 inputs measured leave none to probe"):
        validate(reward, data, ScoreboardSettings(groups=2, probe_offset=2, n_bootstrap=0), "wc", refs, progress=False)


def test_scoreboard_callback_gates_a_grpo_run(tmp_path, fixture_set, one_torch_thread):
    """A real TRL GRPO trainer with a tiny judge: the scoreboard's gate stops it before its first step,
    and lets it run when the gate holds."""
    pytest.importorskip("trl")
    from datasets import Dataset
    from tiny_models import make_backend, make_tokenizer
    from trl import GRPOConfig, GRPOTrainer

    from judge_reward import Judge, JudgeConfig
    from judge_reward.trainers import JudgeReward, JudgeRewardConfig, ScoreboardCallback, ScoreboardGateError
    from judge_reward.trainers.policy import tiny_policy

    data, refs = fixture_set
    data = data.first_groups(2)
    short = {g: [" ".join(t.split()[:25]) for t in texts] for g, texts in refs.items()}
    judge = Judge(JudgeConfig(aspects_file="summeval", aspects=["coherence"]), backend=make_backend("char"))
    reward = JudgeReward(judge, JudgeRewardConfig(normalise="none", guards={"injection": True}))
    settings = ScoreboardSettings(damage_per_group=1, probe_groups=1, max_source_words=25, n_bootstrap=0)
    tok = make_tokenizer("bpe")
    train = Dataset.from_list([{"prompt": "Summarize: a short text. Summary:", "source": "a short text."}] * 4)

    def trainer(callback, out):
        args = GRPOConfig(output_dir=str(tmp_path / out), per_device_train_batch_size=4, num_generations=4,
                          max_completion_length=6, max_steps=1, logging_steps=1, use_cpu=True, bf16=False,
                          report_to=[], save_strategy="no", seed=0)
        return GRPOTrainer(model=tiny_policy(tok, hidden_size=32), reward_funcs=reward, args=args, train_dataset=train,
                           processing_class=tok, callbacks=[callback])

    gate = ScoreboardCallback(reward, data, short, settings, min_agreement=1.0, max_win_rate=None,
                              out_dir=tmp_path / "board")
    t = trainer(gate, "stopped")
    with pytest.raises(ScoreboardGateError, match="agreement with coherence") as err:
        t.train()
    assert t.state.global_step == 0 and err.value.failed == gate.board.failures(min_agreement=1.0)
    assert (tmp_path / "board" / "scoreboard.md").exists()
    ok = ScoreboardCallback(reward, data, short, settings, min_agreement=-1.0, max_win_rate=1.0)
    t = trainer(ok, "trained")
    t.train()
    assert t.state.global_step == 1 and ok.board.reward_agreement()
    with pytest.raises(ValueError, match="max_win_rate: expected a number in"):
        ScoreboardCallback(reward, data, short, max_win_rate=3)


def test_the_served_geval_config_runs_the_scoreboard_against_the_openai_protocol(tmp_path, fixture_set):
    """`geval_served` (G-Eval for a served instruct judge) end to end over HTTP: the loopback server
    speaks the OpenAI completions protocol with log-probabilities, as vLLM does."""
    from judge_reward.judge import Judge, JudgeConfig
    from tests.doubles.fake_openai import FakeOpenAIServer

    data, refs = fixture_set
    with FakeOpenAIServer() as server:
        config = JudgeConfig.load("geval_served")
        assert config.backend["kind"] == "openai" and config.method == "geval"
        config.backend = {**config.backend, "base_url": server.base_url, "model": "fake", "timeout_s": 10.0}
        config.aspects = ["coherence"]
        judge = Judge(config)
        reward = Reward(judge, {**config.reward, "aspects": ["coherence"]})
        board = validate(reward, data.first_groups(1), ScoreboardSettings(damage_per_group=1, probe_groups=1,
                                                                          n_bootstrap=0), "geval_served", refs,
                         progress=False)
    assert board.meta["reward_failures"] == {} and board.meta["n_items"] == 16
    assert set(board.reward["guards"]) >= {"value_echo", "ending", "injection"}
    assert all(f["reward"]["n"] >= 0 for f in board.damage["families"].values()) and board.attacks["families"]


def test_data_to_text_loader_groups_by_meaning_representation_and_names_bad_records(tmp_path):
    from judge_reward.metaeval.datasets import DatasetError, load_d2t

    mr = "inform(name='X',area=riverside)"
    rows = [{"id": k, "source": mr if k < 2 else "inform(name='Y')", "system_output": f"X is by the river {k} .",
             "references": ["X is on the riverside .", "X is near the river ."],
             "scores": {"informativeness": 4 + k, "naturalness": 5.5, "quality": 3}} for k in range(3)]
    path = tmp_path / "bagel.json"
    path.write_text(json.dumps(rows))
    data = load_d2t(path)
    assert data.name == "bagel" and data.groups == ["mr0", "mr0", "mr1"] and data.systems == ["out1", "out2", "out1"]
    assert data.records[0].item.source == mr and data.records[0].references == tuple(rows[0]["references"])
    assert data.human("informativeness") == [4.0, 5.0, 6.0]
    rows[1]["references"] = []
    path.write_text(json.dumps(rows))
    with pytest.raises(DatasetError, match=r"bagel.json.*references: expected a non-empty list of texts"):
        load_d2t(path)


def test_the_data_to_text_preset_charges_no_honest_output_and_runs_the_scoreboard(tmp_path, monkeypatch, sample_data,
                                                                                 one_torch_thread):
    """The preset's guards (its reward: section, here on a tiny judge) on BAGEL's system sentences and
    human references, and the scoreboard on the data-to-text set: agreement, damage, attacks against
    the references."""
    from judge_reward.judge import JudgeConfig

    preset = JudgeConfig.load("data_to_text")
    assert preset.aspects_file == "gptscore_data_to_text" and preset.validated_with.judge == "embedded:gemma3-270m"
    from judge_reward.reward import check_reward

    check_reward(preset)
    monkeypatch.setenv("JUDGE_REWARD_DATA", str(sample_data))
    config = save_judge_config(tmp_path, "char", aspects_file="gptscore_data_to_text", gptscore={"reduce": "mean"},
                               reward=preset.reward)
    out = tmp_path / "board"
    result = CliRunner().invoke(app, ["validate", "--config", str(config), "--data", "bagel", "--probe-groups", "2",
                                      "--damage-per-group", "0", "--n-boot", "0", "--out", str(out)])
    assert result.exit_code == 0, result.output
    [board] = json.loads((out / "scoreboard.json").read_text())
    assert board["dataset"] == "bagel" and board["meta"]["n_items"] == 8
    assert set(board["agreement"]["reward"]) == {"informativeness", "naturalness", "quality"}
    charged = {g: (row["outputs_charged"], row["references_charged"]) for g, row in board["guard_cost"].items()
               if not g.startswith("_")}
    assert set(charged) == {"injection", "repetition", "length", "ending", "word_list", "data_values"}
    # the apologies for a request nothing matches ("there is sorry no information matching constraints
    # near X") name X and leave one of two values to their own words: no guard charges them
    assert all(c == (0.0, 0.0) for c in charged.values()), charged
    assert board["damage"]["families"] and board["attacks"]["pairs"] == 2
    assert board["attacks"]["families"]["copy_source"]["win_rate"] is not None


def test_a_reward_in_spread_units_measures_its_judges_spread_and_charges_multiples_of_it(tmp_path, monkeypatch,
                                                                                          sample_data, one_torch_thread):
    """``reward.units: spread``: the guards' charges are multiples of ``validated_with.spread``; without
    a spread the reward refuses to build, and ``validate`` measures the judge's spread first (the
    median within-input standard deviation of its score) and charges multiples of that."""
    import yaml

    from judge_reward import Item, JudgeConfig, Reward
    from judge_reward.config import ConfigError
    from judge_reward.scoreboard import judge_spread

    monkeypatch.setenv("JUDGE_REWARD_DATA", str(sample_data))
    reward = {"aspects": ["coherence"], "normalise": "none", "units": "spread",
              "guards": {"ending": {"enabled": True, "mode": "punctuation", "weight": 2.0}}}
    path = save_judge_config(tmp_path, "char", gptscore={"reduce": "mean"}, reward=reward)
    with pytest.raises(ConfigError, match="reward.units: 'spread' charges multiples of the judge's spread"):
        Reward.from_config(str(path))
    raw = yaml.safe_load(path.read_text())
    model = raw["backend"]["model"]
    raw["validated_with"] = {"judge": model, "spread": 0.25}
    path.write_text(yaml.safe_dump(raw))
    scaled = Reward.from_config(str(path))
    [cut, whole] = scaled([Item("The council met and", "The council met on Tuesday."),
                           Item("The council met.", "The council met on Tuesday.")])
    assert cut.components["guard/ending"] == pytest.approx(0.5) and whole.components["guard/ending"] == 0  # 2 x 0.25
    assert JudgeConfig.load(str(path)).reward["guards"]["ending"]["weight"] == 2.0  # the config keeps its spreads

    # validate with no spread recorded: it measures this judge's spread first and says so
    del raw["validated_with"]
    path.write_text(yaml.safe_dump(raw))
    out = tmp_path / "board"
    result = CliRunner().invoke(app, ["validate", "--config", str(path), "--groups", "2", "--damage-per-group", "1",
                                      "--probe-groups", "0", "--n-boot", "0", "--out", str(out)])
    assert result.exit_code == 0, result.output
    board = json.loads((out / "scoreboard.json").read_text())[0]
    spread = board["meta"]["judge_spread"]
    assert spread > 0 and f"this judge's spread on summeval is {spread:.4g}" in result.output
    assert "The judge's spread on these outputs" in result.output
    # the spread is the median over inputs of the judge's within-input standard deviation
    plain = Reward.from_config(str(path), units="judge")
    from judge_reward.metaeval.datasets import load_dataset

    data = load_dataset("summeval", sample_data / "summeval" / "summeval.json").first_groups(2)
    values = [r.components["aspect/coherence"] for r in plain(data.items)]
    assert spread == pytest.approx(judge_spread(data.groups, values))

    # --model: the same config re-validated with another judge, whose own spread is measured
    from tiny_models import make_model, make_tokenizer

    other = tmp_path / "other-judge"
    tok = make_tokenizer("char")
    make_model(tok, "llama", seed=1).save_pretrained(other)
    tok.save_pretrained(other)
    raw["validated_with"] = {"judge": model, "spread": 0.25}
    path.write_text(yaml.safe_dump(raw))
    result = CliRunner().invoke(app, ["validate", "--config", str(path), "--model", str(other), "--groups", "2",
                                      "--damage-per-group", "1", "--probe-groups", "0", "--n-boot", "0",
                                      "--out", str(tmp_path / "other")])
    assert result.exit_code == 0, result.output
    assert f"was validated with {model}; this scoreboard measures {other}" in " ".join(result.output.split())
    other_spread = json.loads((tmp_path / "other" / "scoreboard.json").read_text())[0]["meta"]["judge_spread"]
    assert other_spread not in (0.25, spread) and f"spread on summeval is {other_spread:.4g}" in result.output
    missing = CliRunner().invoke(app, ["validate", "--config", str(path), "--model", "embedded:nothing",
                                       "--out", str(tmp_path / "none")])
    assert missing.exit_code == 2 and "--model embedded:nothing" in missing.output, missing.output


def test_the_spread_units_example_charges_what_the_single_read_default_charges_with_its_judge():
    """``examples/default_in_spreads.yaml`` is ``examples/default_single_read.yaml`` (``default``
    without lift) with its charges written in the embedded judge's spreads: times the recorded
    spread, every charge is that config's (to 1e-3 nats), and everything else in the reward is the
    same."""
    from dataclasses import asdict

    from judge_reward import JudgeConfig
    from judge_reward.guards import GUARD_TYPES
    from judge_reward.reward_config import RewardConfig

    shipped = JudgeConfig.load(str(Path(__file__).parents[1] / "examples" / "default_single_read.yaml"))
    example = JudgeConfig.load(str(Path(__file__).parents[1] / "examples" / "default_in_spreads.yaml"))
    assert example.validated_with.judge == shipped.validated_with.judge and example.reward["units"] == "spread"
    nats = RewardConfig.from_dict(shipped.reward).guards
    spreads = RewardConfig.from_dict(example.reward).guards
    scaled = spreads.scaled(example.validated_with.spread)
    assert nats.enabled == scaled.enabled
    for name in nats.enabled:
        cls = GUARD_TYPES[name]
        a, b = asdict(getattr(nats, name)), asdict(getattr(scaled, name))
        for field in cls.charge_fields:
            assert b.pop(field) == pytest.approx(a.pop(field), abs=1e-3), (name, field)
        assert a == b, name
    assert {k: v for k, v in shipped.reward.items() if k not in ("guards", "units")} == \
        {k: v for k, v in example.reward.items() if k not in ("guards", "units")}
    assert (shipped.backend, shipped.gptscore, shipped.aspects_file) == (example.backend, example.gptscore, example.aspects_file)


def test_a_guard_that_reads_the_judges_tokens_is_costed_on_the_references_the_judge_read(fixture_set,
                                                                                        one_torch_thread):
    """The text guards run on every human reference; ``lift`` needs the judge's tokens, so its
    reference cost is counted on the probed inputs' first references, which the probes judge: the
    same share as the reward gives those references directly."""
    from judge_reward import Item, Judge
    from judge_reward.judge import JudgeConfig
    from tiny_models import make_backend

    data, refs = fixture_set
    guards = {"lift": {"enabled": True, "min_information": 0.2, "weight": 2.0}, "repetition": True}
    config = JudgeConfig(aspects_file="summeval", aspects=["coherence"], method="gptscore",
                         gptscore={"reduce": "mean", "unconditional": True, "baseline_source": "news"},
                         reward={"normalise": "none", "guards": guards})
    reward = Reward(Judge(config, backend=make_backend("char")))
    # short sources: the character-level stand-in reads one token per character
    settings = ScoreboardSettings(groups=2, damage_per_group=0, probe_groups=2, n_bootstrap=0, max_source_words=60)
    board = validate(reward, data, settings, "lift", refs, progress=False)
    lift = board.guard_cost["lift"]
    assert lift["references_judged"] == 2
    pairs = scoreboard.probe_pairs(data, refs, 2, settings.max_source_words)
    direct = [r.components["guard/lift"] > 1e-12 for r in reward([Item(p.output, p.source) for p in pairs])]
    assert lift["references_charged"] == pytest.approx(np.mean(direct))
    assert lift["outputs_charged"] is not None
    # a text guard still reads every reference
    assert "references_judged" not in board.guard_cost["repetition"]
    assert board.guard_cost["_references"] == sum(len(refs[g]) for g in set(data.first_groups(2).groups))
    assert "| lift |" in board.to_markdown() and "(of 2 judged)" in board.to_markdown()
