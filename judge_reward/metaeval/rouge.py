"""ROUGE-1/2/L baselines, multi-reference, as the SummEval meta-evaluation papers report them.

The published SummEval ROUGE rows (UniEval/G-Eval Table 1, Wang et al. 2023) come from BARTScore's
pipeline: ROUGE F1 against each of the 11 references, *averaged* over the references (not the max),
with sentences split on the PTB-tokenised full stop " . " for ROUGE-L (summary-level LCS). We use
Google's ``rouge-score`` package; ``rougeLsum`` there reads sentences from newlines, so we put one
sentence per line first. With Porter stemming this reproduces the papers' numbers within 0.003
(see ``benchmarks/rouge_summeval.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, Sequence

from ..config import Section

ROUGE_TYPES = {"rouge1": "rouge1", "rouge2": "rouge2", "rougeL": "rougeLsum"}
ROUGE_NAMES = tuple(ROUGE_TYPES)



def split_sentences(text: str) -> list[str]:
    """Split PTB-tokenised text into sentences at stand-alone full stops (" . ").

    This is the split BARTScore's ROUGE pipeline applies (``sent_no_tag``); NLTK's punkt would
    need a data download and splits differently on tokenised text.
    """
    sentences, current = [], []
    for token in text.split():
        current.append(token)
        if token == ".":  # only a stand-alone "." ends a sentence, so "U.S." and "3.5" do not
            sentences.append(" ".join(current))
            current = []
    if current:
        sentences.append(" ".join(current))
    return sentences


@dataclass(frozen=True)
class RougeConfig(Section):
    """How ROUGE baselines are computed.

    Attributes:
        types: which of ``rouge1``, ``rouge2``, ``rougeL`` to compute (``rougeL`` is summary-level
            LCS, i.e. rouge-score's ``rougeLsum``, over the sentences of :func:`split_sentences`).
        use_stemmer: Porter-stem tokens before matching (the reproduction needs it on).
        aggregate: ``mean`` (the papers) or ``max`` F1 over the references.
    """

    section_path: ClassVar[str] = "RougeConfig"

    types: tuple[Literal[ROUGE_NAMES], ...] = ROUGE_NAMES
    use_stemmer: bool = True
    aggregate: Literal["mean", "max"] = "mean"


class _CachingTokenizer:
    """rouge-score's default tokenizer, memoised.

    Each reference is scored against all 16 system summaries and each summary against 11
    references; stemming dominates the cost, so tokenising each distinct text once makes
    the full SummEval run several times faster.
    """

    def __init__(self, use_stemmer: bool):
        from rouge_score import tokenizers

        self._inner = tokenizers.DefaultTokenizer(use_stemmer=use_stemmer)
        self._cache: dict[str, list[str]] = {}

    def tokenize(self, text: str) -> list[str]:
        tokens = self._cache.get(text)
        if tokens is None:
            tokens = self._cache[text] = self._inner.tokenize(text)
        return tokens


def rouge_scores(
    outputs: Sequence[str],
    references: Sequence[Sequence[str]],
    config: RougeConfig = RougeConfig(),
) -> dict[str, list[float]]:
    """ROUGE F1 of each output against its references, aggregated over the references.

    ``references[i]`` lists the references of ``outputs[i]`` (one or more). Returns
    ``{"rouge1": [...], "rouge2": [...], "rougeL": [...]}`` aligned with ``outputs``.
    """
    from rouge_score import rouge_scorer

    if len(outputs) != len(references):
        raise ValueError(f"outputs ({len(outputs)}) and references ({len(references)}) differ in length")
    scorer = rouge_scorer.RougeScorer(
        [ROUGE_TYPES[t] for t in config.types], tokenizer=_CachingTokenizer(config.use_stemmer)
    )
    agg = max if config.aggregate == "max" else (lambda v: sum(v) / len(v))
    out: dict[str, list[float]] = {t: [] for t in config.types}
    for i, (output, refs) in enumerate(zip(outputs, references)):
        if isinstance(refs, str) or not refs:
            raise ValueError(f"references[{i}]: expected a non-empty list of strings, got {refs!r:.80}")
        pred = "\n".join(split_sentences(output))
        per_ref = [scorer.score("\n".join(split_sentences(ref)), pred) for ref in refs]
        for t in config.types:
            out[t].append(float(agg([s[ROUGE_TYPES[t]].fmeasure for s in per_ref])))
    return out
