"""Word lists are package data keyed by language; the guards and the probes read the same one."""

import pytest

from judge_reward.guards import is_bare_list, is_content_word
from judge_reward.probes import content_words
from judge_reward.wordlists import function_words


def test_one_function_word_list_for_guards_and_probes():
    words = function_words("en")
    assert {"the", "and", "about", "which", "said"} <= words
    assert not words & {"council", "bridge", "repairs"}
    assert not is_content_word("about", 4, skip_function_words=True) and is_content_word("about", 4)
    assert content_words("The council said that the bridge will close, and repairs start soon.") == [
        "council", "bridge", "close", "repairs", "start", "soon"]
    assert is_bare_list("Taylor, Hoddle, Keegan and Eriksson", 4, 3)
    assert not is_bare_list("Taylor said Hoddle, Keegan and Eriksson", 4, 3)  # a predicate: prose
    with pytest.raises(ValueError, match="no list for language 'xx'; the file has en"):
        function_words("xx")
