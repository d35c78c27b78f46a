"""GPTScore prompts: an instruction that names the aspect, the conditioning text, the scored text.

GPTScore scores text h as the (weighted) log-likelihood of h under an instruction T(d, a, S) built
from the task description d, the aspect a and the conditioning text S. The templates follow the
shape GPTScore uses per task (a summarisation request ending in a TL;DR cue, a paraphrase cue for
data-to-text and translation, a yes/no question for dialogue); the wording is this project's own,
filled with each aspect's ``quality`` phrase.

Boundary rule: the context ends *without* trailing whitespace and the scored text is appended
with exactly one leading space, so the scored tokens are the tokens the model itself would write
after the cue (tested in tests/test_gptscore.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..aspects import Aspect

# {quality} is the aspect's adjective phrase; {source} the conditioning text.
INSTRUCTIONS = {
    "summarization": "Write a {quality} summary of the following text.\n\n{source}\n\nTL;DR:",
    "data_to_text": "Turn the following data into {quality} text.\n\n{source}\n\nIn other words:",
    "translation": "Translate the following text into {quality} English.\n\n{source}\n\nIn other words:",
    "generic": "Write a {quality} response to the following text.\n\n{source}\n\nResponse:",
}
# The same instructions after the conditioning text: every aspect of an item then shares the prefix
# up to the instruction (``gptscore.layout: source_first``).
INSTRUCTIONS_SOURCE_FIRST = {
    "summarization": "{source}\n\nWrite a {quality} summary of the text above.\n\nTL;DR:",
    "data_to_text": "{source}\n\nTurn the data above into {quality} text.\n\nIn other words:",
    "translation": "{source}\n\nTranslate the text above into {quality} English.\n\nIn other words:",
    "generic": "{source}\n\nWrite a {quality} response to the text above.\n\nResponse:",
}
# Open-ended outputs have no conditioning text: the judge reads the aspect's instruction and the
# output alone, whatever source an item carries (a trainer may pass the prompt in its place). One
# template serves both layouts: with no source there is nothing to put first.
OPEN_ENDED = "Write a {quality} text.\n\nText:"
LAYOUTS = ("instruction_first", "source_first")
VANILLA = "{source}\n\n"

# Dialogue is asked as a question about the response, and the scored text is the answer "Yes".
# An item's reference (Topical-Chat: the fact the next speaker may use) goes between the
# conversation and the reply, under the aspect file's reference label.
DIALOGUE = (
    "Read the conversation and the reply that follows it, then answer the question.\n\n"
    "Conversation:\n{source}\n\n{given}Reply: {output}\n\nQuestion: Is the reply {quality}?\nAnswer:"
)
DIALOGUE_ANSWER = " Yes"

# Raised when a task's template changes what the judge reads, so that judgments cached from the old
# prompt are not replayed as the new one's (the cache key holds the item, not the prompt). A task
# not listed is at its first revision and adds nothing to the key.
PROMPT_REVISIONS = {"dialogue": 2}  # 2: the item's reference (Topical-Chat's fact) shown

DEMO_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class GPTScorePrompt:
    context: str
    continuation: str
    shared: str  # the part that does not depend on the scored text


def build_gptscore_prompt(
    aspect: Aspect,
    source: str,
    output: str,
    instruction: bool = True,
    demonstrations: tuple[tuple[str, str], ...] = (),
    layout: str = "instruction_first",
    reference: str | None = None,
) -> GPTScorePrompt:
    """Context and scored continuation for scoring ``output`` given ``source``.

    ``reference``: read by the dialogue question only, which shows it after the conversation under
    the aspect's ``reference_label`` (Topical-Chat's "Interesting Fact", which the groundedness
    question asks about); the other tasks condition on the source alone (``gptscore.direction``
    conditions on a reference instead).

    ``demonstrations`` are (source, output) pairs written with the same template before the
    query (GPTScore's in-context setting). ``layout`` (:data:`LAYOUTS`): the aspect's instruction
    before the conditioning text (GPTScore's order) or after it, so that all aspects of an item
    share the conditioning text as a prefix.
    """
    if aspect.task == "dialogue":
        demos = "".join(
            DIALOGUE.format(source=s.strip(), given="", output=o.strip(), quality=aspect.quality) + DIALOGUE_ANSWER
            + DEMO_SEPARATOR for s, o in demonstrations
        )
        given = f"{aspect.reference_label}: {reference.strip()}\n\n" if reference and reference.strip() else ""
        context = demos + DIALOGUE.format(source=source.strip(), given=given, output=output.strip(), quality=aspect.quality)
        shared = demos + DIALOGUE.split("{output}")[0].format(source=source.strip(), given=given)
        return GPTScorePrompt(context, DIALOGUE_ANSWER, shared)
    if aspect.task == "open_ended":
        return _open_ended_prompt(aspect, output, instruction, demonstrations)
    templates = INSTRUCTIONS_SOURCE_FIRST if layout == "source_first" else INSTRUCTIONS
    template = templates.get(aspect.task, templates["generic"]) if instruction else VANILLA
    demos = "".join(
        template.format(source=s.strip(), quality=aspect.quality) + " " + o.strip() + DEMO_SEPARATOR
        for s, o in demonstrations
    )
    context = demos + template.format(source=source.strip(), quality=aspect.quality)
    if not instruction:
        context = context.rstrip()
        return GPTScorePrompt(context, " " + output.strip(), context)
    # What every aspect shares: with the source first, everything before the instruction.
    shared = demos + template.split("{source}")[0] + source.strip() if layout == "source_first" else context
    return GPTScorePrompt(context, " " + output.strip(), shared)


def _open_ended_prompt(aspect: Aspect, output: str, instruction: bool,
                       demonstrations: tuple[tuple[str, str], ...]) -> GPTScorePrompt:
    """The ``open_ended`` task's prompt: the instruction (or nothing, in GPTScore's vanilla setting)
    and the output; a demonstration's source is not shown either. Every output of an aspect shares
    the whole context, which the backend runs once."""
    head = OPEN_ENDED.format(quality=aspect.quality) if instruction else ""
    demos = "".join(f"{head} {o.strip()}{DEMO_SEPARATOR}".lstrip() for _, o in demonstrations)
    context = (demos + head).rstrip()
    if not context:
        raise ValueError("gptscore.instruction: an open-ended output with neither an instruction nor a source "
                         "leaves the judge no context to score it after")
    return GPTScorePrompt(context, " " + output.strip(), context)


def unconditional_context(aspect: Aspect, layout: str = "instruction_first", baseline: str | None = None) -> str:
    """The context of :func:`build_gptscore_prompt` without the item's source: the aspect's
    instruction and cue alone, so the judge scores what the output is worth when it has not read the
    source (the reward's ``copy_credit``, ``information`` and ``lift`` compare the two). With
    ``baseline`` (``gptscore.baseline_source``) the instruction reads that text in the source's
    place: the judge scores what a text of the same kind, about something else, makes likely.

    >>> from judge_reward.aspects import load_aspects
    >>> relevance = load_aspects("summeval").get("relevance")
    >>> unconditional_context(relevance, "source_first").startswith("Write a")
    True
    >>> unconditional_context(relevance, "source_first", "Another article.").startswith("Another article.")
    True
    """
    if aspect.task == "dialogue":
        raise ValueError("gptscore.unconditional: dialogue prompts score a ' Yes', not the output's own tokens")
    if aspect.task == "open_ended":  # it reads no source anyway
        return OPEN_ENDED.format(quality=aspect.quality)
    if baseline is not None:
        return build_gptscore_prompt(aspect, baseline, "", layout=layout).context
    templates = INSTRUCTIONS_SOURCE_FIRST if layout == "source_first" else INSTRUCTIONS
    template = templates.get(aspect.task, templates["generic"])
    return template.replace("{source}\n\n", "").format(quality=aspect.quality)
