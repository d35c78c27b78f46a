"""Can the likelihood itself stop rewarding copies? Two contrasts, measured on SummEval.

GPTScore rewards a pasted lead because the judge can copy it from the source. Two ways to take that
away without a penalty term, each scored on the first ``--docs`` SummEval documents (the 16 system
summaries, the human reference, the article's first two and three sentences, and the reference's
first sentence) with the relevance instruction of the default judge:

* ``pmi``: mean over the output's tokens of log p(token | instruction, source) - log p(token |
  instruction alone): the information the source adds (the contrast with the unconditional
  likelihood).
* ``discount k``: the conditional log-probability, except that tokens inside a verbatim source
  fragment of at least k words get their unconditional log-probability: copied text is worth what it
  would be worth had the judge not seen the source.

Prints summary-level Spearman against the expert ratings (per document over its 16 summaries,
averaged) and how often the lead and a truncated reference out-score the full reference.

    python experiments/copy_contrast.py --docs 20      # ~6 min on 2 CPU cores (fp32)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # _common.py and the benchmark scripts this study reuses
from _common import summeval  # noqa: E402
from judge_reward import Judge, JudgeConfig  # noqa: E402
from judge_reward.backends.base import ContinuationRequest  # noqa: E402
from judge_reward.guards import fragment_spans, word_positions  # noqa: E402
from judge_reward.probes import sentences  # noqa: E402

ASPECTS = ("coherence", "consistency", "fluency", "relevance")
CONDITIONAL = "Write a relevant and informative summary of the following text.\n\n{source}\n\nTL;DR:"
UNCONDITIONAL = "Write a relevant and informative summary of the following text.\n\nTL;DR:"
WORD = re.compile(r"\w+")
DISCOUNTS = (2, 3, 4, 6, 8, 12, 20)


def token_fragment_lengths(tokens: list[str], text: str, source: str) -> list[int]:
    """For each scored token, the length of the longest copied fragment among the words it overlaps."""
    src_words = WORD.findall(source.lower())
    matches = list(WORD.finditer(text.lower()))
    lengths = [0] * len(matches)
    for start, n in fragment_spans([m.group() for m in matches], src_words, word_positions(src_words)):
        lengths[start:start + n] = [n] * n
    out, pos = [], 0
    for tok in tokens:
        end = pos + len(tok.replace("\u2581", " "))
        out.append(max((n for m, n in zip(matches, lengths) if m.start() < end and m.end() > pos), default=0))
        pos = end
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=20)
    args = parser.parse_args()
    judge = Judge(JudgeConfig.from_yaml("default"))
    rows = []  # (doc, kind, human scores or None, cond, uncond, fragment lengths)
    for d, doc in enumerate(summeval(args.docs)):
        source, ref = doc[0]["source"], doc[0]["reference"]
        texts = [(r["system_id"], r["system_output"], r["scores"]) for r in doc]
        texts += [("reference", ref, None), ("lead3", " ".join(sentences(source)[:3]), None),
                  ("lead2", " ".join(sentences(source)[:2]), None), ("reference_first_sentence", sentences(ref)[0], None)]
        requests = []
        for _, text, _ in texts:
            requests.append(ContinuationRequest(CONDITIONAL.format(source=source.strip()), " " + text.strip(), group=f"doc{d}"))
            requests.append(ContinuationRequest(UNCONDITIONAL, " " + text.strip(), group="unconditional"))
        results = judge.backend.continuation_logprobs(requests)
        for n, (kind, text, human) in enumerate(texts):
            cond, uncond = results[2 * n], results[2 * n + 1]
            frag = token_fragment_lengths(cond.tokens, " " + text.strip(), source)
            rows.append((d, kind, human, np.array(cond.token_logprobs), np.array(uncond.token_logprobs), np.array(frag)))
    variants = {"conditional (GPTScore)": lambda c, u, f: c.mean(), "unconditional": lambda c, u, f: u.mean(),
                "pmi": lambda c, u, f: (c - u).mean()}
    for k in DISCOUNTS:
        variants[f"discount {k}"] = lambda c, u, f, k=k: np.where(f >= k, u, c).mean()
    n_docs = len({r[0] for r in rows})
    print(f"first {n_docs} SummEval documents, {judge.backend.model_id}, relevance instruction")
    print(f"{'variant':<24}" + "".join(f"{a:>13}" for a in ASPECTS) + f"{'lead3 > ref':>13}{'lead2 > ref':>13}{'ref[:1] > ref':>15}")
    for name, fn in variants.items():
        corr = {a: [] for a in ASPECTS}
        wins = {"lead3": 0, "lead2": 0, "reference_first_sentence": 0}
        for d in range(n_docs):
            doc_rows = [r for r in rows if r[0] == d]
            value = {r[1]: fn(r[3], r[4], r[5]) for r in doc_rows}
            systems = [r for r in doc_rows if r[2] is not None]
            for a in ASPECTS:
                corr[a].append(spearmanr([value[r[1]] for r in systems], [r[2][a] for r in systems]).statistic)
            for w in wins:
                wins[w] += value[w] > value["reference"]
        print(f"{name:<24}" + "".join(f"{np.nanmean(corr[a]):>13.3f}" for a in ASPECTS)
              + "".join(f"{wins[w]:>10}/{n_docs:<2}" for w in ("lead3", "lead2")) + f"{wins['reference_first_sentence']:>12}/{n_docs:<2}")


if __name__ == "__main__":
    main()
