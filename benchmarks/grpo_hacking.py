"""Which exploit does an unguarded judge reward teach, and does the guarded reward avoid it?

A real GRPO run (TRL ``GRPOTrainer``) on CPU: the SmolLM2-135M-Instruct policy summarises SummEval
articles (conversational prompt, article cut to ``--max-source-words`` words) and is rewarded by
``judge_reward.trainers.reward.JudgeReward`` built from a judge config (default: GPTScore with the embedded
Gemma 3 270M), either with every guard off (``--guards off``) or with the config's own guards
(``--guards on``). Both rewards are computed on every batch (the one not trained on as a shadow, from
the judge's cache), so each run shows what the other reward would have said about the same text.

Per step (``docs/grpo_hacking/<run>/metrics.jsonl``): reward mean/std, the trained and the shadow
reward, judge-only score (aspect mean, no penalty), guard penalties, completion length (words,
tokens, share cut at the length limit), copy rate (share of completion word 4-grams found in the
article), novel bigram share, repetition (share of repeated word 3-grams; and of content words past a
word's second use, ``overused``), numbers the article does not give, judge seconds / step
seconds, and the self-reinforcement monitor's audits. Completions of the first and last steps and
greedy completions of held-out eval articles before and after training go to ``completions.md``;
every training completion to ``completions.jsonl`` (for ``benchmarks/monitor_replay.py``). The
reward divergence monitor (``judge_reward.bias_audit.divergence``, ``--divergence on``) watches the trained reward
online; its checks go to ``summary.json``.

Train articles: SummEval documents 0-79 (file order of distinct doc_id); eval articles: 80-99
(the first ``--eval-articles`` of them are generated greedily before and after training).

    PYTHONPATH=. HF_HUB_OFFLINE=1 WANDB_MODE=offline TOKENIZERS_PARALLELISM=false \\
        python benchmarks/grpo_hacking.py --guards off --max-steps 100
    python benchmarks/grpo_hacking.py --smoke            # 2 steps, small settings, ~1 minute
    python benchmarks/grpo_hacking.py --plot             # plots from the saved runs' metrics.jsonl

The runs saved under docs/grpo_hacking keep summary.json, judge.yaml and completions.md; ``--plot`` and the
per-step tables of ``--report`` need their metrics.jsonl back from git history (``METRICS_COMMIT``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROMPT = "Summarise this news article in 2-3 sentences:\n\n{article}"
# The requests a run can train on (--prompt): runs 1-24 used "summarise"; the other two are how a
# chat user asks, and draw a chat assistant's wrapping from the policy more often
# (experiments/chatter_coverage.py).
PROMPTS = {
    "summarise": PROMPT,
    "chat": "Can you write a short summary of the following news story for me?\n\n{article}",
    "points": "What are the main points of this article?\n\n{article}",
}
RUNS = {"off": "unguarded", "on": "guarded"}
SAVED_RUNS = ["unguarded", "guarded", "guarded_shipped", "guarded_shipped_v2", "guarded_copy4", "guarded_copy_credit", "guarded_contrast", "guarded_information", "guarded_information_total", "guarded_information_fluency", "guarded_information_kl", "information_long", "unguarded_kl", "default_seed1", "geval_guarded", "geval_unguarded", "gptscore_as_shipped", "default_seed2", "default_redteam", "default_budgetfloor", "geval_shipped", "geval_word_uses", "default_grounded", "default_chatter", "default_per_token", "default_wrapping_policy", "default_lift", "default_lift_seed1"]
"""The runs docs/grpo_hacking.md reports, in its order (``--plot``/``--report`` take ``--runs``)."""
METRICS_COMMIT = "961ffd4"
"""The last commit whose saved runs keep their per-step ``metrics.jsonl``: the runs saved under docs/grpo_hacking
keep only ``summary.json``, ``judge.yaml`` and ``completions.md`` (the monitor runs also ``completions.jsonl`` and
``metrics.jsonl``)."""


def metrics_hint(out_dir: Path, runs: list[str]) -> str:
    """How to get the per-step metrics of saved runs back from git history (``--plot`` and ``--report`` read them)."""
    return (f"no metrics.jsonl under {out_dir} for {', '.join(runs)}: the saved runs keep summary.json, judge.yaml and "
            f"completions.md; their per-step metrics are in git history: "
            f"git checkout {METRICS_COMMIT} -- 'docs/grpo_hacking/*/metrics.jsonl' brings them all back")
COPY_N = 4


def data_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    if os.environ.get("JUDGE_REWARD_DATA"):
        return Path(os.environ["JUDGE_REWARD_DATA"])
    return ROOT.parent / "shared" / "data"


def load_articles(data: Path, max_words: int) -> list[dict]:
    """One row per distinct SummEval document, in file order: doc_id, source (cut), reference."""
    rows, seen = [], set()
    for rec in json.loads((data / "summeval" / "summeval.json").read_text()):
        if rec["doc_id"] in seen:
            continue
        seen.add(rec["doc_id"])
        source = " ".join(rec["source"].split()[:max_words])
        rows.append({"doc_id": rec["doc_id"], "source": source, "reference": rec.get("reference")})
    return rows


def prompt_of(source: str, template: str = PROMPT) -> list[dict]:
    return [{"role": "user", "content": template.format(article=source)}]


# -- text statistics ----------------------------------------------------------------------------------


NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


_CHATTER_PATTERNS: dict[str, tuple] = {}


def chatter_pieces(output: str, aspects: str = "summeval") -> list[str]:
    """The chat assistant's wrapping in the output (an opener, a bare heading, a sign-off) that the
    injection guard's ``chatter`` option removes, with the vocabulary of the aspect file
    ``aspects``; measured whatever the reward's own settings."""
    from judge_reward.aspects import load_aspects
    from judge_reward.guards import InjectionPatterns, neutralise

    if aspects not in _CHATTER_PATTERNS:
        found = load_aspects(aspects).aspects.values()
        _CHATTER_PATTERNS[aspects] = (InjectionPatterns.for_aspects(found), InjectionPatterns.for_aspects(found, chatter=True))
    plain, chatter = _CHATTER_PATTERNS[aspects]
    other = neutralise(output, plain)[1]
    return [piece for piece in neutralise(output, chatter)[1] if piece not in other]


def aside(output: str, source: str) -> float:
    """Whether the output opens, or ends, with a whole sentence that names nothing from the article
    (none of its content words of 4+ letters, function words aside): a preface or a sign-off, however
    worded ("Alright, here goes."), where ``chatter`` counts only the wordings its patterns list. A
    last sentence cut at the token limit is not counted; an output of one sentence is the output."""
    from judge_reward.guards import content_words, words
    from judge_reward.sentences import sentences as split_sentences

    sentences = [s.strip() for s in split_sentences(output) if words(s)]
    if len(sentences) < 2:
        return 0.0
    article = set(words(source))
    ends = [sentences[0]] + ([sentences[-1]] if sentences[-1][-1] in ".!?" else [])
    return float(any(not any(w in article for w in content_words(words(s), 4, True)) for s in ends))


def text_stats(output: str, source: str) -> dict:
    from judge_reward.guards import copied_share, ngrams, overused_share, repeated_share, words

    out, src = words(output), words(source)
    grams2 = ngrams(out, 2)
    src2 = set(ngrams(src, 2))
    return {
        "words": len(out),
        "copy4": copied_share(out, set(ngrams(src, COPY_N)), COPY_N),
        "novel2": (sum(g not in src2 for g in grams2) / len(grams2)) if grams2 else 0.0,
        "rep3": repeated_share(out, 3),
        # a number (a year, a score, a count) the article does not give: run 19 began inventing years
        "new_num": float(bool(set(NUMBER.findall(output)) - set(NUMBER.findall(source)))),
        # content words past a word's second use: run 20's held-out "of Iowa in Iowa ... in Iowa"
        "overused": overused_share(out, 2),
        # an opener ("Here is the text:"), a bare heading or a sign-off around the output
        "chatter": float(bool(chatter_pieces(output))),
        # wrapping however worded: an opening or closing sentence naming nothing from the article
        "aside": aside(output, source),
    }


def mean(xs):
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return sum(xs) / len(xs) if xs else None


# -- rewards -------------------------------------------------------------------------------------------


def load_judge(config: str, aspects: list[str] | None):
    """The judge of ``config``; ``aspects`` narrows its aspect set (reward and monitor alike)."""
    from judge_reward import Judge
    from judge_reward.config import read_yaml, resolve_config_path

    if not aspects:
        return Judge.from_config(config)
    raw = read_yaml(resolve_config_path(config, "judges"))
    raw["aspects"] = list(aspects)
    if raw.get("reward"):
        raw["reward"] = {**raw["reward"], "aspects": list(aspects)}
        if raw["reward"].get("weights"):
            raw["reward"]["weights"] = {a: w for a, w in raw["reward"]["weights"].items() if a in aspects} or None
    return Judge.from_config(raw)


def build_rewards(judge, fallback_guards: bool):
    """(unguarded JudgeRewardConfig, guarded JudgeRewardConfig, note)."""
    from judge_reward.trainers.reward import JudgeRewardConfig

    guarded = JudgeRewardConfig.from_judge(judge)
    note = "the judge config's own reward: section"
    if not guarded.guards.enabled:
        if not fallback_guards:
            raise SystemExit(f"{judge.config}: the judge config's reward: section enables no guard; "
                             "merge main for the reward configs or pass --fallback-guards")
        guarded = JudgeRewardConfig.from_judge(judge, guards={
            "injection": True, "copy": True, "repetition": True, "length": True, "grounding": True})
        note = "FALLBACK: every guard at its default settings (the judge config enables none)"
    unguarded = JudgeRewardConfig.from_judge(judge, guards={})
    assert not unguarded.guards.enabled
    return unguarded, guarded, note


class RecordingReward:
    """Wraps the trained JudgeReward: forwards TRL's call, and records per call the completions,
    the trained reward, the shadow reward (the other guard setting, same judge, served from its
    cache), each result's components and what ``log_metric`` received."""

    def __init__(self, trained, shadow, tokenizer):
        self.trained, self.shadow, self.tokenizer = trained, shadow, tokenizer
        self.__name__ = trained.__name__
        self.calls: list[dict] = []
        self.shadow_seconds = 0.0
        # what a monitor reads of a judge_reward.trainers.JudgeReward (its reward, its last batch's results)
        self.reward, self.scorer = trained.reward, trained.scorer

    def __call__(self, prompts, completions, completion_ids=None, **kwargs):
        from judge_reward.reward import completion_text

        logged: dict[str, float] = {}
        log_metric = kwargs.get("log_metric")

        def tee(name, value):
            logged[name] = value
            if log_metric is not None:
                log_metric(name, value)

        kwargs = {**kwargs, "log_metric": tee}
        judge_before = self.trained.seconds
        rewards = self.trained(prompts, completions, completion_ids, **kwargs)
        judge_seconds = self.trained.seconds - judge_before
        results = self.trained.scorer._last[1] if self.trained.scorer._last else [None] * len(rewards)
        items = self.trained.items(prompts, completions, kwargs)
        start = time.perf_counter()
        shadow = self.shadow(items)
        self.shadow_seconds += time.perf_counter() - start
        state = kwargs.get("trainer_state")
        rows = []
        for k, (item, reward) in enumerate(zip(items, rewards)):
            res = results[k]
            comps = dict(res.components) if res is not None else {}
            aspect_vals = [v for n, v in comps.items() if n.startswith("aspect/")]
            weights = self.trained.reward.weights
            judge_only = (sum(weights[n.split("/", 1)[1]] * v for n, v in comps.items() if n.startswith("aspect/"))
                          if aspect_vals and len(aspect_vals) == len(weights) else None)
            rows.append({
                "output": completion_text(completions[k]),
                "doc_id": (kwargs.get("doc_id") or [None] * len(rewards))[k],
                "doc_source_head": item.source[:60],
                "reward": reward,
                "shadow": shadow[k].value,
                "judge_only": judge_only,
                "components": comps,
                "shadow_components": dict(shadow[k].components),
                "tokens": len(completion_ids[k]) if completion_ids is not None else None,
                **text_stats(item.output, item.source),
            })
        self.calls.append({"step": (state.global_step + 1) if state is not None else len(self.calls) + 1,
                           "judge_seconds": judge_seconds, "logged": logged, "rows": rows})
        return rewards


# -- callbacks -------------------------------------------------------------------------------------------


def make_deadline_callback(max_minutes: float | None):
    """Stop training (then evaluate as usual) once the training time passes ``max_minutes``."""
    from transformers import TrainerCallback

    class Deadline(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if max_minutes and time.perf_counter() - self.t0 > 60 * max_minutes:
                print(f"--max-minutes {max_minutes}: stopping after step {state.global_step}", flush=True)
                control.should_training_stop = True

    return Deadline()


def make_step_callback(recorder, metrics_path: Path, max_completion_length: int, monitor_box: dict):
    from transformers import TrainerCallback

    class StepRecorder(TrainerCallback):
        """Wall time per optimiser step, the judge's share of it, and one metrics row per step."""

        def __init__(self):
            self.t0 = None
            self.n_calls = 0
            self.trl_logs: dict[int, dict] = {}
            self.rows: list[dict] = []

        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()
            self.n_calls = len(recorder.calls)

        def on_log(self, args, state, control, logs=None, **kw):
            if logs:
                self.trl_logs.setdefault(state.global_step, {}).update(logs)

        def on_step_end(self, args, state, control, **kw):
            wall = time.perf_counter() - self.t0
            calls = recorder.calls[self.n_calls:]
            rows = [r for c in calls for r in c["rows"]]
            judge_s = sum(c["judge_seconds"] for c in calls)
            logged = {}
            for c in calls:
                logged.update(c["logged"])
            row = {
                "step": state.global_step,
                "step_seconds": wall,
                "judge_seconds": judge_s,
                "judge_share": judge_s / wall if wall > 0 else None,
                "n": len(rows),
                "reward_mean": mean([r["reward"] for r in rows]),
                "reward_std": statistics.pstdev([r["reward"] for r in rows if r["reward"] is not None]) if rows else None,
                "shadow_mean": mean([r["shadow"] for r in rows]),
                "judge_only_mean": mean([r["judge_only"] for r in rows]),
                "failures": sum(r["reward"] is None for r in rows),
                "words": mean([r["words"] for r in rows]),
                "tokens": mean([r["tokens"] for r in rows]),
                "clipped": mean([float(r["tokens"] is not None and r["tokens"] >= max_completion_length) for r in rows]),
                "copy4": mean([r["copy4"] for r in rows]),
                "novel2": mean([r["novel2"] for r in rows]),
                "rep3": mean([r["rep3"] for r in rows]),
                "new_num": mean([r.get("new_num") for r in rows]),
                "overused": mean([r.get("overused") for r in rows]),
                "chatter": mean([r.get("chatter") for r in rows]),
                "aside": mean([r.get("aside") for r in rows]),
            }
            for key in sorted({k for r in rows for k in r["components"]} | {k for r in rows for k in r["shadow_components"]}):
                row[f"c/{key}"] = mean([r["components"].get(key) for r in rows])
                row[f"shadow_c/{key}"] = mean([r["shadow_components"].get(key) for r in rows])
            row["judge_logged"] = {k: v for k, v in logged.items() if "/guard/" in k or k.endswith("/mean")}
            self.rows.append(row)
            with metrics_path.open("a") as f:
                f.write(json.dumps(row) + "\n")
            # every completion, for replaying monitors offline (judge_reward.bias_audit.validity)
            with (metrics_path.parent / "completions.jsonl").open("a") as f:
                for r in rows:
                    f.write(json.dumps({"step": state.global_step, "doc_id": r["doc_id"], "output": r["output"],
                                        "reward": r["reward"], "judge_only": r["judge_only"],
                                        "tokens": r["tokens"]}) + "\n")
            print(f"[step {state.global_step}] reward {row['reward_mean']:.4f} shadow {row['shadow_mean']:.4f} "
                  f"words {row['words']:.1f} copy4 {row['copy4']:.3f} rep3 {row['rep3']:.3f} new numbers {row['new_num']:.2f} "
                  f"chatter {row['chatter']:.2f} aside {row['aside']:.2f} "
                  f"step {wall:.1f}s judge {judge_s:.1f}s", flush=True)

    return StepRecorder()


def attach_trl_logs(recorder_cb, metrics_path: Path):
    """Rewrite metrics.jsonl with TRL's own per-step logs (loss, kl, entropy, clip ratio) merged in."""
    keep = ("loss", "grad_norm", "entropy", "learning_rate", "completions/clipped_ratio", "completions/mean_length",
            "frac_reward_zero_std")
    with metrics_path.open("w") as f:
        for row in recorder_cb.rows:
            trl = recorder_cb.trl_logs.get(row["step"], {})
            row["trl"] = {k: v for k, v in trl.items() if k in keep or k.startswith("rewards/") and k.endswith(("mean", "std"))}
            f.write(json.dumps(row) + "\n")


# -- held-out evaluation ---------------------------------------------------------------------------------


def generate_answers(model, tokenizer, sources: list[str], max_new_tokens: int, template: str = PROMPT,
                     samples: int = 1, temperature: float | None = None, batch: int = 4) -> list[list[str]]:
    """``samples`` answers per source to the request ``template`` (its chat template applied),
    greedy, or with ``temperature`` sampled at it (top_p 1); ``batch`` sources per ``generate``."""
    import torch

    sampling = {"do_sample": False} if temperature is None else {"do_sample": True, "temperature": temperature, "top_p": 1.0}
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    was_training = model.training
    model.eval()
    out = []
    try:
        with torch.no_grad():
            for lo in range(0, len(sources), batch):
                texts = [tokenizer.apply_chat_template(prompt_of(s, template), tokenize=False, add_generation_prompt=True)
                         for s in sources[lo:lo + batch]]
                enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
                ids = model.generate(**enc, max_new_tokens=max_new_tokens, num_return_sequences=samples, **sampling,
                                     pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
                answers = [t.strip() for t in tokenizer.batch_decode(ids[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)]
                out += [answers[k:k + samples] for k in range(0, len(answers), samples)]
    finally:
        tokenizer.padding_side = side
        model.train(was_training)
    return out


def evaluate(model, tokenizer, rows: list[dict], rewards: dict, max_new_tokens: int, template: str = PROMPT) -> dict:
    from judge_reward import Item

    start = time.perf_counter()
    outputs = [a for [a] in generate_answers(model, tokenizer, [r["source"] for r in rows], max_new_tokens, template)]
    items = [Item(output=o, source=r["source"]) for o, r in zip(outputs, rows)]
    scored = {name: reward(items) for name, reward in rewards.items()}
    per = []
    for k, (o, r) in enumerate(zip(outputs, rows)):
        per.append({"doc_id": r["doc_id"], "output": o, **{name: scored[name][k].value for name in rewards},
                    **text_stats(o, r["source"])})
    summary = {name: mean([p[name] for p in per]) for name in rewards}
    for key in ("words", "copy4", "novel2", "rep3", "new_num", "overused", "chatter", "aside"):
        summary[key] = mean([p[key] for p in per])
    summary["seconds"] = time.perf_counter() - start
    return {"summary": summary, "items": per}


# -- the run -------------------------------------------------------------------------------------------


def policy_directory() -> str:
    from judge_reward.backends.loading import converted_directory, resolve_model

    return str(converted_directory(resolve_model("embedded:smollm2")))


def run(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from judge_reward import Judge
    from judge_reward.reward import Reward
    from judge_reward.trainers.reward import JudgeReward

    name = args.name or RUNS[args.guards] + ("_smoke" if args.smoke else "")
    out = Path(args.out) / name
    out.mkdir(parents=True, exist_ok=True)
    # the config as run, copied before training, beside its results (a built-in's file changes later)
    from judge_reward.config import resolve_config_path

    as_run = resolve_config_path(args.config, "judges")
    if as_run.resolve() != (out / "judge.yaml").resolve():  # a rerun from its own saved config keeps it
        shutil.copyfile(as_run, out / "judge.yaml")
    metrics_path = out / "metrics.jsonl"
    metrics_path.write_text("")
    (out / "completions.jsonl").write_text("")
    t_start = time.perf_counter()

    articles = load_articles(data_dir(args.data), args.max_source_words)
    train_rows = articles[args.train_docs[0]:args.train_docs[1]]
    eval_rows = articles[args.eval_docs[0]:args.eval_docs[1]][: args.eval_articles]
    assert not {r["doc_id"] for r in train_rows} & {r["doc_id"] for r in eval_rows}

    judge = load_judge(args.config, args.aspects)
    unguarded_cfg, guarded_cfg, guards_note = build_rewards(judge, args.fallback_guards)
    cfg = guarded_cfg if args.guards == "on" else unguarded_cfg
    shadow_cfg = unguarded_cfg if args.guards == "on" else guarded_cfg
    trained = JudgeReward(judge, cfg)
    shadow = Reward(judge, shadow_cfg.reward_config())
    eval_rewards = {"reward_unguarded": Reward(judge, unguarded_cfg.reward_config()),
                    "reward_guarded": Reward(judge, guarded_cfg.reward_config())}
    print(f"reward ({args.guards}): {trained.reward.describe()}  guards: {guards_note}", flush=True)

    model_dir = args.policy or policy_directory()
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True, dtype=torch.float32)
    if args.lora_r:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=args.lora_r, lora_alpha=2 * args.lora_r, lora_dropout=0.0,
                                                 target_modules="all-linear", task_type="CAUSAL_LM"))
    recorder = RecordingReward(trained, shadow, tokenizer)

    template = PROMPTS[args.prompt]
    eval_before = evaluate(model, tokenizer, eval_rows, eval_rewards, args.max_completion_length, template)
    print(f"eval before: {json.dumps(eval_before['summary'])}", flush=True)

    dataset = Dataset.from_list([{"prompt": prompt_of(r["source"], template), "source": r["source"], "doc_id": r["doc_id"],
                                  "reference": r["reference"] or ""} for r in train_rows])
    gargs = GRPOConfig(
        output_dir=str(out / "_trainer"), logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, bf16=False,
        max_steps=args.max_steps, per_device_train_batch_size=args.batch, num_generations=args.num_generations,
        max_completion_length=args.max_completion_length, temperature=args.temperature, learning_rate=args.lr,
        lr_scheduler_type="constant", warmup_steps=0, beta=args.beta, scale_rewards="group", seed=args.seed,
        gradient_accumulation_steps=1, disable_tqdm=True, dataloader_num_workers=0, gradient_checkpointing=False,
    )
    step_cb = make_step_callback(recorder, metrics_path, args.max_completion_length, {})
    divergence = None
    reward_funcs = [recorder]
    if args.divergence == "on":
        from judge_reward.bias_audit.divergence import DivergenceConfig, RewardDivergenceCallback

        divergence = RewardDivergenceCallback(DivergenceConfig(action="log", damage_every_n_steps=args.damage_every,
                                                               history_file=None))
        reward_funcs = [divergence.watch(recorder)]
    trainer = GRPOTrainer(model=model, reward_funcs=reward_funcs, args=gargs, train_dataset=dataset,
                          processing_class=tokenizer, callbacks=[step_cb, make_deadline_callback(args.max_minutes)])
    if divergence is not None:
        divergence.attach(trainer)
    monitor = None
    if args.monitor == "on":
        from judge_reward.bias_audit.monitor import SelfReinforcementCallback, SelfReinforcementConfig

        mcfg = SelfReinforcementConfig(
            every_n_steps=args.monitor_every or args.max_steps, audit_at_start=True, action="log",
            rule={"window": args.monitor_window},
            data=str(data_dir(args.data) / "zhang2023"), n_articles=args.monitor_articles,
            agreement_pairs=args.monitor_pairs, max_article_tokens=args.max_source_words * 2,
            max_new_tokens=args.max_completion_length, generation_batch_size=4, history_file=None,
        )
        monitor = SelfReinforcementCallback(judge, mcfg)
        measure = monitor.measure

        def timed_measure(*a, **k):
            t = time.perf_counter()
            point = measure(*a, **k)
            point.metrics["audit_seconds"] = time.perf_counter() - t
            print(f"[monitor step {point.step}] {json.dumps({k: v for k, v in point.metrics.items() if k != 'rule'})}",
                  flush=True)
            return point

        monitor.measure = timed_measure
        monitor.attach(trainer)

    t_train = time.perf_counter()
    trainer.train()
    train_seconds = time.perf_counter() - t_train
    attach_trl_logs(step_cb, metrics_path)
    if monitor is not None and monitor._last_step != trainer.state.global_step:  # stopped by --max-minutes
        monitor._audit(trainer.args, trainer.state, trainer.control, {"model": model, "processing_class": tokenizer})

    eval_after = evaluate(model, tokenizer, eval_rows, eval_rewards, args.max_completion_length, template)
    print(f"eval after: {json.dumps(eval_after['summary'])}", flush=True)

    monitor_out = None
    if monitor is not None:
        monitor_out = {
            "config": {"every_n_steps": args.monitor_every, "n_articles": args.monitor_articles,
                       "agreement_pairs": args.monitor_pairs, "rule_window": args.monitor_window},
            "audits": [{"step": p.step, **{k: v for k, v in p.metrics.items()}, "policy_summaries": p.texts}
                       for p in monitor.history],
            "flags": monitor.flags,
        }
    summary = {
        "run": name, "guards": args.guards, "guards_note": guards_note, "reward": trained.reward.describe(),
        "shadow_reward": shadow.describe(), "config": args.config, "prompt": PROMPTS[args.prompt], "policy": model_dir,
        "args": {k: v for k, v in vars(args).items()},
        "train_docs": args.train_docs, "eval_doc_ids": [r["doc_id"] for r in eval_rows],
        "steps": trainer.state.global_step, "train_seconds": train_seconds,
        "total_seconds": time.perf_counter() - t_start,
        "judge_seconds": trained.seconds, "shadow_seconds": recorder.shadow_seconds,
        "reward_failures": dict(trained.failures),
        "eval_before": eval_before, "eval_after": eval_after, "monitor": monitor_out,
        "divergence": divergence.monitor.to_json() if divergence is not None else None,
    }
    from judge_reward.bias_audit.monitor import _jsonable

    (out / "summary.json").write_text(json.dumps(_jsonable(summary), indent=1))
    write_completions(out / "completions.md", name, recorder.calls, eval_before, eval_after, args.show_steps)
    print(f"done: {trainer.state.global_step} steps, train {train_seconds:.0f}s, total "
          f"{time.perf_counter() - t_start:.0f}s, judge {trained.seconds:.0f}s -> {out}", flush=True)


def _fmt(x, nd=3):
    return "n/a" if x is None else f"{x:.{nd}f}"


def _one_line(text: str, limit: int = 600) -> str:
    t = " ".join(text.split())
    t = t.replace("|", "\\|")
    return t if len(t) <= limit else t[:limit] + " ..."


def write_completions(path: Path, name: str, calls: list[dict], before: dict, after: dict, show_steps: int) -> None:
    lines = [f"# {name}: completions", ""]
    chosen = calls[:show_steps] + [c for c in calls[-show_steps:] if c not in calls[:show_steps]]
    for c in chosen:
        lines += [f"## Training step {c['step']} (sampled, T=1.0)", "",
                  "| reward | shadow | judge only | words | copy4 | rep3 | completion |", "|---|---|---|---|---|---|---|"]
        for r in c["rows"]:
            lines.append(f"| {_fmt(r['reward'])} | {_fmt(r['shadow'])} | {_fmt(r['judge_only'])} | {r['words']} | "
                         f"{_fmt(r['copy4'], 2)} | {_fmt(r['rep3'], 2)} | {_one_line(r['output'])} |")
        lines.append("")
    for title, ev in (("before", before), ("after", after)):
        lines += [f"## Held-out eval articles, greedy, {title} training", "",
                  "| doc | unguarded | guarded | words | copy4 | rep3 | completion |", "|---|---|---|---|---|---|---|"]
        for p in ev["items"]:
            lines.append(f"| {p['doc_id'][-12:]} | {_fmt(p['reward_unguarded'])} | {_fmt(p['reward_guarded'])} | "
                         f"{p['words']} | {_fmt(p['copy4'], 2)} | {_fmt(p['rep3'], 2)} | {_one_line(p['output'])} |")
        lines.append("")
    path.write_text("\n".join(lines))


# -- plots -------------------------------------------------------------------------------------------


def smooth(xs, k):
    out = []
    for i in range(len(xs)):
        w = [x for x in xs[max(0, i - k + 1):i + 1] if x is not None]
        out.append(sum(w) / len(w) if w else None)
    return out


def plot(out_dir: Path, runs: list[str], docs: Path, k: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = {}
    for run_name in runs:
        p = out_dir / run_name / "metrics.jsonl"
        if p.exists():
            data[run_name] = [json.loads(l) for l in p.read_text().splitlines() if l.strip()]
    missing = [r for r in runs if r not in data]
    if not data:
        raise SystemExit(f"error: {metrics_hint(out_dir, missing)}")
    if missing:
        print(f"left out: {metrics_hint(out_dir, missing)}")

    fig, axes = plt.subplots(1, len(data), figsize=(5.5 * len(data), 3.8), squeeze=False)  # rewards differ in units across runs
    for ax, (run_name, rows) in zip(axes[0], data.items()):
        steps = [r["step"] for r in rows]
        for key, label, style in (("reward_mean", "trained reward", "-"), ("shadow_mean", "shadow reward (other guards)", "--"),
                                  ("judge_only_mean", "judge score alone", ":")):
            ys = [r.get(key) for r in rows]
            ax.plot(steps, ys, style, alpha=0.25, color=ax._get_lines.get_next_color())
            ax.plot(steps, smooth(ys, k), style, label=f"{label} ({k}-step mean)", color=ax.lines[-1].get_color())
        ax.set_title(run_name)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("reward")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(docs / "grpo_hacking_reward.png", dpi=90)
    plt.close(fig)

    keys = [("words", "completion length (words)"), ("copy4", "copy rate (4-grams in article)"),
            ("rep3", "repetition (repeated 3-grams)"), ("reward_mean", "trained reward")]
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 5.2), squeeze=False)
    tab20 = plt.get_cmap("tab20").colors
    colours = tab20[0::2] + tab20[1::2]  # one colour per run (the default cycle repeats after 10): dark shades, then light
    for ax, (key, title) in zip(axes[0], keys):
        for i, (run_name, rows) in enumerate(data.items()):  # past 20 runs the colours repeat, dashed
            steps = [r["step"] for r in rows]
            ys = [r.get(key) for r in rows]
            line, = ax.plot(steps, smooth(ys, k), label=run_name, color=colours[i % len(colours)],
                            linestyle="-" if i < len(colours) else "--")
            ax.plot(steps, ys, alpha=0.2, color=line.get_color())
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="lower center", ncol=6, fontsize=7)  # below: one per run
    fig.tight_layout(rect=(0, 0.3, 1, 1))
    fig.savefig(docs / "grpo_hacking_signatures.png", dpi=90)
    plt.close(fig)
    print(f"wrote {docs / 'grpo_hacking_reward.png'} and {docs / 'grpo_hacking_signatures.png'}")


def report(out_dir: Path, runs: list[str], k: int) -> str:
    """Markdown tables of the saved runs: first and last ``k`` steps, held-out eval, monitor audits."""
    lines = [f"| run | steps | train min | s/step | judge share | reward first {k} | reward last {k} | "
             f"shadow first | shadow last | judge-only first | judge-only last | words first | words last | "
             f"copy4 first | copy4 last | novel2 first | novel2 last | rep3 first | rep3 last | cut at limit last |",
             "|" + "---|" * 20]
    evals, audits, penalties, missing = [], [], [], []
    for run_name in runs:
        p = out_dir / run_name / "metrics.jsonl"
        if not p.exists():
            missing.append(run_name)
            continue
        rows = [json.loads(l) for l in p.read_text().splitlines() if l.strip()]
        summ = json.loads((out_dir / run_name / "summary.json").read_text()) if (out_dir / run_name / "summary.json").exists() else {}
        a, b = rows[:k], rows[-k:]
        f = lambda rs, key: mean([r.get(key) for r in rs])
        share = sum(r["judge_seconds"] for r in rows) / sum(r["step_seconds"] for r in rows)
        lines.append(
            f"| {run_name} | {len(rows)} | {_fmt(summ.get('train_seconds', 0) / 60, 1)} | "
            f"{_fmt(mean([r['step_seconds'] for r in rows]), 1)} | {_fmt(share, 3)} | "
            + " | ".join(f"{_fmt(f(a, key))} | {_fmt(f(b, key))}" for key in
                         ("reward_mean", "shadow_mean", "judge_only_mean", "words", "copy4", "novel2", "rep3"))
            + f" | {_fmt(f(b, 'clipped'), 2)} |")
        keys = sorted({key for r in rows for key in r if key.startswith(("c/guard/", "shadow_c/guard/"))})
        for key in keys:
            penalties.append(f"| {run_name} | {key} | {_fmt(f(a, key))} | {_fmt(f(b, key))} |")
        for when in ("eval_before", "eval_after"):
            e = summ.get(when, {}).get("summary")
            if e:
                evals.append(f"| {run_name} | {when.split('_')[1]} | {_fmt(e['reward_unguarded'])} | "
                             f"{_fmt(e['reward_guarded'])} | {_fmt(e['words'], 1)} | {_fmt(e['copy4'])} | "
                             f"{_fmt(e['novel2'])} | {_fmt(e['rep3'])} | {_fmt(e.get('aside'), 2)} |")
        for au in (summ.get("monitor") or {}).get("audits", []):
            rule = au.get("rule") or {}
            audits.append(f"| {run_name} | {au['step']} | {_fmt(au.get('gap'))} | {_fmt(au.get('gap_se'))} | "
                          f"{_fmt(au.get('policy_score'))} | {_fmt(au.get('agreement'), 2)} | {_fmt(au.get('policy_words'), 1)} | "
                          f"{au.get('flag')} | {rule.get('reason', '')} |")
    out = lines + ["", "Guard penalties per step (mean over the first / last steps; `c/` trained reward, "
                   "`shadow_c/` the other reward on the same completions):", "",
                   "| run | component | first | last |", "|---|---|---|---|"] + penalties
    out += ["", "| run | held-out eval | unguarded reward | guarded reward | words | copy4 | novel2 | rep3 | aside |",
            "|---|---|---|---|---|---|---|---|---|"] + evals
    out += ["", "| run | audit step | gap | gap se | policy score | agreement | policy words | flag | rule |",
            "|---|---|---|---|---|---|---|---|---|"] + audits
    if missing:
        out = [f"Runs left out: {metrics_hint(out_dir, missing)}", ""] + out
    return "\n".join(out)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="default", help="judge config (name or path)")
    p.add_argument("--guards", choices=("on", "off"), default="off")
    p.add_argument("--fallback-guards", action="store_true",
                   help="when the judge config enables no guard, use every guard at its defaults for --guards on")
    p.add_argument("--max-steps", type=int, default=100)
    p.add_argument("--smoke", action="store_true", help="2 steps, short completions, no monitor (about a minute)")
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--lora-r", type=int, default=0, help="LoRA rank (0: full fine-tune)")
    p.add_argument("--beta", type=float, default=0.0, help="GRPO's KL coefficient against the starting policy")
    p.add_argument("--batch", type=int, default=4, help="completions per step (prompts x generations)")
    p.add_argument("--num-generations", type=int, default=4)
    p.add_argument("--max-completion-length", type=int, default=48)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--max-source-words", type=int, default=80)
    p.add_argument("--train-docs", type=int, nargs=2, default=(0, 80), metavar=("FROM", "TO"))
    p.add_argument("--eval-docs", type=int, nargs=2, default=(80, 100), metavar=("FROM", "TO"))
    p.add_argument("--eval-articles", type=int, default=8)
    p.add_argument("--aspects", nargs="+", default=None,
                   help="score only these aspects (judge and reward); default: the judge config's")
    p.add_argument("--max-minutes", type=float, default=None, help="stop training after this many minutes")
    p.add_argument("--monitor", choices=("on", "off"), default="on", help="SelfReinforcementCallback")
    p.add_argument("--monitor-every", type=int, default=0,
                   help="audit every N steps (0: only before training and after the last step)")
    p.add_argument("--monitor-articles", type=int, default=2)
    p.add_argument("--monitor-pairs", type=int, default=2)
    p.add_argument("--monitor-window", type=int, default=2)
    p.add_argument("--divergence", choices=("on", "off"), default="on",
                   help="judge_reward.bias_audit.RewardDivergenceCallback on the training completions (its defaults; action: log)")
    p.add_argument("--damage-every", type=int, default=5,
                   help="the divergence monitor's damage sensitivity every N steps (0: off; costs judge calls)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--policy", default=None,
                   help="folder of the starting policy (default: SmolLM2-135M-Instruct; experiments/wrapping_policy.py "
                        "makes one that wraps its answers)")
    p.add_argument("--prompt", choices=sorted(PROMPTS), default="summarise",
                   help="the request the policy answers: 'summarise' (runs 1-24), or a chat user's 'chat' or 'points'")
    p.add_argument("--show-steps", type=int, default=2, help="completions of this many first and last steps")
    p.add_argument("--data", default=None)
    p.add_argument("--out", default=str(ROOT / "docs" / "grpo_hacking"))
    p.add_argument("--name", default=None)
    p.add_argument("--plot", action="store_true", help="only draw the plots from saved runs")
    p.add_argument("--report", action="store_true", help="only print the results tables of saved runs")
    p.add_argument("--smooth", type=int, default=10)
    p.add_argument("--runs", nargs="+", default=SAVED_RUNS, help="saved runs for --plot and --report")
    args = p.parse_args(argv)
    if args.report:
        print(report(Path(args.out), args.runs, args.smooth))
        return
    if args.plot:
        plot(Path(args.out), args.runs, ROOT / "docs", args.smooth)
        return
    if args.policy and not (Path(args.policy) / "config.json").is_file():
        p.error(f"--policy: no model folder (config.json) at {args.policy!r}; "
                "make one with experiments/wrapping_policy.py --out FOLDER")
    if args.smoke:
        args.max_steps = min(args.max_steps, 2)
        args.max_completion_length = min(args.max_completion_length, 16)
        args.max_source_words = min(args.max_source_words, 60)
        args.aspects = args.aspects or ["relevance"]
        args.eval_articles = min(args.eval_articles, 2)
        args.monitor = "off"
        args.damage_every = 1
        args.out = args.out if args.out != str(ROOT / "docs" / "grpo_hacking") else str(ROOT / "reports" / "grpo_hacking")
    run(args)


if __name__ == "__main__":
    main()
