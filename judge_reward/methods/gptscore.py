"""GPTScore (Fu et al. 2023): the log-likelihood of a text under an instruction that names the aspect.

score(h | d, a, S) = sum_t w_t log p(h_t | h_<t, T(d, a, S)) with uniform weights, reported as the
mean over the scored tokens (what the official scorer returns; the default ``value``) and as the
sum (``details["sum_logprob"]``). Directions:

* ``src_hypo``: condition on the source, score the output;
* ``ref_hypo``: condition on the human reference, score the output;
* ``hypo_ref``: condition on the output, score the reference;
* ``avg_f``: the mean of ``ref_hypo`` and ``hypo_ref``.
"""

from __future__ import annotations

import functools
import hashlib
import math

from dataclasses import asdict, dataclass, field
from typing import Annotated, ClassVar, Literal, Optional, Sequence

from typing_extensions import TypedDict

from ..aspects import Aspect
from ..backends.base import CandidateRequest, ContinuationRequest, JudgeBackend
from ..config import ConfigError, Expect, Section, read_mapping, resolve_config_path
from ..prompts.gptscore import LAYOUTS, PROMPT_REVISIONS, build_gptscore_prompt, unconditional_context
from .base import Item, Score, TokenLogprobs, config_fingerprint
from .common import fit_source, run_plans

DIRECTIONS = ("src_hypo", "ref_hypo", "hypo_ref", "avg_f")
SENTENCE_ENDS = (".", "!", "?", " .", "\n")
"""What can come right after a finished sentence's last word: terminal punctuation (also written
after a space, as tokenised corpora do) or a line break."""
REDUCTIONS = ("mean", "sum")


class Demonstration(TypedDict):
    source: str
    output: str


@dataclass
class GPTScoreConfig(Section):
    """GPTScore settings (a judge config's ``gptscore:`` section)."""

    section_path: ClassVar[str] = "gptscore"

    direction: Literal[DIRECTIONS] = "src_hypo"
    """``src_hypo``, ``ref_hypo``, ``hypo_ref`` or ``avg_f`` (mean of both reference directions)."""
    instruction: bool = True
    """Use the aspect's instruction template; ``False`` is GPTScore's vanilla setting (text only)."""
    layout: Literal[LAYOUTS] = "instruction_first"
    """``instruction_first`` (GPTScore's order: the aspect's instruction, then the conditioning text)
    or ``source_first`` (the conditioning text, then the instruction: the aspects of an item share
    the conditioning text, so the backend runs it once for all of them)."""
    reduce: Literal[REDUCTIONS] = "mean"
    """``mean`` log-probability per token (the official scorer) or ``sum``."""
    demonstrations: list[Annotated[Demonstration, Expect("{source: text, output: text}")]] = field(default_factory=list)
    """In-context examples, each ``{source: ..., output: ...}``, written with the same template."""
    unconditional: bool = False
    """Also score each output after the aspect's instruction alone (no source) and keep both
    per-token log-probability sequences and the tokens as ``Score.tokens``
    (:class:`~judge_reward.methods.base.TokenLogprobs`): what the reward's ``copy_credit``,
    ``information``, ``lift`` and ``likelihood_floor`` (``unconditional``) guards read. The score itself is unchanged. Costs one short extra row per output and aspect."""
    baseline_source: Optional[str] = None
    """With ``unconditional``: what the judge reads in the source's place in that second pass.
    ``None``: nothing, the instruction alone. Else a built-in name (``news``: a news article written
    for this project, about something none of the rated sets covers; ``configs/baselines/``) or a
    YAML file with a ``text:`` field. After an article of the same kind, what any such article makes
    likely (a summary's generic opening: "Here is a story that ...") gains nothing from the real
    source, so the ``lift`` guard and the information term count only what this source makes
    likely. Costs the baseline's tokens once per aspect and batch."""

    def check(self) -> None:
        if self.unconditional and (self.direction != "src_hypo" or not self.instruction or self.demonstrations):
            raise ConfigError(
                "needs direction 'src_hypo', instruction true and no demonstrations (the source is what is "
                f"left out), got direction {self.direction!r}, instruction {self.instruction}, "
                f"{len(self.demonstrations)} demonstration(s)", field="unconditional")
        if self.baseline_source is not None:
            if not self.unconditional:
                raise ConfigError(f"{self.baseline_source!r} needs unconditional: true (the baseline is read in "
                                  "that second pass)", field="baseline_source")
            load_baseline(self.baseline_source)


def load_baseline(name_or_path: str) -> str:
    """The text of a baseline source (``gptscore.baseline_source``): a built-in name (``news``) or a
    YAML file with a non-empty ``text:``.

    >>> load_baseline("news").split(".")[0]
    'A council in the north of the country voted on Tuesday to keep its main library open on Sundays after a year-long trial drew more visitors than officials had expected'
    """
    try:
        path = resolve_config_path(name_or_path, "baselines")
    except ConfigError as err:
        raise ConfigError(str(err).replace("baselines: ", "", 1), field="baseline_source") from None
    text = read_mapping(path).get("text")
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"needs a non-empty text, got {text!r}", file=str(path), field="text")
    return text.strip()


class GPTScore:
    name = "gptscore"

    def __init__(self, config: GPTScoreConfig | None = None):
        self.config = config or GPTScoreConfig()

    def fingerprint(self) -> str:
        settings = asdict(self.config)
        # Left out when unset, so that judgments cached before the field existed stay valid; when
        # set, the baseline's text (a changed file makes its judgments stale), not its name.
        baseline = settings.pop("baseline_source")
        if baseline is not None:
            settings["baseline_source"] = hashlib.sha256(self.baseline.encode()).hexdigest()[:16]
        return config_fingerprint(self.name, settings)

    def context_fingerprint(self) -> str:
        """:meth:`fingerprint` without the second pass's settings (``unconditional``,
        ``baseline_source``): what a request that reads the output after its own source depends
        on (:meth:`sentence_end`)."""
        settings = asdict(self.config)
        settings.pop("baseline_source")
        settings["unconditional"] = False
        return config_fingerprint(self.name, settings)

    @functools.cached_property
    def baseline(self) -> str | None:
        """The text of ``baseline_source`` (:func:`load_baseline`), None without one."""
        return None if self.config.baseline_source is None else load_baseline(self.config.baseline_source)

    def prompt_revision(self, aspect: Aspect) -> str:
        """What the cache key adds for ``aspect``'s task: its template's revision
        (:data:`~judge_reward.prompts.gptscore.PROMPT_REVISIONS`), empty at the first."""
        revision = PROMPT_REVISIONS.get(aspect.task)
        return f"/prompt{revision}" if revision else ""

    def _pairs(self, item: Item) -> list[tuple[str, str]]:
        """(conditioning text, scored text) for each direction this config averages over."""
        d = self.config.direction
        if d == "src_hypo":
            return [(item.source, item.output)]
        if item.reference is None:
            raise ValueError(f"reference: gptscore.direction {d!r} needs a reference and the item has none")
        if d == "ref_hypo":
            return [(item.reference, item.output)]
        if d == "hypo_ref":
            return [(item.output, item.reference)]
        return [(item.reference, item.output), (item.output, item.reference)]

    def score(self, backend: JudgeBackend, aspect: Aspect, items: Sequence[Item]) -> list[Score]:
        return self.score_aspects(backend, [(aspect, items)])[0]

    def score_aspects(self, backend: JudgeBackend, work: Sequence[tuple[Aspect, Sequence[Item]]]) -> list[list[Score]]:
        """Scores for several (aspect, items) in one backend call, so rows of different aspects that
        share a prefix (the source, in the ``source_first`` layout) are run together."""
        plans = [self._plan(backend, aspect, items) for aspect, items in work]
        return run_plans(plans, backend.continuation_logprobs)

    def _plan(self, backend: JudgeBackend, aspect: Aspect, items: Sequence[Item]):
        """(the continuation requests for ``items``, a function from their results to the Scores)."""
        demos = tuple((d["source"], d["output"]) for d in self.config.demonstrations)
        build = lambda it: build_gptscore_prompt(aspect, it.source, it.output, self.config.instruction, demos,  # noqa: E731
                                                 self.config.layout, it.reference)
        requests, owners, cuts = [], [], {}
        unconditional = []  # per request: is it the output scored without its source?
        scores: list[Score | None] = [None] * len(items)
        for i, item in enumerate(items):
            try:
                if not item.output.strip():
                    raise ValueError("output: empty text cannot be judged")
                pairs = self._pairs(item)
                # the reference rides along only where it is not the conditioning text already
                given = item.reference if self.config.direction == "src_hypo" else None
                prepared = []
                for cond, scored in pairs:
                    fitted, cut = fit_source(backend, Item(scored, cond, given),
                                             lambda it: (lambda p: p.context + p.continuation)(build(it)))
                    prepared.append((build(fitted), cut))
            except ValueError as err:
                scores[i] = Score.failure(str(err))
                continue
            cuts[i] = [cut for _, cut in prepared]
            for prompt, _ in prepared:
                requests.append(ContinuationRequest(prompt.context, prompt.continuation, group=prompt.shared))
                owners.append(i)
                unconditional.append(False)
                if self.config.unconditional:
                    context = unconditional_context(aspect, self.config.layout, self.baseline)
                    requests.append(ContinuationRequest(context, prompt.continuation, group=context))
                    owners.append(i)
                    unconditional.append(True)

        def finish(results_of) -> list[Score]:
            results: dict[int, list] = {}
            without_source: dict[int, object] = {}
            for i, res, alone in zip(owners, results_of, unconditional):
                if alone:
                    without_source[i] = res
                else:
                    results.setdefault(i, []).append(res)
            for i, parts in results.items():
                failed = [r.error for r in [*parts, without_source.get(i)] if r is not None and r.error is not None]
                if failed:
                    scores[i] = Score.failure(failed[0])
                    continue
                means = [sum(r.token_logprobs) / len(r.token_logprobs) for r in parts]
                sums = [sum(r.token_logprobs) for r in parts]
                mean, total = sum(means) / len(means), sum(sums) / len(sums)
                details = {
                    "mean_logprob": mean,
                    "sum_logprob": total,
                    "tokens": [len(r.token_logprobs) for r in parts],
                    "truncated_source_tokens": cuts[i],
                    "boundary": [r.details.get("boundary") for r in parts],
                }
                tokens = None
                if i in without_source:
                    tokens = TokenLogprobs(tuple(parts[0].tokens or ()), tuple(parts[0].token_logprobs),
                                           tuple(without_source[i].token_logprobs))
                scores[i] = Score(mean if self.config.reduce == "mean" else total, None, details, tokens)
            return scores  # type: ignore[return-value]

        return requests, finish

    def sentence_end(self, backend: JudgeBackend, aspect: Aspect, items: Sequence[Item]) -> list[Score]:
        """How likely the judge finds it that a sentence ends right after each output: the
        probability of :data:`SENTENCE_ENDS` as the next text after the output in ``aspect``'s
        ``src_hypo`` prompt (one next-token request per item, no generation). The judge has read the
        source, so a passage copied from it and cut mid-sentence gets a low value, and so does a
        text cut where no sentence can stop (``... before emergency``); a sentence that only lacks
        its full stop (``... in front of 6,000 fans``) a high one. Values in [0, 1]."""
        if aspect.task == "dialogue":
            raise ValueError("sentence_end: dialogue prompts score a ' Yes' after the reply, not the reply's own ending")
        build = lambda it: build_gptscore_prompt(aspect, it.source, it.output, True, (), self.config.layout)  # noqa: E731
        requests, owners, scores = [], [], [None] * len(items)
        for i, item in enumerate(items):
            try:
                if not item.output.strip():
                    raise ValueError("output: empty text cannot be judged")
                fitted, _ = fit_source(backend, item, lambda it: (lambda p: p.context + p.continuation)(build(it)))
            except ValueError as err:
                scores[i] = Score.failure(str(err))
                continue
            prompt = build(fitted)
            requests.append(CandidateRequest(prompt.context + prompt.continuation, SENTENCE_ENDS, group=prompt.shared))
            owners.append(i)
        for i, res in zip(owners, backend.candidate_logprobs(requests) if requests else []):
            if res.error is not None or res.logprobs is None:
                scores[i] = Score.failure(res.error or "the backend returned no log-probabilities")
                continue
            probs = {c: math.exp(lp) for c, lp in zip(SENTENCE_ENDS, res.logprobs) if lp is not None and math.isfinite(lp)}
            scores[i] = Score(min(1.0, sum(probs.values())), None, {"sentence_end": probs})
        return scores  # type: ignore[return-value]
