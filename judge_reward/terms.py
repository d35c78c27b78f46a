"""The reward's main term: what the reward starts from, before its guards charge anything.

``reward.term`` names it (:data:`TERMS`)::

    reward = term - sum_g penalty_g

* ``judge`` (the default): the judge's score, the weighted mean of the chosen aspects' values
  (normalised as ``reward.normalise`` says);
* ``information``: what the output says about its source (:class:`InformationTerm`, settings in
  ``reward.information``), read from the judge's token log-probabilities with and without the
  source. The judge's aspect scores are still computed and reported beside it.

The reward's report (:class:`~judge_reward.reward.RewardResult`) carries the term as the component
``term/<name>`` and what it measured in ``RewardResult.term``; guards stay ``guard/<name>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional, Sequence

from .config import NonNegativeInt, PositiveInt, Section
from .guards import source_information
from .methods.base import TokenLogprobs

TERMS = ("judge", "information")
"""The main terms a reward can start from (``reward.term``)."""


@dataclass
class InformationTerm(Section):
    """The information the output gives about its source, in nats per budget token.

    For each aspect the judge reads the output twice, after the aspect's instruction with the source
    and without it (GPTScore with ``gptscore.unconditional: true``), and

        information = (1 / B) * sum over the first min(n, B) tokens k of
                      [k not copied] * (log p(t_k | source, ...) - log p(t_k | no source, ...))

    with ``B = budget_tokens`` (the output's own length n when ``budget_tokens`` is null); the
    term is the aspects' weighted mean of it. Copied tokens (verbatim source fragments of at least
    ``min_fragment`` words, near copies with ``near_copy_words``, unsupported sentences with
    ``grounded_only``) count 0: a pasted lead earns nothing for having been read. Padding earns
    nothing (it is as likely without the source) and tokens past the budget add nothing, so a
    shorter output cannot reach a longer one's total. What maximises it alone is a list of the
    source's names: pair it with ``guards.likelihood_floor`` (docs/rewards.md).

    Needs the item's source and the judge's token log-probabilities with and without it
    (:attr:`needs`: ``source``, ``tokens``): method ``gptscore`` with ``gptscore.unconditional:
    true``; :class:`~judge_reward.reward.Reward` refuses any other judge config.

    >>> tokens = TokenLogprobs(("The", " council", " voted"), (-1.0, -0.5, -0.2), (-2.0, -3.0, -0.2))
    >>> InformationTerm(budget_tokens=4).value(tokens, copied=[False, True, False])  # (1 + 0 + 0) / 4
    0.25
    >>> InformationTerm(budget_tokens=None).value(tokens, copied=[False, False, False])  # (1 + 2.5 + 0) / 3
    1.1666666666666667
    """

    section_path: ClassVar[str] = "reward.information"
    needs: ClassVar[frozenset[str]] = frozenset({"source", "tokens"})
    """What it reads besides the output, in :meth:`judge_reward.guards.Guard.requires`'s words."""

    min_fragment: PositiveInt = 4
    """Tokens inside verbatim source fragments of at least this many words count 0."""
    near_copy_words: NonNegativeInt = 0
    """With a positive number, tokens of a near copy count 0 too: a run of at least this many
    content words (4+ letters, not function words) that follows the source with small edits (a word
    swapped, dropped or inserted between matches; hyphens inside words ignored). 0: verbatim
    fragments only."""
    budget_tokens: Optional[PositiveInt] = 32
    """The information is summed over the output's first ``budget_tokens`` tokens and divided by
    ``budget_tokens``: what the output says within a fixed budget. Null: averaged over the output's
    own tokens, which one salient token maximises (GRPO run 7: the article's main name alone)."""
    grounded_only: bool = False
    """Tokens of the sentences that ``guards.grounding`` finds unsupported (it needs its
    ``sentence_threshold``) count 0 too, and ``guards.likelihood_floor.uncopied_only`` leaves them
    out. In no shipped config: with ``grounding.skip_function_words`` a GRPO policy learned to paste
    the article (docs/grpo_hacking.md, run 23)."""

    def requires(self) -> frozenset[str]:
        return self.needs

    def value(self, tokens: TokenLogprobs, copied: Sequence[bool]) -> float:
        """The information of one aspect's reading of the output; ``copied``: per token, whether
        it earns nothing (a copy, or with ``grounded_only`` an unsupported sentence)."""
        if not tokens.texts:
            return 0.0
        return source_information(tokens.with_source, tokens.without_source, copied,
                                  self.budget_tokens or len(tokens.texts))
