"""What ``judge-reward score`` shows: a progress bar counting items, and a closing table with the mean
score per method and aspect and every failure reason in full (the tiny in-process judge model)."""

import json
import re
from collections import Counter

from tiny_models import make_backend
from typer.testing import CliRunner

from rich.console import Console

from judge_reward.cli import _score_table, app


def test_score_counts_items_and_shows_means(tmp_path, monkeypatch, one_torch_thread):
    monkeypatch.setattr("judge_reward.judge.build_backend", lambda spec: make_backend("char"))
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "source": "The council met.", "output": f"It met {i}."}) + "\n"
                           for i in range(3)))
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["score", str(src), "-o", str(out), "--aspects", "coherence,fluency",
                                      "--method", "gptscore,geval", "--chunk", "2"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 3
    assert re.search(r"score: 100%.*\b3/3\b", result.output), result.output  # items, not items x methods
    for key in ("gptscore/coherence", "gptscore/fluency", "geval/coherence", "geval/fluency"):
        mean = sum(r["scores"][key] for r in records) / 3
        row = re.search(rf"mean {key}\s*│\s*(-?[0-9.]+)", result.output)
        assert row and float(row.group(1)) == round(mean, 4), (key, mean, result.output)


class _Backend:
    model_id = "m"


class _Judge:
    aspects = ["coherence"]
    backend = _Backend()

    def stats(self):
        return {}


def test_the_table_keeps_failure_reasons_whole():
    reason = "judge error: RuntimeError: " + "the backend lost its device in the middle of a long batch " * 3
    totals = {"geval/coherence": [7.0, 2, 1], "gptscore/coherence": [0.0, 0, 3]}
    console = Console(width=80, record=True)
    console.print(_score_table(_Judge(), 3, 1, ["geval", "gptscore"], 2.0, totals, Counter({reason.strip(): 4})))
    text = console.export_text()
    first_column = " ".join(line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│"))
    assert reason.strip() in first_column
    assert re.search(r"mean geval/coherence\s*│\s*3\.5000 \(1 failed\)", text)
    assert re.search(r"mean gptscore/coherence\s*│\s*n/a \(3 failed\)", text)


def test_method_shows_scores_while_the_reward_stays_the_configs(tmp_path, monkeypatch, one_torch_thread):
    """``--method geval`` picks the scores shown; the reward is still the config's (here GPTScore with a
    guard that reads its token log-probabilities), the number a trainer built from the config gets."""
    monkeypatch.setattr("judge_reward.judge.build_backend", lambda spec: make_backend("char"))
    config = tmp_path / "judge.yaml"
    config.write_text("aspects: [coherence]\nmethod: gptscore\ncache: {memory: false}\n"
                      "reward: {normalise: none, guards: {likelihood_floor: {enabled: true, floor: -100.0, unconditional: false}}}\n")
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "source": "The council met on Tuesday.", "output": f"It met {i}."}) + "\n"
                           for i in range(2)))
    rewards = {}
    for method in ("gptscore", "geval"):
        out = tmp_path / f"{method}.jsonl"
        result = CliRunner().invoke(app, ["score", str(src), "-o", str(out), "--config", str(config), "--method", method])
        assert result.exit_code == 0, result.output
        records = [json.loads(line) for line in out.read_text().splitlines()]
        assert all(set(r["scores"]) == {f"{method}/coherence"} for r in records)
        rewards[method] = [r["reward"] for r in records]
    assert all(isinstance(r, float) for r in rewards["geval"]) and rewards["geval"] == rewards["gptscore"]


def test_aspects_choose_the_scores_written_not_the_panel(tmp_path, monkeypatch, one_torch_thread):
    """An aspect's G-Eval score does not depend on which others ``--aspects`` asks for: the judge's
    panel (every aspect's criteria in each prompt) and the reward stay the config's."""
    monkeypatch.setattr("judge_reward.judge.build_backend", lambda spec: make_backend("char"))
    config = tmp_path / "judge.yaml"
    config.write_text("aspects: [coherence, fluency, relevance]\nmethod: geval\ncache: {memory: false}\n")
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"source": "The council met on Tuesday.", "output": "It met."}) + "\n")
    records = {}
    for aspects in ("coherence", "coherence,fluency"):
        out = tmp_path / f"{aspects}.jsonl"
        result = CliRunner().invoke(app, ["score", str(src), "-o", str(out), "--config", str(config), "--aspects", aspects])
        assert result.exit_code == 0, result.output
        records[aspects] = json.loads(out.read_text())
    one, two = records["coherence"], records["coherence,fluency"]
    assert set(one["scores"]) == {"geval/coherence"} and set(two["scores"]) == {"geval/coherence", "geval/fluency"}
    # equal up to float rounding of different batch shapes (a changed panel moves it by far more)
    assert abs(one["scores"]["geval/coherence"] - two["scores"]["geval/coherence"]) < 1e-5
    assert abs(one["reward"] - two["reward"]) < 1e-5 and set(one["reward_components"]) == {
        "aspect/coherence", "aspect/fluency", "aspect/relevance", "term/judge"}
    assert one["reward_term"] == {"name": "judge", "value": one["reward"]}  # no guard: the reward is its term
    result = CliRunner().invoke(app, ["score", str(src), "--config", str(config), "--aspects", "consistency"])
    assert result.exit_code == 2 and "--aspects: 'consistency' not among the aspects of" in result.output


def test_exit_status_1_when_the_judge_failed_on_every_item(tmp_path, monkeypatch, one_torch_thread):
    monkeypatch.setattr("judge_reward.judge.build_backend", lambda spec: make_backend("char"))
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"source": "The council met.", "output": ""}) + "\n" for _ in range(2)))
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["score", str(src), "-o", str(out), "--aspects", "coherence"])
    assert result.exit_code == 1 and "the judge failed on every item" in result.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]  # every line is still written
    assert len(records) == 2 and all(r["reward"] is None and "empty" in r["reward_reason"] for r in records)
    src.write_text(json.dumps({"source": "The council met.", "output": ""}) + "\n"
                   + json.dumps({"source": "The council met.", "output": "It met."}) + "\n")
    assert CliRunner().invoke(app, ["score", str(src), "-o", str(out), "--aspects", "coherence"]).exit_code == 0
