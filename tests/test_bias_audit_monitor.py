"""bias_audit: the self-reinforcement rule and the monitor inside real GRPO runs (trl GRPOTrainer)."""

import hashlib
import json
import math
import warnings

import numpy as np
import pytest
import torch

from judge_reward.bias_audit import (
    MonitorData,
    RuleConfig,
    SelfReinforcementCallback,
    SelfReinforcementConfig,
    SelfReinforcementWarning,
    check_rule,
)
from judge_reward.bias_audit.data import HeldOutArticle
from judge_reward.bias_audit.monitor import AgreementPair, AuditPoint, simulate_false_alarms
from wandb_offline import find_offline_runs, wait_for_offline_run
from judge_reward import Judge, JudgeConfig, Score, load_aspects
from tiny_models import make_backend, make_tokenizer

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# -- the rule ------------------------------------------------------------------------------------


def _history(gaps, agreements=None, n=16, noise=0.05, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.normal(size=n)
    out = []
    for k, g in enumerate(gaps):
        per = base - base.mean() + g + rng.normal(0, noise, n)
        out.append(AuditPoint(k, float(per.mean()), per.tolist(), None if agreements is None else agreements[k]))
    return out


def test_rule_fires_on_a_growing_gap_with_flat_agreement():
    rule = RuleConfig(window=4, min_rise_z=3.0)
    res = check_rule(_history([0.0, 0.2, 0.4, 0.6], [0.6, 0.6, 0.6, 0.6]), rule)
    assert res.ready and res.satisfied and res.rises == 3 and res.rise == pytest.approx(0.6, abs=0.05)
    assert res.agreement_gain == 0.0


def test_rule_does_not_fire_when_agreement_grows_with_the_gap():
    rule = RuleConfig(window=4, min_rise_z=3.0, max_agreement_gain=0.02)
    res = check_rule(_history([0.0, 0.2, 0.4, 0.6], [0.55, 0.58, 0.62, 0.66]), rule)
    assert res.ready and not res.satisfied and res.agreement_gain == pytest.approx(0.11)


def test_rule_needs_a_trend_not_a_jump_nor_noise():
    rule = RuleConfig(window=4, min_rise_z=3.0)  # min_rises defaults to 2 of 3
    jump = check_rule(_history([0.0, 0.0, 0.0, 0.6], noise=0.0), rule)  # a plateau, then one big rise
    assert jump.rise_z > 3 and jump.rises == 1 and not jump.satisfied
    flat = check_rule(_history([0.0, 0.0, 0.0, 0.0], noise=0.3), rule)
    assert not flat.satisfied
    early = check_rule(_history([0.0, 0.5, 1.0]), rule)
    assert not early.ready and not early.satisfied
    falling = check_rule(_history([0.6, 0.4, 0.2, 0.0]), rule)
    assert falling.rise_z < 0 and not falling.satisfied


def test_identical_policy_summaries_count_as_one_observation():
    """A collapsed policy writes one summary for every article: its articles all change by the same
    amount, which is one draw of the judge's taste, not sixteen (the SE would be 0 and z infinite)."""
    rule = RuleConfig(window=3, min_rise_z=3.0)
    hist = _history([0.0, 0.01, 0.02], noise=0.0)
    assert check_rule(hist, rule).satisfied  # without texts every article counts
    for k, point in enumerate(hist):
        point.texts = [f"the same summary {k}"] * 16
    res = check_rule(hist, rule)
    assert res.ready and not res.satisfied and "1 distinct" in res.reason


def test_rule_defaults_false_alarm_rate_and_power_by_simulation():
    """Defaults (window 6, z >= 3, 4 of 5 rises): a 20-audit run with no drift is flagged in about
    2.5% of runs (docs/bias_audit.md, 2000 runs); a drift of 0.3 noise SDs per audit is caught
    almost always."""
    rule = RuleConfig()
    assert (rule.window, rule.min_rise_z, rule.min_rises) == (6, 3.0, 4)
    runs = 400
    fa = simulate_false_alarms(rule, n_audits=20, n_articles=16, n_runs=runs, seed=1)
    assert fa <= 0.025 + 3 * math.sqrt(0.025 * 0.975 / runs)
    assert simulate_false_alarms(rule, n_audits=20, n_articles=16, n_runs=100, drift=0.3, seed=2) >= 0.95


def test_config_errors_name_the_field_and_value():
    with pytest.raises(ValueError, match="action: unknown value 'halt'"):
        SelfReinforcementConfig(action="halt")
    with pytest.raises(ValueError, match=r"rule: unknown field\(s\) \['windw'\]"):
        SelfReinforcementConfig(rule={"windw": 3})
    with pytest.raises(ValueError, match="rule.window: expected an integer >= 2 audits, got 1"):
        RuleConfig(window=1)
    with pytest.raises(ValueError, match=r"rule.min_rises: expected an integer in 0..2, got 5"):
        RuleConfig(window=3, min_rises=5)
    with pytest.raises(ValueError, match="prompt_template: must contain"):
        SelfReinforcementConfig(prompt_template="Summarise:")
    with pytest.raises(ValueError, match="every_n_steps: expected a positive integer, got 0"):
        SelfReinforcementConfig(every_n_steps=0)
    cfg = SelfReinforcementConfig.from_yaml("monitor")
    assert cfg.rule_config == RuleConfig()  # the shipped YAML states the defaults


def test_monitor_data_from_the_study(shared_data):
    cfg = SelfReinforcementConfig(data=str(shared_data / "zhang2023"), n_articles=16, agreement_pairs=20)
    data = MonitorData.from_config(cfg)
    assert len(data.articles) == 16 and len(data.pairs) == 20
    assert len({a.article_id for a in data.articles}) == 16
    pair_articles = {p.article for p in data.pairs}
    assert not pair_articles & {a.article for a in data.articles}  # the gap and agreement sets are disjoint
    assert MonitorData.from_config(cfg).articles[0].article_id == data.articles[0].article_id  # seeded
    with pytest.raises(ValueError, match="n_articles: 40 requested, the data has 33"):
        MonitorData.from_config(SelfReinforcementConfig(data=str(shared_data / "zhang2023"), n_articles=40))


# -- inside GRPO ---------------------------------------------------------------------------------


def _policy():
    """A tiny random Llama policy whose greedy summaries differ from article to article (a 2-layer,
    32-wide model at the default init writes the same text whatever the input)."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    tok = make_tokenizer("bpe")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         initializer_range=0.2)
    return AutoModelForCausalLM.from_config(config), tok


def _grpo(tmp_path, callbacks_for, max_steps=6, report_to="none"):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    model, tok = _policy()
    prompts = ["Summarize: the council met on Tuesday.", "Summarize: a cat sat on the mat."] * 8

    def reward_e(completions, **kwargs):  # our own simple reward: more letter e
        return [float(c.count("e")) for c in completions]

    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=4, max_completion_length=12,
        max_steps=max_steps, logging_steps=1, learning_rate=5e-3, beta=0.0, report_to=report_to, use_cpu=True,
        save_strategy="no", disable_tqdm=True, seed=0, bf16=False,
    )
    trainer = GRPOTrainer(model=model, reward_funcs=reward_e, args=args, train_dataset=Dataset.from_dict({"prompt": prompts}),
                          processing_class=tok)
    monitor = callbacks_for(trainer)
    monitor.attach(trainer)
    trainer.train()
    return trainer, monitor


def test_generation_is_greedy_and_leaves_the_policy_and_tokenizer_as_they_were():
    from judge_reward.bias_audit.monitor import generate_summaries

    model, tok = _policy()
    model.train()
    tok.padding_side = "right"
    tok.pad_token = None  # a tokenizer without a pad token borrows EOS for the batch, then gives it back
    articles = [a.article for a in _synthetic_data().articles]
    cfg = SelfReinforcementConfig(prompt_template="Summarize: {article}", max_new_tokens=6, generation_batch_size=4)
    first = generate_summaries(model, tok, articles, cfg)
    assert model.training and tok.padding_side == "right" and tok.pad_token is None
    assert generate_summaries(model, tok, articles, cfg) == first  # greedy: the audit adds no noise of its own
    assert len(first) == 6 and len(set(first)) > 1
    # Batch composition does not change a summary (left padding).
    single = generate_summaries(model, tok, articles[:1], SelfReinforcementConfig(
        prompt_template="Summarize: {article}", max_new_tokens=6, generation_batch_size=1))
    assert single == first[:1]


def _monitor_rows(trainer):
    return [h for h in trainer.state.log_history if "self_reinforcement/gap" in h]


def test_monitor_logs_its_figures_in_a_real_grpo_run_with_a_real_judge(tmp_path, offline_wandb, shared_data):
    """Tiny GRPO run, tiny real judge (G-Eval form filling), real Zhang et al. data, W&B offline."""
    judge = Judge(JudgeConfig(aspects_file="summeval", aspects=["coherence"], method="geval"),
                  backend=make_backend("char", max_length=2048))
    cfg = SelfReinforcementConfig(data=str(shared_data / "zhang2023"), every_n_steps=2, n_articles=3, agreement_pairs=3,
                                  max_article_tokens=48, max_new_tokens=10, action="log")

    def make(trainer):
        return SelfReinforcementCallback(judge, cfg)

    import wandb

    trainer, monitor = _grpo(tmp_path, make, max_steps=4, report_to=["wandb"])
    wandb.finish()
    rows = _monitor_rows(trainer)
    assert [r["step"] for r in rows] == [0, 2, 4]  # before training, then every 2 steps
    for r in rows:
        for key in ("gap", "gap_se", "policy_score", "human_score", "agreement", "policy_words", "human_words",
                    "flag", "judge_failures"):
            assert f"self_reinforcement/{key}" in r, key
        assert r["self_reinforcement/flag"] == 0.0
        assert 1.0 <= r["self_reinforcement/human_score"] <= 5.0
        assert r["self_reinforcement/gap"] == pytest.approx(r["self_reinforcement/policy_score"]
                                                            - r["self_reinforcement/human_score"], abs=1.0)
    # GRPO's own metrics are still logged at their steps, not swallowed by the monitor's log calls.
    assert sum("reward" in h for h in trainer.state.log_history) == 4
    history = json.loads((tmp_path / "out" / "self_reinforcement.json").read_text())
    assert [a["step"] for a in history["audits"]] == [0, 2, 4] and len(history["audits"][0]["per_article_gap"]) == 3
    for audit in history["audits"]:  # (c) reward vs length: defined once the policy's lengths vary
        corr = audit["score_length_corr"]
        assert corr is None or -1.0 <= corr <= 1.0
        assert audit["policy_words"] >= 0 and audit["human_words"] > 10
    runs = find_offline_runs(offline_wandb)
    assert len(runs) == 1

    def audits(run):
        return [h["train/global_step"] for h in run["history"] if "train/self_reinforcement/gap" in h]

    logged = wait_for_offline_run(runs[0], lambda run: len(audits(run)) >= 3)
    steps = audits(logged)
    assert steps == [0, 2, 4]
    first = next(h for h in logged["history"] if "train/self_reinforcement/gap" in h)
    assert first["train/self_reinforcement/gap"] == pytest.approx(rows[0]["self_reinforcement/gap"])


class DriftingJudge:
    """A synthetic judge whose taste for text that is not human-written grows with the training step.

    Scores are deterministic functions of the text (a hash gives each text its own noise); texts it
    knows as human-written (the audit's reference summaries and the Zhang et al. pair summaries) get
    no drift, so its agreement with people stays where it is, unless ``learns_people`` is set: then
    it also comes to agree with people's choices on the pairs as the steps go by.
    """

    def __init__(self, data: MonitorData, clock, drift=0.5, noise=0.05, learns_people=False):
        self.aspects = load_aspects("summeval").select(["coherence"])
        self.config = JudgeConfig(aspects=["coherence"], method="geval")
        self.clock, self.drift, self.noise = clock, drift, noise
        self.human = {h for a in data.articles for h in a.human_summaries}
        self.pairs = {}
        for k, p in enumerate(data.pairs):
            people_llm = p.preferences.count("llm") > p.preferences.count("human")
            self.pairs[p.human_summary] = (k, not people_llm)
            self.pairs[p.llm_summary] = (k, people_llm)
        self.learns_people = learns_people
        self.n_pairs = len(data.pairs)

    def _noise(self, text):
        h = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
        return self.noise * (2 * h - 1)

    def score(self, items, aspects=None, method=None):
        step = self.clock()
        out = []
        for it in items:
            value = 3.0 + self._noise(it.output)
            if it.output in self.pairs:
                k, people_pick = self.pairs[it.output]
                # Agrees with people on pair k once k < step (when learning), else on the even pairs.
                agrees = k < step if self.learns_people else k % 2 == 0
                value += 0.3 if people_pick == agrees else -0.3
            elif it.output not in self.human:
                value += self.drift * step
            out.append({"coherence": Score(value)})
        return out


def _synthetic_data():
    ends = ["cat", "mat", "council", "Tuesday", "news", "article"]
    articles = [HeldOutArticle(f"h{k}", f"Article {k}: the harbour reopened after the storm. Said the {ends[k]}",
                               [f"The harbour reopened after storm {k}.", f"Storm {k} is over; the harbour is open."])
                for k in range(6)]
    pairs = [AgreementPair(f"Pair article {k}.", f"Writer summary {k}.", f"Model summary {k}.",
                           ["human", "human", "llm"] if k % 3 else ["llm", "llm", "tie"]) for k in range(8)]
    return MonitorData(articles, pairs)


def _drift_monitor(action, drift=0.5, learns_people=False, rule=None):
    data = _synthetic_data()
    cfg = SelfReinforcementConfig(every_n_steps=1, action=action, rule=rule or {"window": 3},
                                  prompt_template="Summarize: {article}", max_article_tokens=32, max_new_tokens=8)

    def make(trainer):
        judge = DriftingJudge(data, lambda: trainer.state.global_step, drift=drift, learns_people=learns_people)
        return SelfReinforcementCallback(judge, cfg, data=data)

    return make


def test_drifting_judge_is_flagged_and_training_stops(tmp_path):
    with pytest.warns(SelfReinforcementWarning, match="self-reinforcement at step 2"):
        trainer, monitor = _grpo(tmp_path, _drift_monitor("stop"), max_steps=6)
    # Audits at steps 0, 1, 2: the window of 3 is full at step 2, the gap rose by ~1.0 with z >> 3.
    assert monitor.stopped_at == 2 and trainer.state.global_step == 2
    rows = _monitor_rows(trainer)
    assert [r["self_reinforcement/flag"] for r in rows] == [0.0, 0.0, 1.0]
    assert rows[-1]["self_reinforcement/gap"] - rows[0]["self_reinforcement/gap"] == pytest.approx(1.0, abs=0.1)
    assert rows[-1]["self_reinforcement/gap_rise_z"] > 3
    assert rows[-1]["self_reinforcement/agreement"] == rows[0]["self_reinforcement/agreement"]
    saved = json.loads((tmp_path / "out" / "self_reinforcement.json").read_text())
    assert saved["stopped_at"] == 2 and saved["flags"][0]["action"] == "stop"


def test_control_should_training_stop_is_set_by_the_stop_action():
    from transformers import TrainerControl, TrainerState, TrainingArguments

    data = _synthetic_data()
    step = {"now": 0}
    judge = DriftingJudge(data, lambda: step["now"])
    monitor = SelfReinforcementCallback(judge, SelfReinforcementConfig(every_n_steps=1, action="stop",
                                                                       rule={"window": 3}, max_new_tokens=4,
                                                                       history_file=None), data=data)
    model, tok = _policy()
    args = TrainingArguments(output_dir="/tmp/unused-bias-audit", report_to="none", use_cpu=True)
    state, control = TrainerState(), TrainerControl()
    with pytest.warns(SelfReinforcementWarning):
        for k in range(3):
            step["now"] = state.global_step = k
            monitor.on_step_end(args, state, control, model=model, processing_class=tok)
    assert control.should_training_stop is True
    assert [h["self_reinforcement/flag"] for h in state.log_history] == [0.0, 0.0, 1.0]  # no trainer: log_history directly


def test_warn_action_warns_and_training_runs_to_the_end(tmp_path):
    with pytest.warns(SelfReinforcementWarning):
        trainer, monitor = _grpo(tmp_path, _drift_monitor("warn"), max_steps=4)
    assert trainer.state.global_step == 4 and monitor.stopped_at is None
    assert [r["self_reinforcement/flag"] for r in _monitor_rows(trainer)] == [0.0, 0.0, 1.0, 1.0, 1.0]


def test_no_flag_without_drift_or_when_the_judge_also_learns_people(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", SelfReinforcementWarning)
        trainer, _ = _grpo(tmp_path / "a", _drift_monitor("stop", drift=0.0), max_steps=5)
        assert trainer.state.global_step == 5
        assert all(r["self_reinforcement/flag"] == 0.0 for r in _monitor_rows(trainer))
        # The gap grows as fast as before, but so does agreement with people: not flagged.
        trainer, _ = _grpo(tmp_path / "b", _drift_monitor("stop", learns_people=True), max_steps=5)
        rows = _monitor_rows(trainer)
        assert trainer.state.global_step == 5 and all(r["self_reinforcement/flag"] == 0.0 for r in rows)
        assert rows[-1]["self_reinforcement/gap"] - rows[0]["self_reinforcement/gap"] > 2.0
        assert rows[-1]["self_reinforcement/agreement"] > rows[0]["self_reinforcement/agreement"] + 0.2


def test_policy_and_human_scores_are_the_two_sides_of_the_gap(monkeypatch):
    """docs/bias_audit.md: policy_score and human_score are the two sides of the gap, also when
    articles have different numbers of human summaries."""
    from judge_reward.bias_audit import monitor as mon

    class WordCountJudge:
        aspects = load_aspects("summeval").select(["coherence"])
        config = JudgeConfig(aspects=["coherence"], method="geval")

        def score(self, items, aspects=None, method=None):
            return [{"coherence": Score(float(len(it.output.split())))} for it in items]

    arts = [HeldOutArticle("a1", "Article one.", ["one", "one two three four five six seven"]),
            HeldOutArticle("a2", "Article two.", ["w " * 14])]
    data = MonitorData(arts, [AgreementPair("Article one.", "one", "llm words here", ["human", "llm"])])
    monitor = SelfReinforcementCallback(WordCountJudge(), SelfReinforcementConfig(), data=data)
    monkeypatch.setattr(mon, "generate_summaries", lambda model, tok, articles, cfg: ["p p p"] * len(articles))
    m = monitor.measure(None, None, 0).metrics
    assert m["gap"] == pytest.approx(((3 - 4) + (3 - 14)) / 2)
    assert m["policy_score"] - m["human_score"] == pytest.approx(m["gap"])
