"""Loading judges from a local directory, with a PEFT adapter, and failing clearly otherwise."""

import pytest
import torch

from judge_reward.backends.base import ContinuationRequest
from judge_reward.backends.hf import HFBackend, HFBackendConfig, _pick_dtype
from judge_reward.backends.loading import resolve_model
from tiny_models import make_model, make_tokenizer

REQ = [ContinuationRequest("The council met on Tuesday.", " It voted on the budget.")]


@pytest.fixture()
def saved_model(tmp_path):
    tok = make_tokenizer("bpe_bos")
    model = make_model(tok, seed=3)
    model.save_pretrained(tmp_path / "judge")
    tok.save_pretrained(tmp_path / "judge")
    return tmp_path / "judge", model, tok


def test_local_directory_loads_and_matches_the_in_memory_model(saved_model):
    path, model, tok = saved_model
    from_disk = HFBackend(HFBackendConfig(model=str(path), device="cpu", dtype="float32", progress=False))
    in_memory = HFBackend(HFBackendConfig(device="cpu", progress=False), model=model, tokenizer=tok)
    a = from_disk.continuation_logprobs(REQ)[0].token_logprobs
    b = in_memory.continuation_logprobs(REQ)[0].token_logprobs
    assert a == pytest.approx(b, abs=1e-5)
    assert str(path) in from_disk.model_id


def test_peft_adapter_is_applied(saved_model, tmp_path):
    from peft import LoraConfig, get_peft_model

    path, model, tok = saved_model
    lora = get_peft_model(make_model(tok, seed=3), LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    lora.save_pretrained(tmp_path / "adapter")
    with torch.no_grad():
        expected_logits = lora(torch.tensor([tok(REQ[0].context + REQ[0].continuation)["input_ids"]])).logits
    plain = HFBackend(HFBackendConfig(model=str(path), device="cpu", dtype="float32", progress=False))
    adapted = HFBackend(HFBackendConfig(model=str(path), device="cpu", dtype="float32", progress=False,
                                        adapter=str(tmp_path / "adapter")))
    a = adapted.continuation_logprobs(REQ)[0].token_logprobs
    assert a != pytest.approx(plain.continuation_logprobs(REQ)[0].token_logprobs, abs=1e-3)
    ids, start, _ = adapted.split_tokens(REQ[0].context, REQ[0].continuation)
    logp = torch.log_softmax(expected_logits[0].float(), -1)
    assert a == pytest.approx([logp[t - 1, ids[t]].item() for t in range(start, len(ids))], abs=1e-4)
    assert "adapter" in adapted.model_id


def test_unknown_sources_fail_clearly(tmp_path):
    with pytest.raises(FileNotFoundError, match="model hubs are never contacted"):
        resolve_model("some-org/some-model")
    with pytest.raises(ValueError, match="unknown embedded model 'gpt5'"):
        resolve_model("embedded:gpt5")
    with pytest.raises(ValueError, match="dtype: unknown value 'int3'"):
        _pick_dtype("int3", torch.device("cpu"))
    with pytest.raises(ValueError, match="padding_side"):
        HFBackend(HFBackendConfig(padding_side="middle"), model=object(), tokenizer=object())
