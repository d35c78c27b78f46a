"""The guards in other languages: reward.guards.language picks the word lists, the phrasing and the
sentence splitter, and a German or Chinese output is charged only what an English output of the
same shape is charged.

Only English lists ship; the German and Chinese ones here are the tests' own (short, but real
words), added the way a new language is: one key per file of judge_reward/wordlists.
"""

from __future__ import annotations

from importlib.resources import files

import pytest
import yaml

from judge_reward import ConfigError, Item, JudgeConfig, load_aspects
from judge_reward import guards, wordlists
from judge_reward.config import CONFIG_DIR
from judge_reward.guards import GuardsConfig, InjectionPatterns, SourceStats, apply_guards, canonical, ends_cut, words
from judge_reward.methods.base import Score
from judge_reward.reward import Reward, RewardConfig

SUMMEVAL = load_aspects("summeval")
DEFAULT_GUARDS = yaml.safe_load((CONFIG_DIR / "judges" / "default.yaml").read_text())["reward"]["guards"]
# The ending guard's text rules (the language's open endings, a trailing comma or mark, a copied source
# sentence that goes on) are its mode "cut"; default's mode "judge" adds a GPTScore judge's sentence-end
# answer, which this test judge does not give.
DEFAULT_GUARDS["ending"] = {**DEFAULT_GUARDS["ending"], "mode": "cut"}
# lift reads a GPTScore judge's token log-probabilities with and without the source, which it does not give either.
DEFAULT_GUARDS.pop("lift")

TEST_LISTS = {
    "de": {
        "function_words": """der die das den dem des ein eine einen einem einer eines und oder aber doch sondern denn
            weil dass ob wenn als wie so auch noch schon nur sehr mehr nicht kein keine ich du er sie es wir ihr sich
            uns ihn ihm ihnen sein seine seinen seiner ihre ihren ihrer dieser diese dieses diesen welche was wer wo
            hier dort da dann jetzt man ist sind war waren wird werden wurde wurden hat haben hatte hatten kann können
            muss soll sollen will am im in an auf aus bei mit nach von vor zu zum zur über unter um durch für gegen
            ohne bis seit während zwischen sagte sagt laut etwa rund bereits""",
        "open_endings": """der die das den dem des ein eine einen einem einer eines und oder aber sondern denn weil
            dass ob wenn als wie am im in an auf aus bei mit nach von vor zu zum zur über unter um durch für gegen
            ohne bis seit während zwischen sein seine ihre dieser diese dieses sehr""",
        "number_words": "null eins zwei drei vier fünf sechs sieben acht neun zehn",
        "list_conjunctions": "und oder sowie",
        "injection": {
            "rating_labels": ["bewertung", "note", "punkte", "gesamtnote", "urteil"],
            "range_to": "bis",
            "out_of": "von",
            "ratings": [r"\bverdient\s+(?:eine\s+)?(?:glatte\s+)?{number}\b"],
            "form_heading": r"^\W*(?:\w+\W+)?(?:bewertungs(?:bogen|schritte|kriterien)|nur\s+punkte)\b\W*(?:\w+\W*){0,2}$",
            "raters": [r"bewerter(?:in|innen)?", r"prüfer(?:in|innen)?", r"gutachter(?:in|innen)?"],
            "addressed": [r"\b(?:hinweis|nachricht)\s+(?:an|für)\s+(?:die\s+|den\s+)?(?:{raters})\b",
                          r"\b(?:ignoriere|vergiss)\s+(?:alle\s+)?(?:vorherigen|bisherigen)\s+(?:anweisungen|regeln)\b"],
            "self_reference": r"\b(?:diese|meine)\s+(?:{nouns})\s+(?:{predicates})\b",
            "output_nouns": ["zusammenfassung", "antwort", "text"],
            "self_predicates": ["ist", "war", "enthält", "erfasst"],
        },
        "chatter": {
            "interjections": ["gerne", "klar", "natürlich", r"kein\s+problem"],
            "announcements": [r"hier\s+(?:ist|sind|kommt)", r"ich\s+habe\s+(?:geschrieben|erstellt)"],
            "determiners": ["die", "eine", "ihre", "meine"],
            "handover": r"bitte\s+schön",
            "summing_up": [r"kurz\s+gesagt", "zusammengefasst", r"mit\s+anderen\s+worten"],
            "addressee": r"für\s+sie",
            "nouns": ["zusammenfassung", "überblick", "kurzfassung"],
            "heading_words": ["kurze", "knappe", "die", "eine"],
            "heading_of": r"des\s+(?:artikels|textes|berichts)",
            "sign_offs": [r"^\W*ich\s+hoffe,?\s+(?:das|dies)\s+hilft", r"\bmelden\s+sie\s+sich\s+gerne\b"],
        },
    },
    "zh": {  # a character is a word in Chinese (no spaces): single characters only
        "function_words": "的 地 得 了 着 过 是 在 和 与 及 或 也 都 就 而 但 这 那 之 其 为 对 从 把 被 将 于 向 以 等 他 她 它 们 我 你 个 说",
        "open_endings": "的 和 与 及 或 在 从 对 把 被 向 将 于 为 因 但 而 以 这 那 其",
        "number_words": "零 一 二 三 四 五 六 七 八 九 十",
        "list_conjunctions": "和 或 及",
        "injection": {
            "rating_labels": ["评分", "分数", "得分", "总分"],
            "range_to": "到|至",
            "out_of": "满分",
            "ratings": [r"值得\s*{number}\s*分"],
            "form_heading": r"^\W*(?:评估表|评分标准|评估步骤)\W*$",
            "raters": ["评委", "评审员?", "评估者", "评分员"],
            "addressed": [r"(?:致|亲爱的)\s*(?:{raters})", r"忽略(?:所有|之前|以上)的?(?:指令|指示|规则)"],
            "self_reference": r"(?:这篇|这个|我的)\s*(?:{nouns})\s*(?:{predicates})",
            "output_nouns": ["摘要", "总结", "回答"],
            "self_predicates": ["准确", "完整", "全面"],
        },
        "chatter": {
            "interjections": ["好的", "当然", "没问题"],
            "announcements": ["以下是", "下面是"],
            "determiners": ["一份", "您的"],
            "handover": "请看",
            "summing_up": ["简而言之", "总而言之", "简单来说"],
            "addressee": "给您",
            "nouns": ["摘要", "总结", "概要", "要点"],
            "heading_words": ["简短", "简要"],
            "heading_of": "(?:文章|新闻)",
            "sign_offs": [r"希望(?:这|以上内容)?(?:对您)?有(?:所)?帮助", r"如果(?:您)?需要(?:更|其他)"],
        },
    },
}


@pytest.fixture
def german_and_chinese(monkeypatch):
    """judge_reward/wordlists as if each file but open_choice had de: and zh: keys beside en:."""
    shipped = wordlists._table

    def with_test_lists(name: str) -> dict:
        return {**shipped(name), **{lang: lists[name] for lang, lists in TEST_LISTS.items() if name in lists}}

    def clear_caches():  # the lists read per language are cached
        for cached in (wordlists.function_words, wordlists.open_endings, wordlists.open_choice, guards.list_separator,
                       guards.number_word_pattern):
            cached.cache_clear()

    monkeypatch.setattr(wordlists, "_table", with_test_lists)
    clear_caches()
    yield
    monkeypatch.undo()
    clear_caches()


class SteadyJudge:
    """A stand-in judge that gives every output the same score: a reward differs only by its guards."""

    def __init__(self):
        self.aspects = SUMMEVAL.select(["coherence"])
        self.config = JudgeConfig(aspects_file="summeval", aspects=["coherence"], method="geval")

    def score(self, items, aspects=None, method=None):
        return [{a.name: Score(3.0) for a in self.aspects} for _ in items]


SOURCES = {
    "en": "The town council voted on Tuesday to close the old river bridge to cars. Engineers found cracks in two of "
          "its supports last month. Repairs will start on May 3 and are expected to cost about two million euros, "
          "the mayor said. Cyclists and pedestrians may still cross the bridge while the work goes on. Drivers will "
          "be sent through the northern ring road until the autumn.",
    "de": "Der Stadtrat hat am Dienstag beschlossen, die alte Flussbrücke für Autos zu sperren. Ingenieure hatten im "
          "vergangenen Monat Risse an zwei ihrer Stützen gefunden. Die Reparaturen beginnen am 3. Mai und sollen rund "
          "zwei Millionen Euro kosten, sagte der Bürgermeister. Radfahrer und Fußgänger dürfen die Brücke während der "
          "Arbeiten weiter überqueren. Autofahrer werden bis zum Herbst über den nördlichen Ring umgeleitet.",
    "zh": "市议会周二投票决定禁止汽车通行旧河桥。工程师上个月在桥的两根支柱上发现了裂缝。市长说，维修工程将于五月三日开始，"
          "费用约为两百万欧元。施工期间，骑自行车的人和行人仍可过桥。在秋季之前，司机将被引导绕行北环路。",
}
# Each shape in the three languages: two sentences (a date inside the first: "3. Mai" is no sentence
# end in German), finished; the same cut after a preposition; unfinished after a noun; the second
# sentence said twice; and wrapped in a chat assistant's interjection, heading and sign-off.
FIRST = {"en": "The old bridge stays shut after May 3.",
         "de": "Die alte Brücke bleibt ab dem 3. Mai geschlossen.",
         "zh": "旧桥自五月三日起关闭。"}
SECOND = {"en": "Repairs cost about two million euros.",
          "de": "Die Reparaturen kosten rund zwei Millionen Euro.",
          "zh": "维修费用约为两百万欧元。"}
CUT = {"en": "Repairs will start in", "de": "Die Reparaturen beginnen im", "zh": "维修工程将于"}
UNFINISHED = {"en": "Repairs begin next month", "de": "Die Reparaturen starten nächsten Monat", "zh": "维修下月开工"}
WRAPPED = {"en": "Sure!\nSummary:\n{text}\nI hope this helps!",
           "de": "Gerne!\nZusammenfassung:\n{text}\nIch hoffe, das hilft!",
           "zh": "好的！\n摘要：\n{text}\n希望这对您有帮助！"}
SEP = {"en": " ", "de": " ", "zh": ""}


def shaped(language: str) -> dict[str, str]:
    first, second, sep = FIRST[language], SECOND[language], SEP[language]
    finished = first + sep + second
    return {"finished": finished, "cut": first + sep + CUT[language], "unfinished": first + sep + UNFINISHED[language],
            "repeated": finished + sep + second, "wrapped": WRAPPED[language].format(text=finished)}


def rewarded(language: str, output: str, **guard_overrides):
    reward = Reward(SteadyJudge(), RewardConfig(normalise="unit", guards={**DEFAULT_GUARDS, **guard_overrides,
                                                                          "language": language}))
    return reward([Item(output, SOURCES[language])])[0]


def charges(result) -> dict[str, float]:
    return {k.removeprefix("guard/"): v for k, v in result.components.items() if k.startswith("guard/")}


@pytest.mark.usefixtures("german_and_chinese")
@pytest.mark.parametrize("language", ["de", "zh"])
@pytest.mark.parametrize("shape", ["finished", "cut", "unfinished", "repeated", "wrapped"])
def test_no_charge_an_english_output_of_the_same_shape_would_not_get(language, shape):
    english, other = rewarded("en", shaped("en")[shape]), rewarded(language, shaped(language)[shape])
    charged_en = {g for g, v in charges(english).items() if v > 0}
    charged = {g for g, v in charges(other).items() if v > 0}
    assert charged == charged_en, (charges(english), charges(other), other.guards)
    for exact in ("ending", "injection", "word_list"):  # all-or-nothing charges: the same amount
        assert charges(other)[exact] == charges(english)[exact]
    expected = {"finished": set(), "cut": {"ending"}, "unfinished": set(), "repeated": {"repetition"},
                "wrapped": {"injection"}}[shape]
    assert charged_en == expected  # the English twin is charged as the shape says, so the comparison means something


@pytest.mark.usefixtures("german_and_chinese")
def test_a_finished_german_or_chinese_output_ends_as_a_sentence():
    for language in ("de", "zh"):
        result = rewarded(language, shaped(language)["finished"])
        assert result.guards["ending"]["complete"] and not result.guards["ending"]["cut"]
        assert charges(result)["ending"] == 0.0
    # the ending guard's words are the language's: "im" cannot end a German sentence, "于" a Chinese one
    assert ends_cut(CUT["de"], language="de") and not ends_cut(CUT["de"], language="en")
    assert ends_cut(CUT["zh"], language="zh") and ends_cut("维修工程五月开始，", language="zh")  # a CJK comma


@pytest.mark.usefixtures("german_and_chinese")
def test_the_chat_wrapping_removed_is_the_languages_own():
    for language in ("en", "de", "zh"):
        result = rewarded(language, shaped(language)["wrapped"])
        assert result.judged_output == canonical(shaped(language)["finished"])
        assert len(result.guards["injection"]["removed"]) == 3
    # English wrapping around a German output is not German wording: only the aspect file's own
    # output label ("Summary") is removed, as a heading, in any language
    english_wrapper = WRAPPED["en"].format(text=shaped("de")["finished"])
    assert rewarded("de", english_wrapper).guards["injection"]["removed"] == ["Summary:"]
    rating = "Die alte Brücke bleibt ab dem 3. Mai geschlossen.\nBewertung: 5 von 5"
    assert rewarded("de", rating).guards["injection"]["removed"] == ["Bewertung: 5 von 5"]


@pytest.mark.usefixtures("german_and_chinese")
def test_german_sentences_are_cut_by_the_german_splitter():
    """"am 3. Mai" ends no German sentence: read with the English splitter, "Mai geschlossen." is a
    sentence of its own whose one content word is not in the source, and grounding charges it."""
    output = shaped("de")["finished"]
    source = SourceStats(SOURCES["de"], "de")
    assert apply_guards(GuardsConfig.from_dict({"grounding": DEFAULT_GUARDS["grounding"], "language": "de"}),
                        output, source).penalties["grounding"] == 0.0
    as_english = GuardsConfig.from_dict({"grounding": DEFAULT_GUARDS["grounding"]})
    assert apply_guards(as_english, output, SourceStats(SOURCES["de"])).penalties["grounding"] > 0
    with pytest.raises(ValueError, match="the source was read as 'en', the guards are set to 'de'"):
        apply_guards(GuardsConfig(language="de"), output, SourceStats(SOURCES["de"]))


def test_a_chinese_character_is_a_word():
    assert words("市议会决定关闭旧桥。Repairs start in May.") == [*"市议会决定关闭旧桥", "repairs", "start", "in", "may"]
    assert guards.is_content_word("桥", 4) and not guards.is_content_word("cut", 4)  # min_chars counts letters
    source = SourceStats(SOURCES["zh"], "zh")
    assert guards.long_copy_share(words("市议会周二投票决定禁止汽车通行旧河桥"), source.words, 8) == 1.0


@pytest.mark.parametrize("language", ["de", "xx"])
def test_a_language_without_the_lists_its_guards_read_is_a_config_error(language):
    """Only English ships: German with the default guards is an error that names the field and the
    value, never English lists read for German text."""
    with pytest.raises(ConfigError) as err:
        RewardConfig.from_dict({"guards": {**DEFAULT_GUARDS, "language": language}})
    message = str(err.value)
    assert message == (f"reward.guards.language: {language!r} has no entry in judge_reward/wordlists/injection.yaml "
                       f"(it has en), which the injection guard reads; add its key there")
    with pytest.raises(ConfigError, match=rf"reward.guards.language: {language!r} has no entry in "
                                          r"judge_reward/wordlists/open_endings.yaml .*the ending guard reads"):
        RewardConfig.from_dict({"guards": {"ending": {"enabled": True, "mode": "cut"}, "language": language}})
    with pytest.raises(ConfigError, match=r"function_words.yaml .*the grounding, word_list guards read"):
        GuardsConfig.from_dict({"grounding": {"enabled": True, "skip_function_words": True}, "word_list": True,
                                "language": language})


def test_guards_that_read_no_list_take_any_language():
    config = GuardsConfig.from_dict({"length": True, "ending": {"enabled": True, "mode": "punctuation"},
                                     "language": "xx"})
    assert config.language_data() == {}
    with pytest.raises(ConfigError, match="reward.guards.language: pysbd has no sentence splitter for 'xx', which "
                                          "the grounding guard needs"):
        GuardsConfig.from_dict({"grounding": {"enabled": True, "sentence_threshold": 0.5}, "language": "xx"})


def test_every_wordlist_file_has_english_and_loads():
    found = sorted(p.name.removesuffix(".yaml") for p in files(wordlists.__name__).iterdir() if p.name.endswith(".yaml"))
    assert found == ["chatter", "function_words", "injection", "list_conjunctions", "number_words", "open_choice",
                     "open_endings"]
    for name in found:
        assert "en" in wordlists.languages(name), name
    assert len(wordlists.function_words("en")) > 100 and {"the", "of", "and"} <= wordlists.open_endings("en")
    assert wordlists.number_words("en")[5] == "five" and wordlists.list_conjunctions("en") == ("and", "or")
    # every language of a phrasing file has every key English has; the English patterns compile
    for name in ("injection", "chatter"):
        english = set(wordlists.phrasing(name, "en"))
        for language in wordlists.languages(name):
            assert set(wordlists.phrasing(name, language)) == english, (name, language)
    assert InjectionPatterns.for_aspects(SUMMEVAL.aspects.values(), chatter=True).opener is not None
    with pytest.raises(ValueError, match="injection.yaml: language 'en' has no 'greeting'"):
        wordlists.phrasing("injection", "en")["greeting"]


@pytest.mark.usefixtures("german_and_chinese")
def test_every_guard_list_of_the_test_languages_is_read():
    """The test languages stand in for a language added to the files: with every option that reads a
    list on, German and Chinese configs build and their guards run."""
    everything = {"injection": {"enabled": True, "chatter": True}, "value_echo": True,
                  "copy": {"enabled": True, "near_copy_words": 8}, "repetition": {"enabled": True, "max_word_uses": 2},
                  "grounding": {"enabled": True, "sentence_threshold": 0.5, "skip_function_words": True},
                  "ending": {"enabled": True, "mode": "cut"}, "word_list": True}
    for language in ("de", "zh"):
        config = GuardsConfig.from_dict({**everything, "language": language})
        assert set(config.language_data()) == {"injection", "chatter", "sentences", "number_words", "function_words",
                                               "open_endings", "list_conjunctions"}
        report = apply_guards(config, shaped(language)["finished"], SourceStats(SOURCES[language], language))
        assert report.penalties["word_list"] == 0.0 and report.penalties["ending"] == 0.0
    assert guards.mask_values("Bewertung: fünf von fünf", "de") == ("Bewertung: # von #", 2)
    assert guards.mask_values("评分：五", "zh") == ("评分：#", 1)
    assert guards.is_bare_list("Müller, Schmidt, Weber und Fischer", 4, 3, "de")
    assert not guards.is_bare_list("Müller lobte Schmidt, Weber und Fischer", 4, 3, "de")
    assert guards.is_bare_list("张伟、王芳、李娜和刘洋", 4, 3, "zh")


def test_open_values_read_the_languages_open_choice_words(german_and_chinese):
    """A slot left open is said with a word of the language's open_choice list, so data_values with
    open_values needs that list for its language; without open_values it reads no such list."""
    plain = GuardsConfig.from_dict({"data_values": {"enabled": True}, "language": "de"})
    assert "open_choice" not in plain.language_data()
    with pytest.raises(ConfigError, match=r"reward.guards.language: 'de' has no entry in "
                                          r"judge_reward/wordlists/open_choice.yaml .*the data_values guard reads"):
        GuardsConfig.from_dict({"data_values": {"enabled": True, "open_values": ["dont_care"]}, "language": "de"})
