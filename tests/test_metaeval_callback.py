"""CorrelationCallback inside a real transformers.Trainer (tiny in-process Llama, W&B offline)."""

import time

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

from judge_reward.methods.base import Score
from judge_reward.metaeval import dataset_level, load_summeval, sample_level
from judge_reward.metaeval.callback import CorrelationCallback, CorrelationCallbackConfig


def _wait_for_bytes(wandb_dir, needle, timeout=60.0):
    """The offline run's .wandb record log once it holds ``needle`` (W&B's writer process
    may still be flushing after finish() returns)."""
    deadline = time.monotonic() + timeout
    while True:
        logs = sorted(wandb_dir.glob("offline-run-*/run-*.wandb"))
        data = logs[-1].read_bytes() if logs else b""
        if needle in data or time.monotonic() > deadline:
            assert needle in data, f"{needle!r} not in the W&B run log after {timeout}s"
            return data
        time.sleep(0.5)


class OverlapJudge:
    """A judge for tests: the share of the output's words that also occur in the source."""

    def __init__(self):
        self.calls = 0

    def score(self, items, aspects):
        self.calls += 1
        out = []
        for it in items:
            words = it.output.lower().split()
            source = set(it.source.lower().split())
            value = sum(w in source for w in words) / max(len(words), 1)
            out.append({a: Score(value) for a in aspects})
        return out


class TokenData(torch.utils.data.Dataset):
    def __init__(self, n=16, length=12, vocab=64):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (n, length), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def _tiny_llama():
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32)  # fmt: skip
    return LlamaForCausalLM(config)


@pytest.fixture
def probe(sample_data):
    # 64 SummEval summaries of 4 documents, with their expert ratings
    return load_summeval(sample_data / "summeval" / "summeval.json").first_groups(4)


def test_correlations_reach_the_trainer_logs_and_wandb(probe, tmp_path, offline_wandb, monkeypatch):
    monkeypatch.setenv("WANDB_PROJECT", "judge-reward-test")
    judge = OverlapJudge()
    cb = CorrelationCallback(judge, probe, CorrelationCallbackConfig(every_n_steps=2, aspects=("coherence", "relevance")))
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=3, per_device_train_batch_size=4, logging_steps=1,
        report_to=["wandb"], save_strategy="no", use_cpu=True, disable_tqdm=True, learning_rate=1e-3,
    )  # fmt: skip
    trainer = Trainer(model=_tiny_llama(), args=args, train_dataset=TokenData(), callbacks=[cb])
    cb.attach(trainer)
    assert trainer.callback_handler.callbacks.count(cb) == 1  # attach does not add it twice
    trainer.train()

    # measured before training (step 0) and at step 2 of 3
    assert [step for step, _ in cb.history] == [0, 2] and judge.calls == 2
    logged = [h for h in trainer.state.log_history if "metaeval/coherence/spearman" in h]
    assert [h["step"] for h in logged] == [0, 2]

    scores = [s["coherence"].value for s in judge.score(probe.items, ["coherence"])]
    human = probe.human("coherence")
    assert len(scores) == 64 and len(set(probe.groups)) == 4
    expected = sample_level(scores, human, probe.groups, "spearman")
    assert logged[-1]["metaeval/coherence/spearman"] == pytest.approx(expected)
    assert logged[-1]["metaeval/coherence/kendall"] == pytest.approx(sample_level(scores, human, probe.groups, "kendall"))
    assert logged[-1]["metaeval/coherence/dataset/pearson"] == pytest.approx(dataset_level(scores, human, "pearson"))
    assert logged[-1]["metaeval/relevance/dropped"] == 0.0
    assert not any(k.startswith("metaeval/fluency") for k in logged[-1])  # not asked for

    # W&B saw it: the key and value are in the offline run's record log
    import wandb

    wandb.finish()  # transformers' WandbCallback leaves the run open after train()
    run_log = _wait_for_bytes(offline_wandb, b"metaeval/coherence/spearman")
    assert repr(expected).encode() in run_log


def test_unattached_callback_fails_before_training(probe, tmp_path):
    cb = CorrelationCallback(OverlapJudge(), probe, CorrelationCallbackConfig(every_n_steps=1))
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=1, report_to=[], use_cpu=True, disable_tqdm=True)
    trainer = Trainer(model=_tiny_llama(), args=args, train_dataset=TokenData(), callbacks=[cb])
    with pytest.raises(RuntimeError, match=r"call callback.attach\(trainer\)"):
        trainer.train()


def test_callback_input_checks(probe):
    with pytest.raises(TypeError, match="expected an object with .score"):
        CorrelationCallback(object(), probe)
    with pytest.raises(KeyError, match="aspect 'humour' is not rated"):
        CorrelationCallback(OverlapJudge(), probe, CorrelationCallbackConfig(aspects=("humour",)))
    with pytest.raises(ValueError, match=r"every_n_steps: expected a positive integer, got 0"):
        CorrelationCallbackConfig(every_n_steps=0)
