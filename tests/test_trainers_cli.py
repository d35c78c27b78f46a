"""``judge-reward train`` / ``label-pairs``: configs, validation, and end-to-end runs.

Fast tests swap the embedded judge for the tiny in-process one (the model is the only thing
replaced; data, policy, TRL trainer and W&B files are real). The ``slow`` test runs the shipped
config with the real embedded Gemma judge.
"""

import json
from pathlib import Path

import pytest
import yaml
from tiny_models import make_backend
from typer.testing import CliRunner
from wandb_offline import read_history

from judge_reward import ConfigError, Judge, JudgeConfig
from judge_reward.aspects import CONFIG_DIR
from judge_reward.console import app
from judge_reward.trainers.run import TrainRunConfig, load_prompts, run_training

trl = pytest.importorskip("trl")
pytestmark = pytest.mark.skipif(not trl.__version__.startswith("1.16"), reason="pinned to TRL 1.16")

CONFIGS = sorted((CONFIG_DIR / "train").glob("*_summarize.yaml"))


def tiny_judge(*_args, **_kwargs):
    return Judge(JudgeConfig(aspects_file="summeval", aspects=["coherence", "relevance", "fluency"]),
                 backend=make_backend("char"))


def config_on_a_tiny_model(cls, config, *_args, **_kwargs):
    """The judge the command's config describes (its reward section included), on a tiny model."""
    return Judge(JudgeConfig.load(config), backend=make_backend("char"))


@pytest.fixture(autouse=True)
def data_folder(sample_data, monkeypatch):
    """The shipped configs name summeval/summeval.json under the data folder: the test sample here."""
    monkeypatch.setenv("JUDGE_REWARD_DATA", str(sample_data))


def small(config_path: Path, sample_data: Path, tmp_path: Path) -> dict:
    raw = yaml.safe_load(config_path.read_text())
    raw["data"]["summeval"] = str(sample_data / "summeval" / "summeval.json")
    raw["data"].update(num_prompts=2, max_source_words=30)  # the tiny judge reads characters
    raw["training"].update(max_steps=2, output_dir=str(tmp_path / "run"))
    raw["policy"].update(vocab_size=300, hidden_size=32)
    return raw


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_shipped_configs_parse(path):
    cfg = TrainRunConfig.from_yaml(path)
    assert cfg.trainer in path.stem and cfg.data.summeval.endswith("summeval.json")


def test_prompts_come_from_summeval_articles(sample_data):
    cfg = TrainRunConfig.from_dict({"data": {"summeval": str(sample_data / "summeval" / "summeval.json"),
                                             "num_prompts": 3, "max_source_words": 12}})
    rows = load_prompts(cfg.data)
    records = json.loads((sample_data / "summeval" / "summeval.json").read_text())
    assert len(rows) == 3 and len({r["source"] for r in rows}) == 3  # one per article, not per summary
    assert rows[0]["source"] == " ".join(records[0]["source"].split()[:12])
    assert rows[0]["source"] in rows[0]["prompt"] and rows[0]["reference"] == records[0]["reference"]


@pytest.mark.parametrize("trainer", ["grpo", "rloo", "online_dpo"])
def test_run_training_end_to_end_with_the_tiny_judge(trainer, sample_data, tmp_path, monkeypatch):
    """Each shipped run config trains, with its own judge config (reward section and guards
    included, so per-aspect functions and reward_weights match) on a tiny model."""
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    raw = small(CONFIG_DIR / "train" / f"{trainer}_summarize.yaml", sample_data, tmp_path)
    judge = Judge(JudgeConfig.load(raw["judge"]), backend=make_backend("char"))
    summary = run_training(TrainRunConfig.from_dict(raw), judge=judge)
    import wandb

    wandb.teardown()
    assert summary["steps"] == 2
    assert "train/judge/latency_s" in summary["wandb"]["judge_keys"]
    assert "train/judge/coherence/mean" in summary["wandb"]["judge_keys"]
    # the keys come from trainer.state.log_history; W&B got each of them
    logged = {k for row in read_history(summary["wandb"]["run_dir"]) for k in row}
    assert set(summary["wandb"]["judge_keys"]) <= logged
    assert summary["rewards"][0]["rows"] > 0 and summary["rewards"][0]["failures"] == {}
    written = json.loads((tmp_path / "run" / "train_summary.json").read_text())
    assert written["config"]["trainer"] == trainer and written["steps"] == 2


@pytest.mark.parametrize("change, message", [
    ({"trainer": "ppo"}, r"trainer: unknown value 'ppo'"),
    ({"reward": {"normalise": "zscore"}}, r"reward.normalise: unknown value 'zscore'"),
    ({"policy": {"hidden_size": 30, "num_heads": 4}}, r"policy.hidden_size: 30 is not divisible by num_heads 4"),
    ({"data": {"summeval": "/nonexistent/summeval.json"}}, r"data.summeval: no file at '/nonexistent/summeval.json'"),
    ({"learning_rate": 1}, r"unknown field\(s\) \['learning_rate'\]"),
    ({"wandb": {"mode": "cloud"}}, r"wandb.mode: unknown value 'cloud'"),
])
def test_bad_train_configs_name_the_field_and_value(change, message, tmp_path):
    raw = yaml.safe_load((CONFIG_DIR / "train" / "grpo_summarize.yaml").read_text())
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(raw.get(key), dict):
            raw[key] = {**raw[key], **value}
        else:
            raw[key] = value
    with pytest.raises(ConfigError, match=message):
        TrainRunConfig.from_dict(raw)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    result = CliRunner().invoke(app, ["train", "grpo", "--config", str(path)])
    assert result.exit_code == 2 and "error:" in result.output


def test_train_command_rejects_a_config_for_another_trainer():
    grpo = str(CONFIG_DIR / "train" / "grpo_summarize.yaml")
    result = CliRunner().invoke(app, ["train", "online-dpo", "--config", grpo])
    assert result.exit_code == 2 and "trainer: the command says 'online-dpo'" in result.output
    result = CliRunner().invoke(app, ["train", "nope", "--config", grpo])
    assert result.exit_code == 2 and "trainer: unknown value 'nope'" in result.output


def test_label_pairs_command_writes_a_dpo_dataset(tmp_path, monkeypatch):
    monkeypatch.setattr(Judge, "from_config", classmethod(config_on_a_tiny_model))
    rows = [
        {"prompt": "Summarize: the council met.", "source": "The council met and approved the budget.",
         "completions": ["The council approved the budget.", "Budget.", "Cats."], "human": [5, 2, 1]},
        {"prompt": "Summarize: a cat sat.", "source": "A cat sat on the mat.",
         "completions": ["A cat sat on the mat.", "Mats."], "human": [4, 1]},
    ]
    src = tmp_path / "candidates.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in rows))
    out = tmp_path / "pairs.jsonl"
    result = CliRunner().invoke(app, ["label-pairs", str(src), "--out", str(out), "--aspects", "coherence",
                                      "--human-column", "human"])
    assert result.exit_code == 0, result.output
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(written) == 2
    for row, ex in zip(rows, written):
        assert ex["prompt"] == row["prompt"] and ex["chosen"] in row["completions"] and ex["rejected"] in row["completions"]
        assert ex["chosen"] != ex["rejected"] and ex["margin"] > 0
    assert "human_agreement" in result.output
    bad = CliRunner().invoke(app, ["label-pairs", str(src), "--out", str(out), "--mode", "listwise"])
    assert bad.exit_code == 2 and "label.mode: unknown value 'listwise'" in bad.output


@pytest.mark.slow
def test_train_grpo_command_with_the_embedded_judge(tmp_path, monkeypatch, sample_data):
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    raw = yaml.safe_load((CONFIG_DIR / "train" / "grpo_summarize.yaml").read_text())
    raw["data"]["summeval"] = str(sample_data / "summeval" / "summeval.json")  # its 4 prompts: the first 4 articles
    path = tmp_path / "grpo.yaml"
    path.write_text(yaml.safe_dump(raw))
    result = CliRunner().invoke(app, ["train", "grpo", "--config", str(path), "--max-steps", "1",
                                      "--output-dir", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "run" / "train_summary.json").read_text())
    assert summary["steps"] == 1
    step = next(r for r in summary["log_history"] if "rewards/judge/mean" in r)
    # the default reward: a random policy says nothing about the article and is charged by the readability floor
    assert step["rewards/judge/mean"] < 0 and step["judge/latency_s"] > 0
    assert "train/judge/relevance/mean" in summary["wandb"]["judge_keys"]


def test_label_pairs_can_sample_the_candidates_from_a_policy(tmp_path, monkeypatch):
    from tiny_models import make_tokenizer

    from judge_reward.trainers.policy import tiny_policy

    monkeypatch.setattr(Judge, "from_config", classmethod(config_on_a_tiny_model))
    tok = make_tokenizer("bpe")
    tiny_policy(tok, hidden_size=32).save_pretrained(tmp_path / "policy")
    tok.save_pretrained(tmp_path / "policy")
    src = tmp_path / "prompts.jsonl"
    src.write_text("\n".join(json.dumps({"prompt": f"Summarize: the council met {i}.", "source": "The council met."})
                             for i in range(3)))
    out = tmp_path / "pairs"
    result = CliRunner().invoke(app, ["label-pairs", str(src), "--out", str(out), "--aspects", "coherence",
                                      "--generate-model", str(tmp_path / "policy"), "--num-candidates", "3",
                                      "--max-new-tokens", "6"])
    assert result.exit_code == 0, result.output
    from datasets import load_from_disk

    pairs = load_from_disk(str(out))
    assert 1 <= len(pairs) <= 3 and all(c != r for c, r in zip(pairs["chosen"], pairs["rejected"]))
    assert set(pairs["chosen_index"]) <= {0, 1, 2}


def test_completion_samples_print_the_article_on_one_line(capsys):
    from trl.trainer import grpo_trainer

    from judge_reward.trainers.run import print_completion_samples, readable_completion_samples

    capsys.readouterr()  # what importing TRL printed
    article = " ".join(f"word{i}" for i in range(300))
    prompts = [f"Summarize the following news article.\n\nArticle: {article}\n\nSummary:"] * 4
    completions = ["The council met.", "Cats.", [{"role": "assistant", "content": "A chat reply."}], "x"]
    rewards = {"judge": [-1.5, -2.0, -3.0, -4.0]}
    extra = {"judge/coherence (gptscore)": [-1.25, -2.0, None, -4.0]}
    original = grpo_trainer.print_prompt_completions_sample
    with readable_completion_samples():
        assert grpo_trainer.print_prompt_completions_sample is not original
        grpo_trainer.print_prompt_completions_sample(prompts, completions, rewards, [0.5, 0.1, -0.2, -0.4], 3, None, extra)
        # TRL's closing log() repeats the last step: printed once
        grpo_trainer.print_prompt_completions_sample(prompts, completions, rewards, [0.5, 0.1, -0.2, -0.4], 3, None, extra)
    assert grpo_trainer.print_prompt_completions_sample is original
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "step 3: 4 of 4 completions" and len(out) == 1 + 4 * 3
    assert out[1].startswith("  [1] prompt:     Summarize the following news article. Article: word0 word1")
    assert out[1].endswith("(307 words)") and len(out[1]) < 160
    assert out[2] == "      completion: The council met."
    assert out[3] == "      judge -1.5 | advantage 0.5 | judge/coherence (gptscore) -1.25"
    assert out[8] == "      completion: A chat reply." and out[9].endswith("judge/coherence (gptscore) None")
    print_completion_samples(prompts, completions, rewards, None, 4, 0, extra)
    print_completion_samples(prompts, completions, rewards, None, 5, 2, extra)
    assert len(capsys.readouterr().out.splitlines()) == 1 + 2 * 3
