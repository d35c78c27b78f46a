"""Judge-labelled preference pairs for DPO.

Input rows hold a prompt and k candidate completions (or the completions are sampled from a
given model with :func:`generate_candidates`). The judge scores the candidates and each row yields
a ``prompt`` / ``chosen`` / ``rejected`` example that ``trl.DPOTrainer`` accepts, in the same
format as the prompt (text, or chat messages with the completions as assistant turns).

Two ways to judge:

* ``pointwise``: every candidate gets a reward (:class:`~judge_reward.trainers.reward.JudgeReward`, by default
  the judge config's own reward with its guards); chosen is the best, rejected the worst, if they differ by at least
  ``min_margin`` (in reward units).
* ``pairwise``: a judge aspect that rates two candidates shown together (``1`` = the first is much
  better ... ``high`` = the second is much better; see ``judge_reward/configs/train/pairwise_aspects.yaml``).
  With ``swap`` each pair is judged in both orders and the two preferences are averaged, which
  cancels a constant position bias; ``require_agreement`` also drops pairs whose two orders pick
  different winners. Preferences lie in [-1, 1] and ``min_margin`` applies to them.

Candidates the judge fails on are left out (counted); a row with fewer than two scored
candidates yields no pair.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Optional, Sequence

from tqdm.auto import tqdm

from judge_reward import Item, Judge
from judge_reward.config import ConfigError, NonNegativeFloat, PositiveInt, Section

from .reward import JudgeReward, JudgeRewardConfig, message_text, prompt_source

MODES = ("pointwise", "pairwise")
PAIRS = ("best_worst", "all")


@dataclass
class PairLabelConfig(Section):
    """How preference pairs are picked from judged candidates."""

    section_path: ClassVar[str] = "label"

    prompt_column: str = "prompt"
    completions_column: str = "completions"
    """Column with the k candidate completions of a row (a list of texts or of message lists)."""
    source_column: str = "source"
    """Text the candidates are judged against; default: the prompt (its last user message)."""
    reference_column: str = "reference"
    human_column: Optional[str] = None
    """Optional column with a human score per candidate (numbers, or dicts aspect -> score whose mean
    is used); the chosen/rejected human scores are then kept and agreement is reported."""
    mode: Literal[MODES] = "pointwise"
    """``pointwise`` or ``pairwise`` (see the module docstring)."""
    pairs: Literal[PAIRS] = "best_worst"
    """``best_worst``: one pair per row; ``all``: every candidate pair whose margin passes."""
    min_margin: NonNegativeFloat = 0.0
    """Smallest score difference (pointwise, reward units) or preference (pairwise, in [-1, 1])."""
    swap: bool = True
    """Pairwise: judge both orders of every pair and average them (position debiasing)."""
    require_agreement: bool = True
    """Pairwise with swap: drop a pair when the two orders pick different winners."""
    pairwise_aspect: str = "pairwise_preference"
    """Pairwise: the aspect (in the judge's aspect file) that rates two candidates shown together."""
    first_label: str = "Summary A"
    second_label: str = "Summary B"
    reward: Optional[JudgeRewardConfig] = None
    """Pointwise: how candidate scores become rewards (aspects, weights, normalisation, guards);
    ``None``: the judge config's own ``reward:`` section, the reward a trainer built from that
    config gets (so the pairs prefer what the same reward would)."""
    chunk_rows: PositiveInt = 8
    """Rows per judge call (a row's candidates share their source, so the judge shares its prefix)."""

    def check(self) -> None:
        if self.mode == "pairwise" and self.min_margin > 1:
            raise ConfigError(f"pairwise preferences lie in [-1, 1], got {self.min_margin!r}", field="min_margin")


def _as_completion(candidate: Any, conversational: bool) -> Any:
    """A candidate in the prompt's format: text for a text prompt, assistant turn(s) for chat."""
    if not conversational:
        return message_text(candidate, "completion")
    if isinstance(candidate, str):
        return [{"role": "assistant", "content": candidate}]
    return list(candidate)


def _human_value(value: Any, where: str) -> float:
    if isinstance(value, dict):
        nums = [v for v in value.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if not nums:
            raise ValueError(f"{where}: expected a number or a mapping of aspect -> number, got {value!r:.80}")
        return sum(nums) / len(nums)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise ValueError(f"{where}: expected a number or a mapping of aspect -> number, got {value!r:.80}")


def check_row(config: PairLabelConfig, row: Any, index: int) -> tuple[Any, list, str, str | None, list[float] | None]:
    """One input row checked (a ValueError names ``rows[index]``, the column and the value):
    ``(prompt, candidate texts, source, reference, human scores)``."""
    c = config
    where = f"rows[{index}]"
    if not isinstance(row, dict):
        raise ValueError(f"{where}: expected a mapping, got {type(row).__name__}")
    if c.prompt_column not in row:
        raise ValueError(f"{where}.{c.prompt_column}: required column is missing (columns: {sorted(row)})")
    prompt = row[c.prompt_column]
    candidates = row.get(c.completions_column)
    if not isinstance(candidates, list):
        raise ValueError(f"{where}.{c.completions_column}: expected a list of candidate completions, got {candidates!r:.80}")
    source = row.get(c.source_column)
    if source is None:
        source = prompt_source(prompt, f"{where}.{c.prompt_column}")
    if not isinstance(source, str):
        raise ValueError(f"{where}.{c.source_column}: expected text, got {source!r:.80}")
    reference = row.get(c.reference_column)
    if reference is not None and not isinstance(reference, str):
        raise ValueError(f"{where}.{c.reference_column}: expected text, got {reference!r:.80}")
    human = None
    if c.human_column is not None:
        raw = row.get(c.human_column)
        if not isinstance(raw, list) or len(raw) != len(candidates):
            raise ValueError(f"{where}.{c.human_column}: expected one human score per candidate ({len(candidates)}), got {raw!r:.80}")
        human = [_human_value(v, f"{where}.{c.human_column}[{k}]") for k, v in enumerate(raw)]
    texts = [message_text(cand, f"{where}.{c.completions_column}[{k}]") for k, cand in enumerate(candidates)]
    return prompt, texts, source, reference, human


def check_rows(config: PairLabelConfig, rows: Sequence[Any]) -> list[tuple]:
    """Every row checked with :func:`check_row`, and one prompt format for all (a pair dataset is one
    Arrow table: text and chat prompts cannot share its column)."""
    checked = [check_row(config, row, n) for n, row in enumerate(rows)]
    check_prompt_formats(config, [prompt for prompt, *_rest in checked])
    return checked


def check_prompt_formats(config: PairLabelConfig, prompts: Sequence[Any]) -> None:
    kind = {True: "text", False: "chat messages"}
    for n, prompt in enumerate(prompts):
        if isinstance(prompt, str) != isinstance(prompts[0], str):
            raise ValueError(f"rows[{n}].{config.prompt_column}: {kind[isinstance(prompt, str)]}, but "
                             f"rows[0].{config.prompt_column} is {kind[isinstance(prompts[0], str)]}; "
                             "a pair dataset holds one prompt format")


class PairLabeler:
    """Scores candidates with a judge and picks preference pairs (see :func:`label_pairs`)."""

    def __init__(self, judge: Judge, config: PairLabelConfig | None = None):
        self.judge = judge
        self.config = config or PairLabelConfig()
        self.stats: Counter[str] = Counter()
        self.seconds = 0.0
        self._margins: list[float] = []
        self._drained = False
        if self.config.mode == "pointwise":
            self.reward = JudgeReward(judge, self.config.reward)  # None: the judge config's reward
        else:
            method = (self.config.reward.method if self.config.reward is not None else None) or judge.config.method
            if method not in ("geval", "rating"):
                raise ConfigError(
                    f"label.mode: 'pairwise' needs a judge method that rates on a scale (geval or rating), got {method!r}"
                )
            self.method = method
            self.aspect = judge.aspect_set.get(self.config.pairwise_aspect)

    # -- input checks ----------------------------------------------------------------------------

    # -- scoring ----------------------------------------------------------------------------------

    def _pointwise(self, batch: list[tuple]) -> list[list[list[float | None]]]:
        """Per row, the k x k preference matrix P[i][j] = score_i - score_j (None where a score failed)."""
        prompts, completions, sources, references = [], [], [], []
        for prompt, texts, source, reference, _ in batch:
            for t in texts:
                prompts.append(prompt)
                completions.append(t)
                sources.append(source)
                references.append(reference)
        columns = {self.reward.config.source_column: sources}
        if any(r is not None for r in references):
            columns[self.reward.config.reference_column] = references
        values = self.reward(prompts=prompts, completions=completions, **columns) if prompts else []
        out, pos = [], 0
        for _, texts, *_ in batch:
            s = values[pos:pos + len(texts)]
            pos += len(texts)
            self.stats["candidates_failed"] += sum(v is None for v in s)
            out.append([[None if a is None or b is None else a - b for b in s] for a in s])
        return out

    def _pair_text(self, first: str, second: str) -> str:
        return f"{self.config.first_label}:\n{first}\n\n{self.config.second_label}:\n{second}"

    def _pairwise(self, batch: list[tuple]) -> list[list[list[float | None]]]:
        """Per row, P[i][j] in [-1, 1]: how much the judge prefers candidate i over j."""
        scale = self.aspect.scale
        items, where = [], []
        for r, (_, texts, source, reference, _) in enumerate(batch):
            for i, j in itertools.combinations(range(len(texts)), 2):
                orders = [(i, j), (j, i)] if self.config.swap else [(i, j)]
                for a, b in orders:
                    items.append(Item(self._pair_text(texts[a], texts[b]), source, reference))
                    where.append((r, a, b))
        scored = self.judge.score(items, aspects=[self.aspect.name], method=self.method) if items else []
        # second-over-first preference of each judged order, in [-1, 1]
        judged: dict[tuple[int, int, int], float | None] = {}
        for key, res in zip(where, scored):
            s = res[self.aspect.name]
            if s.value is None:
                self.stats["pair_judgments_failed"] += 1
                judged[key] = None
            else:
                judged[key] = 2.0 * scale.normalise(s.value) - 1.0
        out = []
        for r, (_, texts, *_rest) in enumerate(batch):
            k = len(texts)
            P: list[list[float | None]] = [[None] * k for _ in range(k)]
            for i, j in itertools.combinations(range(k), 2):
                fwd = judged.get((r, i, j))  # shown (i, j): positive = j better
                if not self.config.swap:
                    if fwd is not None:
                        P[j][i], P[i][j] = fwd, -fwd
                    continue
                bwd = judged.get((r, j, i))  # shown (j, i): positive = i better
                if fwd is None or bwd is None:
                    continue
                if self.config.require_agreement and (fwd > 0) != (bwd < 0):
                    self.stats["pairs_position_inconsistent"] += 1
                    continue
                pref_i = (bwd - fwd) / 2.0  # debiased: how much better i is than j
                P[i][j], P[j][i] = pref_i, -pref_i
            out.append(P)
        return out

    # -- choosing pairs ---------------------------------------------------------------------------

    def _choose(self, P: list[list[float | None]]) -> list[tuple[int, int, float]]:
        """(chosen, rejected, margin) pairs from a preference matrix."""
        k = len(P)
        margin_ok = lambda m: m is not None and m > 0 and m >= self.config.min_margin  # noqa: E731
        if self.config.pairs == "all":
            out = []
            if sum(any(m is not None for m in row) for row in P) < 2:
                self.stats["rows_too_few_scored"] += 1
                return out
            for i, j in itertools.combinations(range(k), 2):
                m = P[i][j]
                if m is None:
                    continue
                a, b, m = (i, j, m) if m > 0 else (j, i, -m)
                if margin_ok(m):
                    out.append((a, b, m))
                else:
                    self.stats["pairs_below_margin"] += 1
            return out
        # best vs worst by mean preference over the comparisons each candidate took part in
        strength = {}
        for i in range(k):
            known = [P[i][j] for j in range(k) if j != i and P[i][j] is not None]
            if known:
                strength[i] = sum(known) / len(known)
        if len(strength) < 2:
            self.stats["rows_too_few_scored"] += 1
            return []
        best = max(strength, key=strength.get)
        worst = min(strength, key=strength.get)
        m = P[best][worst]
        if m is None or best == worst:
            self.stats["rows_undecided"] += 1
            return []
        if not margin_ok(m):
            self.stats["rows_below_margin"] += 1
            return []
        return [(best, worst, m)]

    def label(self, rows: Sequence[dict], progress: bool = True) -> list[dict]:
        c = self.config
        checked = check_rows(c, rows)
        out = []
        bar = tqdm(total=len(checked), desc=f"label pairs ({c.mode})", unit="row", disable=not progress or None)
        for lo in range(0, len(checked), c.chunk_rows):
            batch = checked[lo:lo + c.chunk_rows]
            start = time.perf_counter()
            matrices = self._pointwise(batch) if c.mode == "pointwise" else self._pairwise(batch)
            self.seconds += time.perf_counter() - start
            for (prompt, texts, source, _ref, human), P, row in zip(batch, matrices, rows[lo:lo + c.chunk_rows]):
                self.stats["rows"] += 1
                conversational = not isinstance(prompt, str)
                candidates = row[c.completions_column]
                for a, b, margin in self._choose(P):
                    example = {
                        "prompt": prompt,
                        "chosen": _as_completion(candidates[a], conversational),
                        "rejected": _as_completion(candidates[b], conversational),
                        "margin": float(margin),
                        "chosen_index": a,
                        "rejected_index": b,
                    }
                    if human is not None:
                        example["chosen_human"] = human[a]
                        example["rejected_human"] = human[b]
                        self.stats["human_agrees" if human[a] > human[b] else
                                   "human_ties" if human[a] == human[b] else "human_disagrees"] += 1
                    out.append(example)
                    self._margins.append(float(margin))
                    self.stats["pairs"] += 1
            bar.update(len(batch))
        bar.close()
        return out

    def summary(self) -> dict[str, Any]:
        """Counts: rows, pairs, failed candidates / pair judgments, rows skipped and why, human agreement."""
        s = dict(self.stats)
        if self._margins:
            s["margin_mean"] = sum(self._margins) / len(self._margins)
        decided = s.get("human_agrees", 0) + s.get("human_disagrees", 0)
        if decided:
            s["human_agreement"] = s.get("human_agrees", 0) / decided
        s["judge_seconds"] = self.seconds
        return s

    def drain_metrics(self) -> dict[str, float]:
        """The summary as ``judge/pairs/*`` metrics, once (for :class:`~judge_reward.trainers.callbacks.JudgeMetricsCallback`,
        so a DPO run's W&B log records how its pairs were labelled)."""
        if self._drained:
            return {}
        self._drained = True
        return {f"judge/pairs/{k}": float(v) for k, v in self.summary().items()}


def label_pairs(judge: Judge, rows: Sequence[dict], config: PairLabelConfig | None = None, progress: bool = True):
    """Judge-labelled DPO pairs: ``(datasets.Dataset, PairLabeler)``.

    The dataset has ``prompt``, ``chosen``, ``rejected`` (what ``DPOTrainer`` reads) plus
    ``margin`` and the candidates' indices (and human scores when ``human_column`` is set); the
    labeler's :meth:`~PairLabeler.summary` counts what was kept and skipped.
    """
    from datasets import Dataset

    labeler = PairLabeler(judge, config)
    examples = labeler.label(rows, progress=progress)
    columns = ["prompt", "chosen", "rejected", "margin", "chosen_index", "rejected_index"]
    if examples and "chosen_human" in examples[0]:
        columns += ["chosen_human", "rejected_human"]
    data = Dataset.from_dict({k: [e[k] for e in examples] for k in columns}) if examples else Dataset.from_dict(
        {k: [] for k in columns}
    )
    return data, labeler


def generate_candidates(
    model, tokenizer, prompts: Sequence[Any], n: int = 4, max_new_tokens: int = 64, temperature: float = 1.0,
    seed: int = 0, batch_size: int = 8,
) -> list[list[str]]:
    """Sample ``n`` completions per prompt from ``model`` (chat prompts go through its chat template)."""
    import torch

    if n < 2:
        raise ValueError(f"n: a pair needs at least 2 candidates per prompt, got {n!r}")
    if temperature <= 0:
        raise ValueError(f"temperature: sampling needs a positive temperature, got {temperature!r}")
    torch.manual_seed(seed)
    texts = [
        p if isinstance(p, str) else tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True)
        for p in prompts
    ]
    pad_side, tokenizer.padding_side = tokenizer.padding_side, "left"  # generation continues the prompt's end
    out: list[list[str]] = []
    try:
        for lo in tqdm(range(0, len(texts), batch_size), desc="generate candidates", unit="batch"):
            enc = tokenizer(texts[lo:lo + batch_size], return_tensors="pt", padding=True)
            enc = {k: v.to(model.device) for k, v in enc.items()}
            with torch.no_grad():
                gen = model.generate(
                    **enc, do_sample=True, temperature=temperature, top_k=0, top_p=1.0, max_new_tokens=max_new_tokens,
                    num_return_sequences=n, pad_token_id=tokenizer.pad_token_id,
                )
            decoded = tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
            out.extend(decoded[k:k + n] for k in range(0, len(decoded), n))
    finally:
        tokenizer.padding_side = pad_side
    return out
