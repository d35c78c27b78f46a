"""Prompts for the *generating* rating styles: the judge writes its rating as text.

The styles follow the prompt families compared by Chiang & Lee (2023, "A Closer Look into
Automatic Evaluation Using Large Language Models") and Wang et al. (2023, "Is ChatGPT a Good NLG
Evaluator?"). All wording here is this project's own, built from an :class:`~judge_reward.aspects.Aspect`
(its task introduction, criteria, definition, scale and labels):

=====================  ======================================================  ===============
style                  the judge is asked to write                             rating scale
=====================  ======================================================  ===============
``score_only``         a G-Eval form ending in ``- Coherence:``; the score     the aspect's
                       only (optionally after evaluation steps: auto-CoT)
``free_text``          an answer to "How coherent is the response?"            the aspect's
``rate_explain``       ``Rating: ...`` then ``Rationale: ...``                 the aspect's
``analyze_rate``       ``Analysis: ...`` then ``Rating: ...``                  the aspect's
``direct_assessment``  a score from 0 to 100                                   0-100
``stars``              one to five stars                                       1-5
=====================  ======================================================  ===============

Every style can show the human reference (``with_reference=True``) under the aspect's
``reference_label`` ("Reference Summary", "Interesting Fact").
"""

from __future__ import annotations

from typing import Sequence

from ..aspects import Aspect
from ..candidates import SLOT_SUFFIX, format_value
from ..methods.base import Item

STYLES = ("score_only", "free_text", "rate_explain", "analyze_rate", "direct_assessment", "stars")

# Styles that rate on their own scale rather than the aspect's; scores are mapped back linearly.
STYLE_SCALES: dict[str, tuple[float, float]] = {"direct_assessment": (0.0, 100.0), "stars": (1.0, 5.0)}

# Styles built on the criteria form; only these take evaluation steps.
FORM_STYLES = ("score_only", "free_text", "rate_explain", "analyze_rate")

# ---------------------------------------------------------------------------------------------
# Templates. Slots: {intro} task introduction, {criteria}, {steps_block}, {texts} (the source,
# reference and output blocks), {title} "Coherence", {adjective} "coherent", {output} "response",
# {definition}, {scale} "1-3", {scale_words} "a whole number from 1 to 3".

FORM_HEADER = """{intro}

Evaluation criteria:
{criteria}
{steps_block}
{texts}"""

STEPS_BLOCK = """
Evaluation steps:
{steps}
"""

TEXT_BLOCK = """{label}:
{text}
"""

SCORE_ONLY_TAIL = """
Evaluation form (write the score only, nothing else):
- {title}:"""

FREE_TEXT_TAIL = """
Question: How {adjective} is the {output}? Answer with {scale_words}, where {low} is the lowest and {high} the highest."""

RATE_EXPLAIN_TAIL = """
Write your answer on two lines. Start the first line with "Rating:" followed by your {title} score ({scale_words}). Start the second line with "Rationale:" followed by a short explanation of that score."""

ANALYZE_RATE_TAIL = """
Write your answer in two parts. Start with "Analysis:" and examine the {output} against the criteria, as briefly as you can. Then, on a new line, write "Rating:" followed by your {title} score ({scale_words}) and nothing else."""

DIRECT_ASSESSMENT = """{intro}

Judge the {output} below for {name} only: {definition}
Give a score on a continuous scale from 0 to 100. A score of 0 means the {output} has no {name} at all; 100 means its {name} could not be better.

{texts}
Score (0-100):"""

STARS = """{intro}

Judge the {output} below for {name} only: {definition}
Award it between one and five stars. One star means the {output} has very poor {name}; five stars means its {name} is excellent.

{texts}
Stars (1-5):"""

_FORM_TAILS = {
    "score_only": SCORE_ONLY_TAIL,
    "free_text": FREE_TEXT_TAIL,
    "rate_explain": RATE_EXPLAIN_TAIL,
    "analyze_rate": ANALYZE_RATE_TAIL,
}


def rating_scale(style: str, aspect: Aspect) -> tuple[float, float]:
    """The (low, high) the judge is asked to rate on in ``style``: the style's own, or the aspect's."""
    _check_style(style)
    return STYLE_SCALES.get(style, (aspect.scale.low, aspect.scale.high))


def aspect_adjective(name: str) -> str:
    """The adjective of an aspect noun, for "How <adjective> is the response?".

    coherence -> coherent, relevance -> relevant, fluency -> fluent, naturalness -> natural;
    names that no suffix rule covers fall back to "good in <name>".
    """
    word = name.replace("_", " ").strip().lower()
    for suffix, replacement in (("ness", ""), ("ency", "ent"), ("ence", "ent"), ("ance", "ant")):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            return word[: -len(suffix)] + replacement
    return f"good in {word}"


def _scale_words(values: Sequence[float], low: float, high: float) -> str:
    """How the answer's range is described: "a whole number from 1 to 3" or "one of 0, 0.5, 1"."""
    integers = all(float(v).is_integer() for v in values)
    consecutive = integers and list(values) == [low + i for i in range(len(values))]
    if consecutive:
        return f"a whole number from {format_value(low)} to {format_value(high)}"
    return "one of " + ", ".join(format_value(v) for v in values)


def _check_style(style: str) -> None:
    if style not in STYLES:
        raise ValueError(f"style={style!r}: expected one of {', '.join(STYLES)}")


def _texts(aspect: Aspect, item: Item, with_reference: bool) -> str:
    blocks = []
    if item.source.strip():
        blocks.append(TEXT_BLOCK.format(label=aspect.source_label, text=item.source.strip()))
    if with_reference:
        if item.reference is None or not item.reference.strip():
            where = f" (item {item.id!r})" if item.id is not None else ""
            raise ValueError(f"with_reference=True but the item has no reference{where}")
        blocks.append(TEXT_BLOCK.format(label=aspect.reference_label, text=item.reference.strip()))
    blocks.append(TEXT_BLOCK.format(label=aspect.output_label, text=item.output.strip()))
    return "\n".join(blocks)


def build_rating_prompt(
    style: str,
    aspect: Aspect,
    item: Item,
    steps: Sequence[str] | None = None,
    with_reference: bool = False,
) -> str:
    """The prompt that asks a generating judge to rate ``item`` on ``aspect`` in ``style``.

    ``steps`` (evaluation steps, e.g. G-Eval's auto-CoT) are listed after the criteria; only the
    form styles (:data:`FORM_STYLES`) take them. ``with_reference`` shows ``item.reference``.
    """
    _check_style(style)
    intro = aspect.task_introduction or f"Rate the {aspect.output_label.lower()} on one quality aspect only."
    output = aspect.output_label.lower()
    texts = _texts(aspect, item, with_reference)
    name = aspect.name.replace("_", " ")
    if style not in FORM_STYLES:
        if steps:
            raise ValueError(f"style={style!r} takes no evaluation steps; they belong to {', '.join(FORM_STYLES)}")
        template = DIRECT_ASSESSMENT if style == "direct_assessment" else STARS
        prompt = template.format(intro=intro, output=output, name=name, definition=aspect.definition, texts=texts)
        return prompt + SLOT_SUFFIX  # ends on the answer slot, like the score-only form

    steps_block = ""
    if steps:
        numbered = "\n".join(f"{i}. {s.strip()}" for i, s in enumerate(steps, 1))
        steps_block = STEPS_BLOCK.format(steps=numbered)
    low, high = aspect.scale.low, aspect.scale.high
    prompt = FORM_HEADER.format(intro=intro, criteria=aspect.criteria, steps_block=steps_block, texts=texts)
    prompt += _FORM_TAILS[style].format(
        title=aspect.title,
        adjective=aspect_adjective(aspect.name),
        output=output,
        scale_words=_scale_words(aspect.scale.values, low, high),
        low=format_value(low),
        high=format_value(high),
    )
    if style == "score_only":
        prompt += SLOT_SUFFIX  # the form ends on the slot, written as the rest of the project writes it
    return prompt
