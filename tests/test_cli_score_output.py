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
    console.print(_score_table(_Judge(), 3, ["geval", "gptscore"], 2.0, totals, Counter({reason.strip(): 4})))
    text = console.export_text()
    first_column = " ".join(line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│"))
    assert reason.strip() in first_column
    assert re.search(r"mean geval/coherence\s*│\s*3\.5000 \(1 failed\)", text)
    assert re.search(r"mean gptscore/coherence\s*│\s*n/a \(3 failed\)", text)
