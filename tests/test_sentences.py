"""The one sentence splitter (pysbd) and what the guards and probes read through it."""

import pytest

from judge_reward.guards import SourceStats, bare_list_share, unsupported_sentence_share, without_sentences, words
from judge_reward.probes import sentences as probe_sentences
from judge_reward.sentences import sentence_spans, sentences


def test_an_abbreviation_does_not_end_a_sentence():
    assert sentences("The U.S. economy grew. It slowed.") == ["The U.S. economy grew.", "It slowed."]
    assert sentences("Mr. Smith paid $3.5 million at 4 p.m. on Friday. He left.") == [
        "Mr. Smith paid $3.5 million at 4 p.m. on Friday.", "He left."]
    assert probe_sentences("The U.S. economy grew. It slowed.") == ["The U.S. economy grew.", "It slowed."]
    # SummEval's tokenised, lower-cased outputs too
    assert sentences("the u.s. economy grew . it slowed .") == ["the u.s. economy grew .", "it slowed ."]


@pytest.mark.parametrize("text", [
    "The U.S. economy grew. It slowed.",
    "  Leading space. Two  spaces.   Trailing   ",
    "A form:\n- Coherence: 5\n\n- Fluency: 5\n",
    "No mark at all",
    "\n\nBlank lines first.\r\nWindows line.",
    "",
])
def test_spans_cut_the_text_end_to_end(text):
    spans = sentence_spans(text)
    assert "".join(text[a:b] for a, b in spans) == text
    assert all(a < b for a, b in spans) and all(p[1] == q[0] for p, q in zip(spans, spans[1:]))


def test_a_line_break_ends_a_sentence_and_closes_it():
    text = "Summary line one\n- Coherence: 5\n"
    assert [text[a:b] for a, b in sentence_spans(text)] == ["Summary line one\n", "- Coherence: 5\n"]
    two = "It grew.  It slowed."
    assert [two[a:b] for a, b in sentence_spans(two)] == ["It grew.", "  It slowed."]


def test_guards_read_the_same_sentences():
    source = SourceStats("The U.S. economy grew last year, officials said. Exports slowed in March.")
    share, found = unsupported_sentence_share("The U.S. economy grew. Exports slowed.", source.word_set, 4, 0.5)
    assert share == 0.0 and found == []
    filler = "The U.S. economy grew. Everyone will watch closely what happens next."
    share, found = unsupported_sentence_share(filler, source.word_set, 4, 0.5)
    assert found == ["Everyone will watch closely what happens next."]
    assert without_sentences(filler, found) == "The U.S. economy grew."
    assert without_sentences("Kept.\nDropped here.\nKept too.", ["Dropped here."]) == "Kept.\n\nKept too."
    assert bare_list_share("Taylor, Hoddle, Keegan and Eriksson.", 4, 3)[0] == 1.0
    # "U.S." inside a source sentence does not end it: a copy cut after "U.S." stops mid-sentence
    assert words("The U.S. economy grew last year, officials said.")[1:3] == ["u", "s"]
    assert source.sentence_final == {8, 12}  # "said" and "march" end sentences, "u" and "s" do not


def test_the_splitter_reads_the_language_asked_for():
    german = "Die Brücke wird am 3. Mai geschlossen. Laut Dr. Weber kostet das ca. zwei Mio. Euro."
    assert sentences(german, "de") == ["Die Brücke wird am 3. Mai geschlossen.",
                                       "Laut Dr. Weber kostet das ca. zwei Mio. Euro."]
    assert len(sentences(german)) > 2  # English abbreviations: "3." and "ca." end sentences there
    chinese = "市议会决定关闭旧桥。维修工作将于下月开始！费用约为两百万元？"
    assert sentences(chinese, "zh") == ["市议会决定关闭旧桥。", "维修工作将于下月开始！", "费用约为两百万元？"]
    # each Chinese character is a word: the source's sentences end after 桥 (8), 始 (18) and 元 (26)
    assert SourceStats(chinese, "zh").sentence_final == {8, 18, 26}
