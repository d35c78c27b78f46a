"""The reward divergence monitor: its signals, its rule, its replay and the TRL callback."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("transformers")

from judge_reward.bias_audit.divergence import (  # noqa: E402
    DivergenceConfig,
    DivergenceMonitor,
    StepRecord,
    check_divergence,
    completion_signals,
    replay,
    unsupported_share,
)
from judge_reward.config import ConfigError  # noqa: E402

SOURCE = "Jones said on Monday that Smith scored 3 goals for Leeds in the cup final."


def test_unsupported_share_counts_numbers_and_names_the_source_does_not_give():
    assert unsupported_share("Smith scored 3 goals, Jones said.", SOURCE) == 0.0
    # "Brown" and "7" are new, "Smith" and "Leeds" are given: 2 of 4 ("Then" opens the text: not a name)
    assert unsupported_share("Then Smith scored 7 goals for Leeds and Brown.", SOURCE) == 0.5
    # the first word of a sentence is not read as a name
    assert unsupported_share("Goals came late. Nothing else.", SOURCE) is None


def test_completion_signals_unfinished_and_reference_overlap():
    from judge_reward.bias_audit.divergence import rouge_l_scorer

    rouge = rouge_l_scorer()
    done = completion_signals("Smith scored 3 goals for Leeds.", SOURCE, "Smith scored 3 goals for Leeds.", rouge)
    assert done["unfinished"] == 0.0 and done["reference_overlap"] == pytest.approx(1.0)
    cut = completion_signals("Smith scored 3 goals for", SOURCE, "Smith scored 3 goals for Leeds.", rouge)
    assert cut["unfinished"] == 1.0 and 0.5 < cut["reference_overlap"] < 1.0
    assert completion_signals("Smith scored.", SOURCE)["reference_overlap"] is None  # no reference


def test_unfinished_means_cut_by_the_limit_when_token_counts_are_known():
    """A policy that ends its sentence without the full stop stopped by itself; one that ran out of
    tokens mid-sentence was cut. Without counts or a limit, the text rule alone decides."""
    texts = ["Smith scored 3 goals for Leeds", "Smith scored 3 goals for", "Smith scored 3 goals."]
    monitor = DivergenceMonitor(DivergenceConfig(reference_column=None, max_completion_tokens=8))
    monitor.add(1, texts, [SOURCE] * 3, [0.0] * 3, lengths=[6, 8, 8])
    assert [r["unfinished"] for r in monitor._pending[1]] == [0.0, 1.0, 0.0]
    no_limit = DivergenceMonitor(DivergenceConfig(reference_column=None))
    no_limit.add(1, texts, [SOURCE] * 3, [0.0] * 3, lengths=[6, 8, 8])
    assert [r["unfinished"] for r in no_limit._pending[1]] == [1.0, 1.0, 0.0]
    no_limit.add(2, texts, [SOURCE] * 3, [0.0] * 3, lengths=[6, 8, 8], max_tokens=8)  # the trainer's limit
    assert [r["unfinished"] for r in no_limit._pending[2]] == [0.0, 1.0, 0.0]


def _history(reward, **signals):
    n = len(reward)
    return [StepRecord(i + 1, 8, {"reward": reward[i], **{k: v[i] for k, v in signals.items()}}) for i in range(n)]


def _noisy(start, end, n, wobble=0.01):
    """A ramp from start to end with a fixed alternating wobble (so the windows have a spread)."""
    return [start + (end - start) * i / (n - 1) + (wobble if i % 2 else -wobble) for i in range(n)]


def test_rule_flags_a_rising_reward_with_a_worsening_signal_only():
    cfg = DivergenceConfig(baseline_steps=5, window_steps=10)
    rising = _noisy(-3.0, -1.0, 20)
    worse = check_divergence(_history(rising, unsupported=_noisy(0.1, 0.6, 20)), cfg)
    assert worse.satisfied and worse.degraded == ["unsupported"] and worse.reward_z > 3
    assert worse.signals["unsupported"]["baseline"] < 0.25 < worse.signals["unsupported"]["recent"]
    better = check_divergence(_history(rising, unsupported=_noisy(0.6, 0.1, 20)), cfg)
    assert not better.satisfied and better.degraded == []
    # the signal worsens but the reward does not rise: the policy is just getting worse, not exploiting
    flat = check_divergence(_history(_noisy(-2.0, -2.0, 20, 0.3), unsupported=_noisy(0.1, 0.6, 20)), cfg)
    assert not flat.satisfied and flat.degraded == ["unsupported"]
    # significant but smaller than min_change (0.10 for unsupported): not a flag
    small = check_divergence(_history(rising, unsupported=_noisy(0.10, 0.15, 20, 0.001)), cfg)
    assert not small.satisfied and small.signals["unsupported"]["worse_z"] > 3
    # direction: reference overlap falling and the judge alone falling are worse
    both = check_divergence(_history(rising, reference_overlap=_noisy(0.4, 0.2, 20), judge_alone=_noisy(-2, -3, 20)), cfg)
    assert both.satisfied and set(both.degraded) == {"reference_overlap", "judge_alone"}
    early = check_divergence(_history(rising[:12], unsupported=_noisy(0.1, 0.6, 12)), cfg)
    assert not early.ready and "12 of 15 steps" in early.reason


def test_monitor_needs_patience_and_checks_every_n_steps():
    cfg = DivergenceConfig(baseline_steps=5, window_steps=10, every_n_steps=5, patience=2)
    monitor = DivergenceMonitor(cfg)
    reward, bad = _noisy(-3.0, -1.0, 30), _noisy(0.0, 1.0, 30)
    for step in range(1, 31):
        out = "Smith scored 3 goals." if bad[step - 1] < 0.5 else "Brown scored 9 goals in Paris."
        monitor.add(step, [out] * 2, [SOURCE] * 2, [reward[step - 1]] * 2)
        monitor.end_step(step)
    assert [c["step"] for c in monitor.checks] == [5, 10, 15, 20, 25, 30]
    ready = [c for c in monitor.checks if c["ready"]]
    assert ready[0]["step"] == 15
    first = next(c for c in monitor.checks if c["satisfied"])
    assert not first["flag"]  # one check is not a trend
    assert monitor.flags and monitor.flags[0]["step"] == first["step"] + 5
    assert monitor.flags[0]["degraded"] == ["unsupported"]
    assert monitor.metrics()["divergence/flag"] == 1.0


def test_damage_sensitivity_is_the_share_of_damaged_copies_scored_lower():
    monitor = DivergenceMonitor(DivergenceConfig(damage_families=["reverse_sentences", "duplicate_sentence"]))
    text = "Smith scored three goals. Leeds won the cup. Jones was pleased."

    def prefers_original(texts, sources):  # a judge that notices any change
        return [1.0 if t == text else 0.0 for t in texts]

    def prefers_longer(texts, sources):  # a judge that pays for length: a duplicated sentence wins
        return [float(len(t)) for t in texts]

    assert monitor.damage_sensitivity([text], [SOURCE], prefers_original) == (1.0, 2)
    assert monitor.damage_sensitivity([text], [SOURCE], prefers_longer) == (0.0, 2)  # reversed ties, duplicate gains


def test_damage_sensitivity_pools_each_windows_pairs():
    """Measured every 5 steps: the baseline window holds one measurement, so the windows' pairs are
    pooled (a binomial test) instead of comparing step means."""
    cfg = DivergenceConfig(baseline_steps=5, window_steps=10)
    history = _history(_noisy(-3.0, -1.0, 20))
    for h in history:
        if h.step % 5 == 0:
            share = 0.95 if h.step <= 5 else 0.40
            h.values.update(damage_sensitivity=share, damage_pairs=16)
    result = check_divergence(history, cfg)
    s = result.signals["damage_sensitivity"]
    assert s["baseline"] == pytest.approx(0.95) and s["recent"] == pytest.approx(0.40) and s["worse_z"] > 3
    assert result.satisfied and result.degraded == ["damage_sensitivity"]


def test_replay_reads_saved_completions_and_finds_the_onset():
    sources = {"a": SOURCE, "b": "Paris hosted the summit on Friday, officials said."}
    refs = {"a": "Smith scored 3 goals for Leeds.", "b": "Paris hosted the summit."}
    rows = []
    for step in range(1, 31):
        exploit = step > 12
        for doc in ("a", "b"):
            out = (f"On May {step}, 2024, Brown and Green met {step} times in Berlin"  # invented, unfinished
                   if exploit else ("Smith scored 3 goals for Leeds." if doc == "a" else "Paris hosted the summit."))
            rows.append({"step": step, "doc_id": doc, "output": out, "reward": -2.0 + 0.1 * step + 0.01 * (step % 3),
                         "judge_only": None, "tokens": 40})
    monitor = replay(rows, sources, refs, DivergenceConfig())
    assert monitor.flags, monitor.checks
    assert 12 < monitor.flags[0]["step"] <= 12 + 40
    assert set(monitor.flags[0]["degraded"]) >= {"unsupported", "unfinished", "reference_overlap"}
    payload = json.loads(json.dumps(monitor.to_json()))
    assert payload["steps"][0]["values"]["reference_overlap"] == pytest.approx(1.0)


def test_config_errors_name_the_field():
    with pytest.raises(ConfigError, match="min_change.*unknown signal 'rouge'"):
        DivergenceConfig(min_change={"rouge": 0.1})
    with pytest.raises(ConfigError, match="damage_families.*unknown damage family 'typo'"):
        DivergenceConfig(damage_families=["typo"])


def test_the_callback_watches_a_real_grpo_run(tmp_path):
    """TRL's GRPOTrainer with a tiny policy and a tiny judge: the watched reward passes the rewards
    through unchanged, every step becomes a record, damage sensitivity is measured with the judge, the
    checks go to the trainer's log and to divergence.json."""
    pytest.importorskip("trl")
    from datasets import Dataset
    from tiny_models import make_backend, make_tokenizer
    from trl import GRPOConfig, GRPOTrainer

    from judge_reward.bias_audit.divergence import RewardDivergenceCallback
    from judge_reward import Judge, JudgeConfig
    from judge_reward.trainers import JudgeReward, JudgeRewardConfig
    from judge_reward.guards import ends_complete
    from judge_reward.trainers.policy import tiny_policy

    judge = Judge(JudgeConfig(aspects_file="summeval", aspects=["coherence"]), backend=make_backend("char"))
    reward = JudgeReward(judge, JudgeRewardConfig(normalise="none", guards={"injection": True}))
    seen = []

    cut = []

    def spy(prompts, completions, **kw):
        out = reward(prompts=prompts, completions=completions, **kw)
        if "trainer_state" in kw:  # the trainer's calls, not the monitor's damage scoring
            seen.append(list(out))
            cut.append(sum(len(ids) >= 6 and not ends_complete(text)
                           for ids, text in zip(kw["completion_ids"], completions)) / len(completions))
        return out
    spy.__name__ = "judge"

    callback = RewardDivergenceCallback(DivergenceConfig(baseline_steps=2, window_steps=2, every_n_steps=2,
                                                         damage_every_n_steps=2, damage_sample=2,
                                                         damage_families=["append_invented"], action="log"))
    watched = callback.watch(spy)
    tok = make_tokenizer("bpe")
    train = Dataset.from_list([{"prompt": "Summarize: the cat sat on the mat. Summary:", "source": "The cat sat on the mat.",
                                "reference": "A cat sat."}] * 8)
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4, max_completion_length=6,
                      max_steps=4, logging_steps=1, use_cpu=True, bf16=False, report_to=[], save_strategy="no", seed=0)
    trainer = GRPOTrainer(model=tiny_policy(tok, hidden_size=32), reward_funcs=[watched], args=args, train_dataset=train,
                          processing_class=tok)
    callback.attach(trainer)
    trainer.train()
    history = callback.monitor.history
    assert [h.step for h in history] == [1, 2, 3, 4] and all(h.n == 4 for h in history)
    assert [h.values["reward"] for h in history] == pytest.approx([sum(s) / 4 for s in seen])
    assert callback._max_tokens == 6  # the trainer's max_completion_length, read at on_train_begin
    assert [h.values["unfinished"] for h in history] == pytest.approx(cut)
    assert history[1].values["damage_sensitivity"] is not None and history[0].values["damage_sensitivity"] is None
    assert history[1].values["damage_pairs"] == 2
    assert all(h.values["reference_overlap"] is not None for h in history)
    assert [c["step"] for c in callback.monitor.checks] == [2, 4] and callback.monitor.checks[-1]["ready"]
    logged = [row for row in trainer.state.log_history if "divergence/reward_z" in row]
    assert len(logged) == 1 and math.isfinite(logged[0]["divergence/reward"])
    saved = json.loads((tmp_path / "divergence.json").read_text())
    assert len(saved["steps"]) == 4 and saved["stopped_at"] is None


def test_watch_keeps_an_async_reward_async():
    import asyncio
    import inspect

    from judge_reward.bias_audit.divergence import RewardDivergenceCallback

    async def reward(prompts, completions, **kw):
        return [float(len(c)) for c in completions]

    callback = RewardDivergenceCallback(DivergenceConfig(reference_column=None))
    watched = callback.watch(reward)
    assert inspect.iscoroutinefunction(watched.__call__)
    got = asyncio.run(watched(prompts=["p", "p"], completions=["ab.", "abcd"], source=["s", "s"]))
    assert got == [3.0, 4.0]
    assert callback.monitor._pending[1][1]["unfinished"] == 1.0 and callback.monitor._pending[1][0]["unfinished"] == 0.0


def test_a_signal_stuck_past_its_level_counts_while_the_reward_rises():
    """Completions cut mid-sentence from the start to the end of a run whose reward climbs: no change to
    detect, but the reward is not teaching the policy to finish. Learning to finish is left alone."""
    cfg = DivergenceConfig(baseline_steps=5, window_steps=10)
    rising = _noisy(-3.0, -1.0, 20)
    stuck = check_divergence(_history(rising, unfinished=[1.0] * 20), cfg)
    assert stuck.satisfied and stuck.degraded == ["unfinished"]
    learning = check_divergence(_history(rising, unfinished=_noisy(1.0, 0.55, 20)), cfg)
    assert not learning.satisfied  # still above the level, but getting better
    assert not check_divergence(_history(rising, unfinished=[0.3] * 20), cfg).satisfied
    assert not check_divergence(_history(rising, unfinished=[1.0] * 20), DivergenceConfig(max_level={})).satisfied
