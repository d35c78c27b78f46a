"""The judge as a TRL reward: the reward function itself, and real GRPO / RLOO runs (TRL 1.16).

Policies are tiny random Llamas with the BPE tokenizer of tests/tiny_models.py; the judge is a tiny
random judge (scores are meaningless, the plumbing is what is tested). W&B runs offline and the
tests read back the files it writes.
"""

import asyncio
import json
import math
import pickle
import time

import pandas as pd
import pytest
import torch
from datasets import Dataset
from tiny_models import make_backend, make_tokenizer

from judge_reward import ConfigError, Item, Judge, JudgeConfig
from judge_reward.trainers.policy import CHAT_TEMPLATE, tiny_policy
from judge_reward.trainers.reward import AsyncJudgeReward, JudgeReward, JudgeRewardConfig, message_text
from tests.doubles.faulty_backend import FaultyBackend
from wandb_offline import finish_run, read_history

trl = pytest.importorskip("trl")
pytestmark = pytest.mark.skipif(not trl.__version__.startswith("1.16"), reason="pinned to TRL 1.16 (see .venv-trl112 for PPO)")

SOURCES = [
    "The council met on Tuesday and approved the new budget for the city.",
    "A cat sat on the mat while the news article reported on the weather.",
]


def tiny_judge(method="gptscore", aspects=("coherence",), fails=None, cache=True):
    backend = make_backend("char")
    if fails is not None:
        backend = FaultyBackend(backend, fails)
    config = JudgeConfig(aspects_file="summeval", aspects=list(aspects), method=method,
                         cache={"memory": cache and fails is None})
    return Judge(config, backend=backend)


def policy_and_tokenizer():
    tok = make_tokenizer("bpe")
    tok.chat_template = CHAT_TEMPLATE
    return tiny_policy(tok, hidden_size=32), tok


def dataset(n=8, conversational=False):
    rows = []
    for i in range(n):
        src = SOURCES[i % 2]
        prompt = f"Summarize: {src} Summary:"
        rows.append({"prompt": [{"role": "user", "content": prompt}] if conversational else prompt, "source": src})
    return Dataset.from_list(rows)


@pytest.fixture
def wandb_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_PROJECT", "judge-reward-tests")
    yield tmp_path / "wandb"
    import wandb

    if wandb.run is not None:
        wandb.finish()
    wandb.teardown()  # the next test's WANDB_DIR must be read afresh


# -- the reward function on its own ----------------------------------------------------------------


def test_standard_and_conversational_formats_give_the_same_rewards():
    judge = tiny_judge()
    reward = JudgeReward(judge, JudgeRewardConfig(normalise="none"))
    completions = ["The council approved the budget.", "The cat sat."]
    prompts = [f"Summarize: {s}" for s in SOURCES]
    plain = reward(prompts=prompts, completions=completions, source=SOURCES)
    chat = reward(
        prompts=[[{"role": "user", "content": p}] for p in prompts],
        completions=[[{"role": "assistant", "content": c}] for c in completions],
        source=SOURCES,
    )
    direct = judge.score([Item(c, s) for c, s in zip(completions, SOURCES)])
    assert plain == chat == pytest.approx([r["coherence"].value for r in direct])
    assert reward.__name__ == "judge_coherence"
    # without a source column the prompt (a chat prompt's last user message) is the source
    no_col = reward(prompts=[[{"role": "system", "content": "x"}, {"role": "user", "content": SOURCES[0]}]],
                    completions=["The council approved the budget."])
    assert no_col == pytest.approx([judge.score([Item("The council approved the budget.", SOURCES[0])])[0]["coherence"].value])
    assert message_text([{"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}], "c") == "ab"


def test_normalisations_for_gptscore_and_geval():
    completions, prompts = ["The council approved the budget."], ["p"]
    judge = tiny_judge("gptscore")
    raw = JudgeReward(judge, JudgeRewardConfig(normalise="none"))(prompts=prompts, completions=completions, source=SOURCES[:1])[0]
    assert raw < 0  # a mean token log-prob
    unit = JudgeReward(judge, JudgeRewardConfig(normalise="unit"))(prompts=prompts, completions=completions, source=SOURCES[:1])[0]
    scale = JudgeReward(judge, JudgeRewardConfig(normalise="scale"))(prompts=prompts, completions=completions, source=SOURCES[:1])[0]
    assert unit == pytest.approx(math.exp(raw))
    assert scale == pytest.approx(1 + 4 * math.exp(raw))  # coherence is rated 1-5
    gjudge = tiny_judge("geval")
    graw = JudgeReward(gjudge, JudgeRewardConfig(normalise="none"))(prompts=prompts, completions=completions, source=SOURCES[:1])[0]
    gunit = JudgeReward(gjudge, JudgeRewardConfig(normalise="unit"))(prompts=prompts, completions=completions, source=SOURCES[:1])[0]
    assert 1 <= graw <= 5 and gunit == pytest.approx((graw - 1) / 4)
    assert JudgeReward(gjudge, JudgeRewardConfig(normalise="scale"))(prompts=prompts, completions=completions, source=SOURCES[:1])[0] == pytest.approx(graw)


def test_a_reference_based_judge_reads_the_reference_column():
    """GPTScore's reference directions in training: the dataset's ``reference`` column reaches the
    judge, and a row without one is a counted None, not a score against nothing."""
    backend = make_backend("char")
    judge = Judge(JudgeConfig(aspects_file="summeval", aspects=["coherence"], method="gptscore",
                              gptscore={"direction": "ref_hypo"}), backend=backend)
    reward = JudgeReward(judge, JudgeRewardConfig(normalise="none"))
    refs = ["The council passed the budget.", "A cat was on the mat."]
    got = reward(prompts=["p", "q"], completions=["The council approved the budget.", "The cat sat."],
                 source=SOURCES, reference=refs)
    direct = judge.score([Item("The council approved the budget.", SOURCES[0], refs[0]),
                          Item("The cat sat.", SOURCES[1], refs[1])])
    assert got == pytest.approx([r["coherence"].value for r in direct])
    # the reference, not the source, is what the output was scored against
    swapped = reward(prompts=["p"], completions=["The council approved the budget."], source=SOURCES[:1], reference=refs[1:])
    assert swapped[0] != pytest.approx(got[0])
    missing = reward(prompts=["p"], completions=["The council approved the budget."], source=SOURCES[:1])
    assert missing == [None]
    assert any("needs a reference" in reason for reason in reward.failures)


def test_weighted_aspects_and_partial_failures():
    completions = ["The council approved the budget.", "Cats."]
    judge = tiny_judge("geval", aspects=("coherence", "fluency"))
    scores = judge.score([Item(c, s) for c, s in zip(completions, SOURCES)])
    reward = JudgeReward(judge, JudgeRewardConfig(weights={"coherence": 3, "fluency": 1}, normalise="none"))
    got = reward(prompts=["p", "p"], completions=completions, source=SOURCES)
    want = [0.75 * s["coherence"].value + 0.25 * s["fluency"].value for s in scores]
    assert got == pytest.approx(want) and reward.__name__ == "judge"
    # the fluency judgment of "Cats." fails: partial=fail -> None, partial=renormalise -> coherence alone
    faulty = tiny_judge("geval", aspects=("coherence", "fluency"), fails=lambda k, text: "Cats." in text and "- Fluency:" in text)
    strict = JudgeReward(faulty, JudgeRewardConfig(normalise="none"))
    assert strict(prompts=["p", "p"], completions=completions, source=SOURCES)[1] is None
    assert strict.failures == {"fluency: injected fault: server error": 1}
    lenient = JudgeReward(faulty, JudgeRewardConfig(normalise="none", partial="renormalise"))
    out = lenient(prompts=["p", "p"], completions=completions, source=SOURCES)
    assert out == pytest.approx([want[0], scores[1]["coherence"].value], rel=1e-3)


def test_bad_configuration_names_the_field_and_value():
    judge = tiny_judge()
    with pytest.raises(ConfigError, match=r"reward.normalise: unknown value 'zscore'"):
        JudgeRewardConfig(normalise="zscore")
    with pytest.raises(ConfigError, match=r"reward.weights.coherence: expected a non-negative number, got -1"):
        JudgeRewardConfig(weights={"coherence": -1})
    with pytest.raises(ConfigError, match=r"reward.weights: aspect\(s\) \['fluency'\] are not among"):
        JudgeReward(judge, JudgeRewardConfig(weights={"fluency": 1.0}))
    with pytest.raises(ConfigError, match=r"aspects: unknown aspect 'nope'"):
        JudgeReward(judge, JudgeRewardConfig(aspects=["nope"]))
    reward = JudgeReward(judge)
    with pytest.raises(ValueError, match=r"source: 1 values for 2 completions"):
        reward(prompts=["a", "b"], completions=["x", "y"], source=["only one"])
    with pytest.raises(TypeError, match=r"completions\[1\]: expected text or a list of chat messages, got int"):
        reward(prompts=["a", "b"], completions=["x", 3])
    strict = JudgeReward(judge, JudgeRewardConfig(source_from_prompt=False, source_column="article"))
    with pytest.raises(ValueError, match=r"reward.source_column: the batch has no column 'article'"):
        strict(prompts=["a"], completions=["x"], source=["s"])


def test_a_guard_that_compares_with_the_source_never_falls_back_to_the_prompt_silently():
    """Without a source column the judge may read the prompt, but a guard that compares the completion
    with its source (here grounding and length's ratio) refuses, naming them, unless the config
    says the prompt is the source; guards that read only the completion need nothing."""
    judge = tiny_judge()
    guarded = {"grounding": {"enabled": True}, "length": {"enabled": True}, "repetition": {"enabled": True}}
    implicit = JudgeReward(judge, JudgeRewardConfig(guards=guarded))
    with pytest.raises(ValueError, match=r"reward: length, grounding compare the completion with its source, "
                                         r"and the batch has no column 'source'.*source_from_prompt=True"):
        implicit(prompts=["What is the capital of France?"], completions=["Paris is the capital of France."])
    explicit = JudgeReward(judge, JudgeRewardConfig(guards=guarded, source_from_prompt=True))
    [value] = explicit(prompts=["What is the capital of France?"], completions=["Paris is the capital of France."])
    assert value is not None
    output_only = JudgeReward(judge, JudgeRewardConfig(guards={"repetition": {"enabled": True},
                                                              "length": {"enabled": True, "max_source_ratio": None,
                                                                         "max_words": 50}}))
    [value] = output_only(prompts=["What is the capital of France?"], completions=["Paris is the capital of France."])
    assert value is not None
    assert implicit(prompts=["q"], completions=["An answer of some words here."], source=["q"])[0] is not None


def test_failures_become_none_and_are_counted_through_log_metric():
    judge = tiny_judge(fails=lambda k, text: "FAIL" in text)
    reward = JudgeReward(judge)
    logged, extra = {}, {}
    out = reward(prompts=["p"] * 3, completions=["fine text", "FAIL here", ""], source=[SOURCES[0]] * 3,
                 log_metric=lambda n, v: logged.setdefault(n, []).append(v),
                 log_extra=lambda c, v: extra.setdefault(c, v))
    assert out[0] is not None and out[1] is None and out[2] is None  # never 0
    assert reward.failures == {"injected fault: server error": 1, "output: empty text cannot be judged": 1}
    assert logged["rewards/judge_coherence/failures"] == [2.0]
    assert logged["rewards/judge_coherence/failure_rate"] == [pytest.approx(2 / 3)]
    assert logged["judge/coherence/failures"] == [2.0] and logged["judge/latency_s"][0] > 0
    assert extra["judge_coherence failure"] == [None, "injected fault: server error", "output: empty text cannot be judged"]
    assert extra["judge/coherence (gptscore)"][1] is None


def test_a_row_the_judge_failed_on_is_none_from_every_per_aspect_function_the_guards_included():
    """With a guard on, per_aspect adds judge_guards; a row whose every aspect failed must be None
    there too, or TRL (nansum) would train on it with reward -penalty (0.0 when no guard charged)."""
    judge = tiny_judge(aspects=("coherence", "fluency"), fails=lambda k, text: "FAIL" in text)
    funcs = JudgeReward.per_aspect(judge, JudgeRewardConfig(normalise="unit", guards={"ending": True}))
    assert [f.__name__ for f in funcs] == ["judge_coherence", "judge_fluency", "judge_guards"]
    kwargs = dict(prompts=["p"] * 3, completions=["A fine summary.", "FAIL all of it.", "FAIL no ending"], source=[SOURCES[0]] * 3)
    coherence, fluency, guards = (f(**kwargs) for f in funcs)
    assert coherence[0] is not None and fluency[0] is not None and guards[0] == 0.0
    assert coherence[1:] == fluency[1:] == [None, None]
    assert guards[1:] == [None, None]  # was [-0.0, -1.0]: a finite reward for a row nobody judged
    assert funcs[2].failures == {"coherence: injected fault: server error": 2}
    logged = {}  # the guards function logs what each guard charged, though it reuses the batch
    funcs[2](**kwargs, log_metric=lambda key, value: logged.setdefault(key, value))
    assert logged["judge/guard/ending/penalty"] == pytest.approx(1 / 3) and logged["judge/guard/ending/rate"] == pytest.approx(1 / 3)


def test_grpo_groups_share_their_prompt_prefix_in_one_judge_call(monkeypatch):
    judge = tiny_judge()
    backend = judge.backend
    shared_runs, calls = [], []
    run_shared, score_rows = backend._run_shared, backend.score_rows

    def spy_shared(rows, members, cut, results, bar):
        shared_runs.append((cut, len(members)))
        return run_shared(rows, members, cut, results, bar)

    def spy_rows(rows, groups=None):
        calls.append(len(rows))
        return score_rows(rows, groups)

    monkeypatch.setattr(backend, "_run_shared", spy_shared)
    monkeypatch.setattr(backend, "score_rows", spy_rows)
    reward = JudgeReward(judge)
    long_sources = [s * 4 for s in SOURCES]  # long enough for the backend to share (>= 32 tokens)
    G = 4
    sources = [long_sources[0]] * G + [long_sources[1]] * G  # GRPO: a prompt's G completions are consecutive
    completions = [f"summary number {i}" for i in range(2 * G)]
    reward(prompts=["p"] * 2 * G, completions=completions, source=sources)
    assert calls == [2 * G]  # one backend pass for the whole batch
    assert len(shared_runs) == 2 and all(n == G for _, n in shared_runs)  # the prefix ran once per group


def test_per_aspect_functions_share_one_judge_call():
    judge = tiny_judge(aspects=("coherence", "fluency"))
    funcs = JudgeReward.per_aspect(judge, JudgeRewardConfig(normalise="none"))
    assert [f.__name__ for f in funcs] == ["judge_coherence", "judge_fluency"]
    kwargs = dict(prompts=["p", "p"], completions=["one text", "another text"], source=SOURCES)
    a = funcs[0](**kwargs)
    b = funcs[1](**kwargs)
    assert judge.calls == 1
    direct = judge.score([Item("one text", SOURCES[0]), Item("another text", SOURCES[1])])
    assert a == pytest.approx([d["coherence"].value for d in direct])
    assert b == pytest.approx([d["fluency"].value for d in direct])
    with pytest.raises(ConfigError, match="reward.weights: per-aspect rewards are weighted by TRL's reward_weights"):
        JudgeReward.per_aspect(judge, JudgeRewardConfig(weights={"coherence": 1}))


def test_reward_functions_are_picklable_and_work_after_unpickling(tmp_path):
    """Reward classes are picklable (multiprocessing, deep copies, checkpointing a trainer's pieces):
    the locks, sqlite connection and HTTP clients inside are made afresh by the copy."""
    from tests.doubles.fake_openai import FakeOpenAIServer, FakeServerConfig

    config = JudgeConfig(aspects_file="summeval", aspects=["coherence", "fluency"], method="gptscore",
                         cache={"memory": True, "path": str(tmp_path / "cache.sqlite")})
    judge = Judge(config, backend=make_backend("char"))
    kwargs = dict(prompts=["p", "p"], completions=["one text", "another text"], source=SOURCES)
    single = JudgeReward(judge, JudgeRewardConfig(normalise="none"))
    want = single(**kwargs)
    copy = pickle.loads(pickle.dumps(single))
    assert copy(**kwargs) == pytest.approx(want) and copy.__name__ == "judge"
    funcs = pickle.loads(pickle.dumps(JudgeReward.per_aspect(judge, JudgeRewardConfig(normalise="none"))))
    assert funcs[0].scorer is funcs[1].scorer  # the copies still share one judge call per batch
    calls = funcs[0].judge.calls
    assert funcs[0](**kwargs) is not None and funcs[1](**kwargs) is not None
    assert funcs[0].judge.calls == calls + 1
    assert asyncio.run(pickle.loads(pickle.dumps(AsyncJudgeReward(judge, JudgeRewardConfig(normalise="none"))))(**kwargs)) \
        == pytest.approx(want)
    with FakeOpenAIServer(FakeServerConfig()) as server:
        api = Judge(JudgeConfig(aspects_file="summeval", aspects=["coherence"], method="gptscore",
                                backend={"kind": "openai", "base_url": server.base_url, "api_key": "x",
                                         "model": "fake-model", "max_retries": 0}))
        reward = AsyncJudgeReward(api)
        first = asyncio.run(reward(prompts=["p"], completions=["a fine summary"], source=[SOURCES[0]]))
        again = asyncio.run(pickle.loads(pickle.dumps(reward))(prompts=["p"], completions=["a fine summary"], source=[SOURCES[0]]))
        assert first[0] is not None and again == pytest.approx(first)


# -- GRPO -------------------------------------------------------------------------------------------


def test_grpo_trains_with_the_judge_and_leaves_failed_rows_out_of_the_baseline(tmp_path, wandb_offline):
    from trl import GRPOConfig, GRPOTrainer

    model, tok = policy_and_tokenizer()
    judge = tiny_judge(aspects=("coherence", "fluency"), fails=lambda k, text: k == 0)  # first row of every batch
    reward = JudgeReward(judge, JudgeRewardConfig(normalise="unit"))
    args = GRPOConfig(
        output_dir=str(tmp_path / "grpo"), per_device_train_batch_size=8, num_generations=4, max_completion_length=8,
        max_steps=2, logging_steps=1, learning_rate=1e-3, use_cpu=True, bf16=False, report_to=["wandb"],
        log_completions=True, num_completions_to_print=0, save_strategy="no", seed=0, scale_rewards="group",
    )
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=dataset(), processing_class=tok)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer.train()
    assert trainer.state.global_step == 2
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())  # the policy moved
    rows = [r for r in trainer.state.log_history if "rewards/judge/mean" in r]
    assert len(rows) == 2
    for r in rows:
        assert 0 < r["rewards/judge/mean"] <= 1 and math.isfinite(r["reward"])
        assert r["rewards/judge/failures"] == 1.0  # the injected failure, counted
        assert r["judge/latency_s"] > 0 and "judge/coherence/mean" in r and "judge/fluency/mean" in r
    assert reward.failures == {"coherence: injected fault: server error": 2}

    # TRL 1.16: a None reward is NaN, left out of its group's mean/std, and its advantage is 0
    table = pd.read_parquet(tmp_path / "grpo" / "completions" / "completions_00001.parquet")
    assert table["judge failure"].iloc[0] == "coherence: injected fault: server error"
    assert math.isnan(table["judge"].iloc[0]) and table["advantage"].iloc[0] == 0.0
    group = table["judge"].iloc[:4].to_numpy()
    scored = group[1:]
    expected = (scored - scored.mean()) / (scored.std(ddof=1) + 1e-4)
    assert table["advantage"].iloc[1:4].to_numpy() == pytest.approx(expected, rel=1e-3, abs=1e-4)
    assert {"judge/coherence (gptscore)", "judge/fluency (gptscore)"} <= set(table.columns)

    run = finish_run()
    history = read_history(run)
    logged = {k for row in history for k in row}
    assert {"train/judge/latency_s", "train/rewards/judge/mean", "train/rewards/judge/failures",
            "train/judge/coherence/mean"} <= logged
    tables = sorted((run / "files" / "media" / "table").glob("completions_*.table.json"))
    assert tables and "judge/coherence (gptscore)" in json.loads(tables[0].read_text())["columns"]


def test_two_judges_on_the_same_aspect_keep_their_own_metrics_and_table_columns(tmp_path):
    """Two named rewards of one method and aspect (e.g. two judge models): each logs under its own
    name. They shared one column, in which TRL's bounded log kept only the later function's values,
    and their metrics were averaged into one."""
    from trl import GRPOConfig, GRPOTrainer

    model, tok = policy_and_tokenizer()
    first = JudgeReward(tiny_judge(), JudgeRewardConfig(name="judge_a", normalise="none"))
    second = JudgeReward(tiny_judge(method="geval"), JudgeRewardConfig(name="judge_b", normalise="unit"))
    third = JudgeReward(tiny_judge(), JudgeRewardConfig(name="judge_c", normalise="unit"))
    args = GRPOConfig(
        output_dir=str(tmp_path / "grpo"), per_device_train_batch_size=4, num_generations=4, max_completion_length=6,
        max_steps=1, logging_steps=1, use_cpu=True, bf16=False, report_to=[], log_completions=True,
        num_completions_to_print=0, save_strategy="no", seed=0,
    )
    trainer = GRPOTrainer(model=model, reward_funcs=[first, second, third], args=args, train_dataset=dataset(4),
                          processing_class=tok)
    trainer.train()
    table = pd.read_parquet(tmp_path / "grpo" / "completions" / "completions_00001.parquet")
    assert len(table) == 4
    assert {"judge_a/coherence (gptscore)", "judge_b/coherence (geval)", "judge_c/coherence (gptscore)"} <= set(table.columns)
    # the same raw judge value, reward normalised differently: the columns are each function's own
    assert table["judge_a/coherence (gptscore)"].tolist() == pytest.approx(table["judge_c/coherence (gptscore)"].tolist())
    assert table["judge_a"].tolist() != pytest.approx(table["judge_c"].tolist())
    row = next(r for r in trainer.state.log_history if "rewards/judge_a/mean" in r)
    assert {"judge_a/latency_s", "judge_b/latency_s", "judge_c/coherence/mean"} <= set(row)


def grpo_with_a_correlation_probe(tmp_path, sample_data, logging_steps: int, report_to: list[str]):
    """A 2-step GRPO run whose CorrelationCallback probes 16 human-rated SummEval summaries of one
    article at every step (texts cut short: the tiny judge reads characters)."""
    from trl import GRPOConfig, GRPOTrainer

    from judge_reward.metaeval import load_summeval
    from judge_reward.trainers.callbacks import CorrelationCallback, CorrelationCallbackConfig

    model, tok = policy_and_tokenizer()
    judge = tiny_judge()
    probe = load_summeval(sample_data / "summeval" / "summeval.json").first_groups(1)
    for r in probe.records:
        object.__setattr__(r, "item", Item(r.item.output[:200], r.item.source[:300], r.item.reference, r.item.id))
    args = GRPOConfig(
        output_dir=str(tmp_path / "grpo"), per_device_train_batch_size=4, num_generations=4, max_completion_length=6,
        max_steps=2, logging_steps=logging_steps, use_cpu=True, bf16=False, report_to=report_to, save_strategy="no",
    )
    trainer = GRPOTrainer(model=model, reward_funcs=JudgeReward(judge), args=args, train_dataset=dataset(4),
                          processing_class=tok)
    cb = CorrelationCallback(judge, probe, CorrelationCallbackConfig(every_n_steps=1, at_train_begin=False,
                                                                     aspects=("coherence",))).attach(trainer)
    trainer.train()
    return trainer, cb


def test_grpo_with_the_correlation_probe_callback(tmp_path, wandb_offline, sample_data):
    trainer, cb = grpo_with_a_correlation_probe(tmp_path, sample_data, logging_steps=1, report_to=["wandb"])
    assert [step for step, _ in cb.history] == [1, 2]
    logged = [r for r in trainer.state.log_history if "metaeval/coherence/spearman" in r]
    assert len(logged) == 2 and all(-1 <= r["metaeval/coherence/spearman"] <= 1 for r in logged)
    assert any("rewards/judge_coherence/mean" in r for r in trainer.state.log_history)
    # the probe must not swallow the trainer's own row at the steps where it fires
    assert sum("loss" in r for r in trainer.state.log_history) == 2
    history = read_history(finish_run())
    assert any("train/metaeval/coherence/kendall" in row for row in history), sorted({k for r in history for k in r})


def test_the_correlation_callback_leaves_grpo_metrics_in_the_trainers_own_rows(tmp_path, sample_data):
    """GRPO averages its reward/judge metrics over logging_steps and logs them with the loss; a probe
    firing in between must not flush them into its own row."""
    trainer, _ = grpo_with_a_correlation_probe(tmp_path, sample_data, logging_steps=2, report_to=[])
    [own] = [r for r in trainer.state.log_history if "loss" in r]
    probes = [r for r in trainer.state.log_history if "metaeval/coherence/spearman" in r]
    assert [r["step"] for r in probes] == [1, 2]
    assert not any("reward" in r or "judge/latency_s" in r for r in probes)
    assert own["step"] == 2 and "rewards/judge_coherence/mean" in own and "judge/latency_s" in own


# -- RLOO -------------------------------------------------------------------------------------------


def test_rloo_with_one_geval_reward_per_aspect_and_conversational_prompts(tmp_path, wandb_offline):
    from trl import RLOOConfig, RLOOTrainer

    model, tok = policy_and_tokenizer()
    # the first completion of each batch fails on both aspects: G-Eval sends both aspects' rows (4
    # completions each, coherence first) in one backend call, so rows 0 and 4
    judge = tiny_judge("geval", aspects=("coherence", "fluency"), fails=lambda k, text: k % 4 == 0)
    funcs = JudgeReward.per_aspect(judge, JudgeRewardConfig(normalise="unit"))
    args = RLOOConfig(
        output_dir=str(tmp_path / "rloo"), per_device_train_batch_size=4, num_generations=2, max_completion_length=6,
        max_steps=2, logging_steps=1, learning_rate=1e-3, use_cpu=True, bf16=False, report_to=["wandb"],
        reward_weights=[2.0, 1.0], save_strategy="no", log_completions=True, num_completions_to_print=0, beta=0.05,
    )
    # saved to disk: RLOO (beta > 0) builds its reference model from the policy's path
    model.save_pretrained(tmp_path / "policy")
    tok.save_pretrained(tmp_path / "policy")
    trainer = RLOOTrainer(model=str(tmp_path / "policy"), reward_funcs=funcs, args=args,
                          train_dataset=dataset(8, conversational=True), processing_class=tok)
    trainer.train()
    assert trainer.state.global_step == 2
    rows = [r for r in trainer.state.log_history if "rewards/judge_coherence/mean" in r]
    assert len(rows) == 2
    for r in rows:
        assert 0 <= r["rewards/judge_coherence/mean"] <= 1 and 0 <= r["rewards/judge_fluency/mean"] <= 1
        assert 0 < r["judge/coherence/mass"] <= 1 and r["judge/coherence/entropy"] >= 0  # G-Eval health
        assert r["rewards/judge_coherence/failures"] == r["rewards/judge_fluency/failures"] == 1.0
        assert math.isfinite(r["reward"])
    assert judge.calls == 2  # one judge call per batch for both aspect functions
    run = finish_run()
    history = read_history(run)
    assert any("train/judge/fluency/mass" in row for row in history)
    # both functions failed on row 0: RLOO leaves it out of the leave-one-out baseline, advantage 0
    tables = (run / "files" / "media" / "table").glob("completions_*.table.json")
    first = json.loads(min(tables, key=lambda p: int(p.name.split("_")[1])).read_text())
    row = dict(zip(first["columns"], first["data"][0]))
    assert row["judge_coherence failure"] == "injected fault: server error" and row["advantage"] == 0.0
    assert row["judge_coherence"] is None or math.isnan(row["judge_coherence"])


# -- async rewards with an API judge ----------------------------------------------------------------


def test_async_rewards_run_concurrently_in_grpo_against_a_real_http_judge(tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    from tests.doubles.fake_openai import FakeOpenAIServer, FakeServerConfig

    spans: dict[str, list[tuple[float, float]]] = {}

    class Timed(AsyncJudgeReward):
        async def __call__(self, *args, **kwargs):
            start = time.perf_counter()
            out = await super().__call__(*args, **kwargs)
            spans.setdefault(self.__name__, []).append((start, time.perf_counter()))
            return out

    latency = 0.3
    with FakeOpenAIServer(FakeServerConfig(latency_s=latency)) as server:
        def api_judge(aspect):
            cfg = JudgeConfig(aspects_file="summeval", aspects=[aspect], method="gptscore",
                              backend={"kind": "openai", "base_url": server.base_url, "api_key": "x",
                                       "model": "fake-model", "max_retries": 0})
            return Judge(cfg)

        funcs = [Timed(api_judge("coherence")), Timed(api_judge("fluency"))]
        out = asyncio.run(funcs[0](prompts=["p"], completions=["a fine summary"], source=[SOURCES[0]]))
        assert out[0] is not None and 0 < out[0] <= 1  # exp(mean log-prob) from the server
        spans.clear()

        model, tok = policy_and_tokenizer()
        args = GRPOConfig(
            output_dir=str(tmp_path / "grpo"), per_device_train_batch_size=2, num_generations=2, max_completion_length=6,
            max_steps=2, logging_steps=1, use_cpu=True, bf16=False, report_to=[], save_strategy="no",
        )
        trainer = GRPOTrainer(model=model, reward_funcs=funcs, args=args, train_dataset=dataset(4), processing_class=tok)
        trainer.train()
    rows = [r for r in trainer.state.log_history if "rewards/judge_coherence/mean" in r]
    assert len(rows) == 2 and all(r["rewards/judge_fluency/failures"] == 0 for r in rows)
    assert all(r["judge/latency_s"] >= latency for r in rows)
    # TRL gathers the async functions of a batch: each step's coherence and fluency calls overlap in time
    assert len(spans["judge_coherence"]) == len(spans["judge_fluency"]) == 2
    for (a0, a1), (b0, b1) in zip(spans["judge_coherence"], spans["judge_fluency"]):
        assert max(a0, b0) < min(a1, b1)
