"""Synthetic studies with a known answer, shaped like Zhang et al. (2023), for checking the statistics.

Each article has an LLM summary and one or two writer summaries with latent qualities drawn from
the same distribution (so people prefer each source equally often, as in the real data: 243 vs
239). Each pair is judged by six, five or one evaluators who see the quality difference through
noise and call it a tie inside a band (about 20% ties, as in the data). The judge sees the same
qualities through its own noise, plus an optional bias towards the LLM text, an optional length
effect, or it simply always prefers the LLM text.

``python -m judge_reward.bias_audit.synthetic`` prints the self-preference flag's false-positive rate and power.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np

from judge_reward.config import Section

from .stats import PairedRows, StatsConfig, self_preference_test


@dataclass
class SyntheticConfig(Section):
    """The shape of a synthetic study and the judge that scores it."""

    n_articles: int = 76
    two_writers: float = 0.47
    """Share of articles with a second writer (112 pairs over 76 articles in the data)."""
    evaluators: tuple = ((6, 0.78), (5, 0.12), (1, 0.10))
    """(evaluators per pair, share of pairs); the data has 87 x 6, 13 x 5, 12 x 1."""
    human_noise: float = 1.0
    tie_band: float = 0.44
    """People call |perceived difference| below this a tie (about 20% of judgements)."""
    judge_signal: float = 1.0
    judge_noise: float = 1.0
    judge_bias: float = 0.0
    """Added to the judge's score of every LLM summary (0: no self-preference)."""
    always_llm: bool = False
    """The judge scores the LLM summary above the human one every time."""
    llm_extra_words: float = 0.0
    """Mean extra length of the LLM summaries."""
    score_per_10_words: float = 0.0
    """How much the judge's score rises with length (a pure length bias)."""


def synthetic_rows(config: SyntheticConfig | None = None, seed: int = 0) -> PairedRows:
    """One synthetic study at the judgement level."""
    c = config or SyntheticConfig()
    rng = np.random.default_rng(seed)
    cluster, human, llm, hlen, llen, pref = [], [], [], [], [], []
    sizes, shares = zip(*c.evaluators)
    for a in range(c.n_articles):
        q_llm = rng.normal()
        len_llm = 47 + c.llm_extra_words + rng.normal(0, 10)
        s_llm = c.judge_signal * q_llm + c.judge_bias + rng.normal(0, c.judge_noise)
        for _ in range(2 if rng.random() < c.two_writers else 1):
            q_h = rng.normal()
            len_h = 47 + rng.normal(0, 12)
            s_h = c.judge_signal * q_h + rng.normal(0, c.judge_noise)
            s_l = s_llm + c.score_per_10_words * len_llm / 10
            s_hh = s_h + c.score_per_10_words * len_h / 10
            if c.always_llm:
                s_l = s_hh + 1.0 + rng.random()
            k = int(rng.choice(sizes, p=np.asarray(shares) / sum(shares)))
            seen = (q_llm - q_h) + rng.normal(0, c.human_noise, size=k)
            for y in seen:
                cluster.append(a)
                human.append(s_hh)
                llm.append(s_l)
                hlen.append(len_h)
                llen.append(len_llm)
                pref.append("llm" if y > c.tie_band else "human" if y < -c.tie_band else "tie")
    return PairedRows(cluster, human, llm, hlen, llen, pref)


def flag_rates(config: SyntheticConfig, n_sims: int = 400, stats: StatsConfig | None = None, seed: int = 0) -> dict:
    """Share of simulated studies in which the self-preference flag fires, on all and on length-matched comparisons."""
    stats = stats or StatsConfig(n_resamples=200, n_permutations=2000)
    raw = ctl = 0
    for k in range(n_sims):
        rows = synthetic_rows(config, seed=seed + k)
        cfg = StatsConfig(stats.n_resamples, stats.n_permutations, stats.confidence, seed + k, stats.tie_margin,
                          stats.length_match_words)
        sp = self_preference_test(rows, cfg)
        raw += sp["flagged"]
        ctl += sp["length_matched"]["flagged"]
    return {"raw": raw / n_sims, "length_matched": ctl / n_sims}


def flag_rate(config: SyntheticConfig, n_sims: int = 400, stats: StatsConfig | None = None, seed: int = 0) -> float:
    return flag_rates(config, n_sims, stats, seed)["raw"]


def main(argv=None) -> None:
    from .monitor import RuleConfig, simulate_false_alarms

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sims", type=int, default=400)
    p.add_argument("--resamples", type=int, default=200, help="bootstrap resamples (the flag does not use them)")
    p.add_argument("--permutations", type=int, default=2000)
    p.add_argument("--runs", type=int, default=1000, help="simulated training runs for the monitor's rule")
    args = p.parse_args(argv)
    stats = StatsConfig(n_resamples=args.resamples, n_permutations=args.permutations)
    cases = {
        "unbiased judge": SyntheticConfig(),
        "unbiased, noisier judge (noise 2)": SyntheticConfig(judge_noise=2.0),
        "unbiased judge that likes length, LLM 15 words longer": SyntheticConfig(llm_extra_words=15, score_per_10_words=0.5),
        "bias 0.5 (half a quality SD)": SyntheticConfig(judge_bias=0.5),
        "bias 1.0": SyntheticConfig(judge_bias=1.0),
        "always prefers the LLM text": SyntheticConfig(always_llm=True),
    }
    print(f"Self-preference flag (one-sided, alpha 2.5%), {args.sims} synthetic studies each:")
    for name, cfg in cases.items():
        r = flag_rates(cfg, args.sims, stats)
        print(f"  {name:55s} flagged {r['raw']:6.1%}   length-matched {r['length_matched']:6.1%}")
    rule = RuleConfig()
    print(f"Monitor rule {rule}, 20 audits of 16 articles, {args.runs} runs each:")
    for drift in (0.0, 0.1, 0.15, 0.2, 0.3):
        rate = simulate_false_alarms(rule, n_audits=20, n_articles=16, n_runs=args.runs, drift=drift, seed=1)
        print(f"  drift {drift:4.2f} noise SD per audit: fired in {rate:6.1%} of runs")
    print("Alternatives: fired without drift / at drift 0.15")
    for alt in ({"window": 4, "min_rise_z": 2.5}, {"window": 3, "min_rise_z": 2.5}, {"window": 5, "min_rise_z": 2.5},
                {"window": 5, "min_rise_z": 2.5, "patience": 2}, {"window": 5, "min_rise_z": 3.0}):
        r = RuleConfig(**alt)
        fa = simulate_false_alarms(r, n_audits=20, n_articles=16, n_runs=args.runs, seed=1)
        pw = simulate_false_alarms(r, n_audits=20, n_articles=16, n_runs=args.runs, drift=0.15, seed=1)
        print(f"  {alt}: {fa:6.1%} / {pw:6.1%}")


if __name__ == "__main__":
    main()
