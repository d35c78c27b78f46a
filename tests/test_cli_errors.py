"""A user's mistake ends a command with one line naming the file, line, field and value, exit status 2,
no traceback (``--debug`` shows it), and before the judge model loads."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from judge_reward.console import app


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
    lines = result.stderr.strip().splitlines()  # stdout may carry a library's notice (transformers' W&B line)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return result.stderr


def write(path, text):
    path.write_text(text)
    return path


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


# -- judge -------------------------------------------------------------------------------------------


def test_backend_model_and_device_are_checked_before_loading(good, tmp_path):
    out = error("score", good, "--model", tmp_path / "no-model")
    assert f"--model {tmp_path / 'no-model'}: '{tmp_path / 'no-model'}' is neither an embedded model" in out
    assert "--model embedded:foo: unknown embedded model 'foo'" in error("score", good, "--model", "embedded:foo")
    assert "--device cuda:x: unknown device 'cuda:x'" in error("serve", "--device", "cuda:x")
    out = error("score", good, "--device", "tpu")
    assert "--device tpu: unknown device 'tpu'" in out
    config = write(tmp_path / "judge.yaml", "backend: {kind: hf, device: tpu}\n")
    assert f"{config}: backend.device: unknown device 'tpu'" in error("probe", "--data", good, "--config", config)


def test_reward_section_is_checked_before_loading(good, tmp_path):
    config = write(tmp_path / "judge.yaml", "reward:\n  weights: {coherense: 1}\n")
    out = error("score", good, "--config", config)
    assert f"{config}: reward.weights: aspect(s) ['coherense']" in out
    config = write(tmp_path / "judge2.yaml", "reward:\n  aspects: [coherense]\n")
    assert f"{config}: reward.aspects: unknown aspect 'coherense'" in error("probe", "--data", good, "--config", config)


def test_a_judge_config_mapping_is_checked_before_loading():
    from judge_reward import Judge
    from judge_reward.config import ConfigError

    for bad, message in (({"gptscore": {"directoin": "x"}}, "gptscore: unknown field(s) ['directoin']"),
                         ({"method": "geval", "geval": {"mode": "exactt"}}, "geval.mode: unknown value 'exactt'"),
                         ({"cache": {"pth": "x"}}, "cache: unknown field(s) ['pth']"),
                         ({"backend": {"kind": "hf", "device": "tpu"}}, "backend.device: unknown device 'tpu'")):
        with pytest.raises(ConfigError) as err:
            Judge.from_config(bad)
        assert message in str(err.value)
    for bad in (5, None, ["default"]):
        with pytest.raises(ConfigError, match="judge: expected a judge config"):
            Judge.from_config(bad)


# -- score -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [5, True, {"a": 1}])
def test_score_source_and_reference_must_be_text(tmp_path, value):
    path = tmp_path / "in.jsonl"
    for key in ("source", "reference"):
        write(path, json.dumps({"output": "A summary.", "source": "An article.", key: value}) + "\n")
        assert f"{path}:1: field {key!r} must be text, got {value!r}" in error("score", path)
    write(path, json.dumps({"output": "A summary.", "id": True}) + "\n")
    assert f"{path}:1: field 'id' must be text, got True" in error("score", path)


def test_score_output_that_is_a_folder(tmp_path):
    path = write(tmp_path / "in.jsonl", json.dumps({"output": "A summary."}) + "\n")
    assert f"--output {tmp_path}: is a folder, not a file" in error("score", path, "-o", tmp_path)
    assert f"--out {tmp_path}: is a folder, not a file" in error("steps", "--out", tmp_path)


# -- probe -------------------------------------------------------------------------------------------


def test_probe_pairs_not_utf8(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_bytes(b'{"source": "s", "output": "caf\xe9"}\n')
    assert f"{path}: not valid UTF-8 (byte 0xe9 at offset 30)" in error("probe", "--data", path)


def test_probe_out_that_is_a_file(tmp_path):
    pairs = write(tmp_path / "pairs.jsonl", json.dumps({"source": "An article.", "output": "A summary."}) + "\n")
    assert f"--out {pairs}: is a file, not a folder" in error("probe", "--data", pairs, "--out", pairs)


# -- meta-eval ---------------------------------------------------------------------------------------


def test_meta_eval_data_mistakes_name_the_file(tmp_path):
    assert f"{tmp_path}: is a folder, not a data file" in error(
        "meta-eval", "--dataset", "summeval", "--data", tmp_path, "--baselines", "rouge")
    for dataset, name in (("summeval", "s.json"), ("jsonl", "s.jsonl"), ("csv", "s.csv")):
        path = tmp_path / name
        path.write_bytes(b'[{"doc_id": "caf\xe9"}]\n')
        out = error("meta-eval", "--dataset", dataset, "--data", path, "--baselines", "rouge")
        assert f"{path}: not valid UTF-8 (byte 0xe9 at offset 16)" in out
    empty = write(tmp_path / "empty.json", "[]")
    assert f"{empty}: no records" in error("meta-eval", "--dataset", "summeval", "--data", empty, "--baselines", "rouge")
    good = write(tmp_path / "good.json", "[]")
    assert f"{tmp_path}: is a folder, not a data file" in error(
        "meta-eval", "--dataset", "summeval", "--data", good, "--references", tmp_path, "--baselines", "rouge")


def test_meta_eval_options_are_named_as_given(tmp_path):
    data = write(tmp_path / "s.json", "[]")
    assert "--bootstrap: expected a whole number >= 0, got -5" in error(
        "meta-eval", "--dataset", "summeval", "--data", data, "--baselines", "rouge", "--bootstrap", -5)
    assert "--limit: expected a whole number >= 1, got 0" in error(
        "meta-eval", "--dataset", "summeval", "--data", data, "--baselines", "rouge", "--limit", 0)


def test_meta_eval_out_is_checked_before_the_work(tmp_path):
    data = write(tmp_path / "s.json", "[]")  # the --out check comes first
    assert f"--out {tmp_path}: is a folder, not a file" in error(
        "meta-eval", "--dataset", "summeval", "--data", data, "--baselines", "rouge", "--out", tmp_path)
    assert "the folder" in error("meta-eval", "--dataset", "summeval", "--data", data, "--baselines", "rouge",
                                 "--out", tmp_path / "no" / "r.json")


# -- train -------------------------------------------------------------------------------------------


def _config(tmp_path, data):
    return write(tmp_path / "run.yaml", f"trainer: grpo\ndata: {data}\n")


def test_train_prompt_data_mistakes(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    out = error("train", "grpo", "--config", _config(tmp_path, f"{{summeval: {folder}}}"))
    assert f"data.summeval: {folder}: is a folder, not a data file" in out
    out = error("train", "grpo", "--config", _config(tmp_path, f"{{jsonl: {folder}}}"))
    assert f"data.jsonl: {folder}: is a folder, not a data file" in out
    bad = write(tmp_path / "bad.json", '[{"doc_id": ')
    assert f"data.summeval: {bad}:1: not valid JSON" in error("train", "grpo", "--config", _config(tmp_path, f"{{summeval: {bad}}}"))
    strings = write(tmp_path / "strings.json", '["x"]')
    out = error("train", "grpo", "--config", _config(tmp_path, f"{{summeval: {strings}}}"))
    assert f"data.summeval: {strings}: record 0: expected an object, got 'x'" in out
    mapping = write(tmp_path / "mapping.json", '{"a": 1}')
    out = error("train", "grpo", "--config", _config(tmp_path, f"{{summeval: {mapping}}}"))
    assert "expected a JSON list of records, got dict" in out
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"prompt": "caf\xe9"}\n')
    out = error("train", "grpo", "--config", _config(tmp_path, f"{{jsonl: {latin}}}"))
    assert f"data.jsonl: {latin}: not valid UTF-8 (byte 0xe9 at offset 15)" in out


def test_train_judge_that_is_neither_a_name_nor_a_mapping(tmp_path):
    prompts = write(tmp_path / "p.jsonl", json.dumps({"prompt": "Summarise: x"}) + "\n")
    config = write(tmp_path / "run.yaml", f"trainer: grpo\ndata: {{jsonl: {prompts}}}\njudge: 5\n")
    assert "judge: expected a judge config" in error("train", "grpo", "--config", config)


def refuse(monkeypatch, target: str, what: str) -> None:
    """Make ``target`` an error: the command must have stopped before ``what``."""
    def refused(*args, **kwargs):
        raise AssertionError(f"{what} ({args})")

    monkeypatch.setattr(target, refused)


@pytest.fixture
def no_policy(monkeypatch):
    refuse(monkeypatch, "judge_reward.trainers.policy.load_policy", "the policy was loaded")


def test_train_run_and_reward_mistakes_before_any_model_loads(tmp_path, no_policy):
    prompts = write(tmp_path / "p.jsonl", json.dumps({"prompt": "Summarise: x"}) + "\n")
    config = write(tmp_path / "run.yaml", f"trainer: grpo\ndata: {{jsonl: {prompts}}}\ntraining: {{max_stepz: 3}}\n")
    assert "training: unknown field(s) ['max_stepz'] for GRPOConfig" in error("train", "grpo", "--config", config)
    config = write(tmp_path / "run.yaml", f"trainer: grpo\ndata: {{jsonl: {prompts}}}\nreward: {{aspects: [coherense]}}\n")
    assert "reward.aspects: unknown aspect 'coherense'" in error("train", "grpo", "--config", config)


# -- label-pairs -------------------------------------------------------------------------------------


def test_label_pairs_rows_and_options_before_loading(tmp_path):
    out = tmp_path / "pairs.jsonl"
    rows = write(tmp_path / "rows.jsonl", json.dumps({"prompt": "p", "source": "s"}) + "\n")
    assert f"{rows}: rows[0].completions: expected a list of candidate completions, got None" in error(
        "label-pairs", rows, "--out", out)
    write(rows, "[1, 2]\n")
    assert f"{rows}: rows[0]: expected a mapping, got list" in error("label-pairs", rows, "--out", out)
    write(rows, json.dumps({"prompt": "p", "completions": ["a", "b"], "source": "s"}) + "\n")
    assert "--limit: expected a whole number >= 1, got -1" in error("label-pairs", rows, "--out", out, "--limit", -1)
    assert "--generate-model" in error("label-pairs", rows, "--out", out, "--generate-model", tmp_path / "none")
    assert "unknown aspect 'coherense'" in error("label-pairs", rows, "--out", out, "--aspects", "coherense")
    chat = json.dumps({"prompt": [{"role": "user", "content": "p"}], "completions": ["a", "b"], "source": "s"})
    write(rows, chat + "\n" + json.dumps({"prompt": "p", "completions": ["a", "b"], "source": "s"}) + "\n")
    mixed = f"{rows}: rows[1].prompt: text, but rows[0].prompt is chat messages; a pair dataset holds one prompt format"
    assert mixed in error("label-pairs", rows, "--out", out)
    (tmp_path / "policy").mkdir()
    write(tmp_path / "policy" / "config.json", "{}")  # a model folder that would fail to load
    assert mixed in error("label-pairs", rows, "--out", out, "--generate-model", tmp_path / "policy")


# -- audit -------------------------------------------------------------------------------------------


def test_audit_study_file_mistakes(tmp_path):
    (tmp_path / "a" / "pairwise_evaluation_results.json").mkdir(parents=True)
    out = error("audit", "--out", tmp_path / "o", "--data", tmp_path / "a")
    assert f"{tmp_path / 'a' / 'pairwise_evaluation_results.json'}: is a folder, not a data file" in out
    path = tmp_path / "b" / "pairwise_evaluation_results.json"
    path.parent.mkdir()
    path.write_bytes(b'[{"a": "caf\xe9"}]')
    out = error("audit", "--out", tmp_path / "o", "--data", tmp_path / "b")
    assert f"{path}: not valid UTF-8 (byte 0xe9 at offset 11)" in out


def test_audit_judge_and_out_mistakes_before_the_data_and_the_model(tmp_path):
    out = error("audit", "--out", tmp_path / "o", "--judge", tmp_path / "none.yaml")
    assert f"no file '{tmp_path / 'none.yaml'}'" in out
    assert "backend.device: unknown device 'tpu'" in error("audit", "--out", tmp_path / "o", "--device", "tpu")
    assert "aspects: unknown aspect 'coherense'" in error("audit", "--out", tmp_path / "o", "--aspects", "coherense")
    afile = write(tmp_path / "afile", "")
    assert f"--out {afile}: is a file, not a folder" in error("audit", "--out", afile)
    assert f"cache {tmp_path}: is a folder" in error("audit", "--out", tmp_path / "o", "--cache", tmp_path)
    assert "--cache c.sqlite and --no-cache: give one of them" in error("audit", "--out", tmp_path / "o", "--cache",
                                                                        "c.sqlite", "--no-cache")


# -- serve -------------------------------------------------------------------------------------------


@pytest.fixture
def no_server(monkeypatch):
    refuse(monkeypatch, "judge_reward.service.server.serve", "the server was started")


def test_serve_log_level_and_reward(tmp_path, no_server):
    assert "--log-level: unknown value 'bogus'" in error("serve", "--log-level", "bogus")
    assert "--max-body-mb: expected a positive number of MiB, got -1.0" in error("serve", "--max-body-mb", -1)
    config = write(tmp_path / "judge.yaml", "reward:\n  weights: {coherense: 1}\n")
    assert f"{config}: reward.weights: aspect(s) ['coherense']" in error("serve", "--config", config)


def test_typers_own_usage_errors_are_one_line_too(good):
    assert "Invalid value for '--batch-size'" in error("score", good, "--batch-size", "abc")
    assert "No such option: --bogus (see " in error("score", good, "--bogus")  # the program name: judge-reward
    assert "Missing argument 'input'" in error("score")
    assert "No such command 'nosuch'" in error("nosuch")
    assert "Usage: " in run().output  # a bare command still shows its help
