"""A user's mistake ends a command with one line naming the file, line, field and value, exit status 2,
no traceback (``--debug`` shows it), and before the judge model loads."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from judge_reward_cli import app


@pytest.fixture(autouse=True)
def no_model(monkeypatch):
    """Loading a model is an error here: every mistake must be caught before it."""
    def refuse(spec):
        raise AssertionError(f"the judge model was loaded ({spec})")

    monkeypatch.setattr("judge_reward.judge.build_backend", refuse)


def run(*args):
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output and "AssertionError" not in result.output, result.output
    assert not isinstance(result.exception, AssertionError), result.exception
    return result


def error(*args) -> str:
    result = run(*args)
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.output.strip().splitlines()
    assert 1 <= len(lines) <= 2 and lines[0].startswith("error: "), result.output
    return result.output


@pytest.fixture
def good(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"id": "a", "source": "An article.", "output": "A summary."}) + "\n")
    return path


def test_unknown_aspect(good):
    out = error("score", good, "--aspects", "coherence,coherense")
    assert "unknown aspect 'coherense'" in out and "summeval.yaml" in out and "known: coherence" in out


def test_unknown_method(good):
    out = error("score", good, "--method", "gptscore,gevall")
    assert "method: unknown value 'gevall'" in out
    out = error("score", good, "--method", "rating", "--config", _judge_yaml(good.parent, "rating: {style: likert}"))
    assert "rating" in out and "likert" in out  # the method's own section is checked too


def test_invalid_utf8(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"output": "fine"}\n{"output": "caf\xe9"}\n')
    out = error("score", path)
    assert f"{path}:2: not valid UTF-8 (byte 0xe9 at column 16)" in out


def test_missing_input_file(tmp_path):
    out = error("score", tmp_path / "nope.jsonl")
    assert f"{tmp_path / 'nope.jsonl'}: no such input file" in out
    assert "is a folder" in error("score", tmp_path)


def test_malformed_yaml_names_the_file_and_line(good, tmp_path):
    config = _judge_yaml(tmp_path, "method: [gptscore\n")
    out = error("score", good, "--config", config)
    assert f"{config}:" in out and "not valid YAML" in out
    aspects = tmp_path / "aspects.yaml"
    aspects.write_text("aspects:\n  coherence: {definition: d\n")
    out = error("score", good, "--config", _judge_yaml(tmp_path, f"aspects_file: {aspects}"))
    assert f"{aspects}:" in out and "not valid YAML" in out


def test_empty_input(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text("\n  \n")
    assert f"no items in {path}" in error("score", path)


def test_bad_json_line_and_fields(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"output": "one"}\n{"output": two}\n')
    assert f"{path}:2: not valid JSON (Expecting value at column 12)" in error("score", path)
    path.write_text('{"output": "one"}\n{"source": "s", "output": 3}\n')
    assert f"{path}:2: field 'output' (text) is required, got 3" in error("score", path)
    path.write_text('{"output": "one", "id": [1]}\n')
    assert f"{path}:1: field 'id' must be text, got [1]" in error("score", path)


def test_bad_config_field_and_output_folder(good, tmp_path):
    out = error("score", good, "--config", _judge_yaml(tmp_path, "gptscore: {directoin: src_hypo}"))
    assert "gptscore: unknown field(s) ['directoin']" in out
    assert "backend: unknown field(s) ['max_batch_rowz']" in error(
        "score", good, "--config", _judge_yaml(tmp_path, "backend: {kind: hf, max_batch_rowz: 4}"))
    assert "no file 'nope.yaml'" in error("score", good, "--config", "nope.yaml")
    assert f"{tmp_path / 'no' / 'out.jsonl'}: the folder" in error("score", good, "-o", tmp_path / "no" / "out.jsonl")


def test_debug_shows_the_traceback(tmp_path):
    result = CliRunner().invoke(app, ["--debug", "score", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 1 and type(result.exception).__name__ == "UserError"
    assert "no such input file" in str(result.exception)
    assert error("score", tmp_path / "nope.jsonl")  # and the next command without --debug is short again


def test_steps_checks_before_loading(tmp_path):
    assert "unknown aspect 'fluent'" in error("steps", "--out", tmp_path / "steps.yaml", "--aspects", "fluent")


def test_the_console_command_prints_one_line(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text("")
    proc = subprocess.run([sys.executable, "-m", "judge_reward.cli", "score", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"error: no items in {path} (expected one JSON object per line)\n"


def _judge_yaml(folder, text):
    path = folder / "judge.yaml"
    path.write_text(text)
    return path


def test_train_audit_and_label_pairs_mistakes(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("trainer: grpo\ndata: {summeval: x\n")
    out = error("train", "grpo", "--config", bad)
    assert f"{bad}:" in out and "not valid YAML" in out
    assert "train: no file 'nope.yaml'" in error("train", "grpo", "--config", "nope.yaml")
    out = error("audit", "--config", bad, "--out", tmp_path / "o")
    assert f"{bad}:" in out and "not valid YAML" in out
    assert f"{tmp_path / 'rows.jsonl'}: no such input file" in error("label-pairs", tmp_path / "rows.jsonl", "--out", tmp_path / "p.jsonl")
    rows = tmp_path / "rows.jsonl"
    rows.write_bytes(b'{"prompt": "\xff"}\n')
    assert f"{rows}:1: not valid UTF-8" in error("label-pairs", rows, "--out", tmp_path / "p.jsonl")


def test_bad_field_deep_in_a_config_file_names_file_path_and_value(good, tmp_path):
    """Fields checked at load (reward.guards) and those checked before the model loads (backend)
    both name the file, the field's full path and the value."""
    guards = tmp_path / "guards.yaml"
    guards.write_text("reward:\n  guards:\n    copy: {enabled: true, weight: -1}\n")
    out = error("score", good, "--config", guards)
    assert f"{guards}: reward.guards.copy.weight: expected a non-negative number, got -1" in out
    backend = tmp_path / "backend.yaml"
    backend.write_text("backend: {kind: hf, max_batch_rows: true}\n")
    out = error("score", good, "--config", backend)
    assert f"{backend}: backend.max_batch_rows: expected a positive integer, got True" in out
