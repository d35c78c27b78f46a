"""The GGUF loading path: a ``.gguf`` file is dequantised once into a dense cached copy and loads as the judge.

A tiny random Llama and its byte-level BPE tokenizer are written with ``gguf.GGUFWriter`` the way
llama.cpp writes them (llama.cpp tensor names, ``tokenizer.ggml.*`` metadata, q/k rows permuted for
its rotary layout), then loaded through :func:`resolve_model` / :func:`converted_directory` /
:class:`HFBackend`. Equal logits prove the tensor mapping and the reversal of the permutation.
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
import torch

from gguf_writer import permute_qk, write_llama_gguf
from judge_reward.backends.hf import HFBackend, HFBackendConfig
from judge_reward.backends.loading import ModelSource, _file_digest, converted_directory, resolve_model
from tiny_models import make_model, make_tokenizer

SENTENCE = "The summary is coherent and fluent. Rating: 4 out of 5 stars, 100 points!"
LOADING_LOGGER = "judge_reward.backends.loading"


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    """``(path, model, tokenizer)``: a tiny random Llama with a BOS-adding BPE tokenizer, as F32 GGUF."""
    tokenizer = make_tokenizer("bpe_bos")
    model = make_model(tokenizer, "llama", seed=3)
    path = write_llama_gguf(tmp_path_factory.mktemp("gguf") / "tiny-llama.gguf", model, tokenizer)
    return path, model, tokenizer


def _load(path) -> HFBackend:
    return HFBackend(HFBackendConfig(model=str(path), device="cpu", dtype="float32", progress=False))


def _snapshot(directory):
    """Every file under ``directory`` with its modification time and inode: changes if anything is rewritten."""
    return {
        str(p.relative_to(directory)): (p.stat().st_mtime_ns, p.stat().st_ino)
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def test_writer_permutes_q_and_k(tiny_gguf):
    """The file really holds llama.cpp's permuted q/k rows, so equal logits below test the reversal."""
    import gguf

    path, model, _ = tiny_gguf
    cfg = model.config
    stored = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(str(path)).tensors}
    q = model.model.layers[0].self_attn.q_proj.weight.detach().numpy()
    k = model.model.layers[0].self_attn.k_proj.weight.detach().numpy()
    assert stored["blk.0.attn_q.weight"].shape == q.shape
    np.testing.assert_array_equal(stored["blk.0.attn_q.weight"], permute_qk(q, cfg.num_attention_heads))
    np.testing.assert_array_equal(
        stored["blk.0.attn_k.weight"], permute_qk(k, cfg.num_attention_heads, cfg.num_key_value_heads)
    )
    assert not np.array_equal(stored["blk.0.attn_q.weight"], q)
    assert not np.array_equal(stored["blk.0.attn_k.weight"], k)
    assert "output.weight" in stored  # untied head, written separately


def test_gguf_file_loads_converts_once_and_matches_original(tiny_gguf, tmp_path, monkeypatch, caplog):
    path, model, tokenizer = tiny_gguf
    cache = tmp_path / "cache"
    monkeypatch.setenv("JUDGE_REWARD_CACHE", str(cache))
    digest = _file_digest(path)

    source = resolve_model(str(path))
    assert source == ModelSource(str(path), gguf=path.resolve())
    assert source.directory is None
    assert source.model_id == f"{path}@{digest}"

    # First load: converts, logging that it does.
    with caplog.at_level(logging.WARNING, logger=LOADING_LOGGER):
        backend = _load(path)
    assert any("Converting" in r.getMessage() and path.name in r.getMessage() for r in caplog.records)

    # The dense copy sits under $JUDGE_REWARD_CACHE/converted/<digest>, complete, with no temporary left.
    converted = cache / "converted"
    assert [p.name for p in converted.iterdir() if p.suffix != ".lock"] == [digest]
    target = converted / digest
    assert (target / "config.json").is_file()
    assert list(target.glob("*.safetensors"))
    assert (target / "tokenizer.json").is_file() or (target / "tokenizer_config.json").is_file()
    assert "quantization_config" not in (target / "config.json").read_text()
    assert converted_directory(source) == target
    assert backend.model_id == f"{path}@{digest}:float32"
    assert backend.dtype == torch.float32

    # Same architecture and shape as the original.
    loaded_cfg, cfg = backend.model.config, model.config
    for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "max_position_embeddings", "tie_word_embeddings"):
        assert getattr(loaded_cfg, key) == getattr(cfg, key), key
    assert loaded_cfg.rms_norm_eps == pytest.approx(cfg.rms_norm_eps, rel=1e-6)

    # The tokenizer: same vocabulary ids, same ids for a sentence (BOS once), and back to the text.
    loaded_tok = backend.tokenizer
    assert tokenizer.get_vocab().items() <= loaded_tok.get_vocab().items()
    expected = tokenizer(SENTENCE)["input_ids"]
    assert expected[0] == tokenizer.bos_token_id
    assert loaded_tok(SENTENCE)["input_ids"] == expected
    assert backend.encode(SENTENCE) == expected
    assert loaded_tok.decode(expected, skip_special_tokens=True) == SENTENCE
    for name in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id"):
        assert getattr(loaded_tok, name) == getattr(tokenizer, name), name

    # The weights: every tensor back where it came from (q/k un-permuted), hence the same logits.
    original = model.state_dict()
    restored = backend.model.state_dict()
    assert restored.keys() == original.keys()
    for name, tensor in original.items():
        torch.testing.assert_close(restored[name], tensor, rtol=0, atol=0, msg=lambda m, n=name: f"{n}: {m}")
    ids = torch.tensor([expected])
    with torch.no_grad():
        want = model(input_ids=ids).logits
        got = backend.model(input_ids=ids).logits
    torch.testing.assert_close(got, want, rtol=0, atol=1e-4)

    # Second load: reuses the copy without converting again or rewriting a file.
    before = _snapshot(target)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOADING_LOGGER):
        again = _load(path)
    assert not [r for r in caplog.records if "Converting" in r.getMessage()]
    assert _snapshot(target) == before
    assert [p.name for p in converted.iterdir() if p.suffix != ".lock"] == [digest]
    assert again.model_id == backend.model_id
    with torch.no_grad():
        torch.testing.assert_close(again.model(input_ids=ids).logits, want, rtol=0, atol=1e-4)


def test_half_written_copy_is_replaced(tiny_gguf, tmp_path, monkeypatch):
    """A target left by an interrupted conversion (no weights) is converted again, not trusted."""
    path, _, _ = tiny_gguf
    monkeypatch.setenv("JUDGE_REWARD_CACHE", str(tmp_path))
    target = tmp_path / "converted" / _file_digest(path)
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")  # config written, weights never were
    (target / "stale.txt").write_text("left over")

    assert converted_directory(resolve_model(str(path))) == target
    assert list(target.glob("*.safetensors"))
    assert not (target / "stale.txt").exists()
    assert [p.name for p in (tmp_path / "converted").iterdir() if p.suffix != ".lock"] == [target.name]


def test_different_gguf_files_get_different_copies(tiny_gguf, tmp_path):
    """The cache key follows the file's content: other weights in an equal-sized file, another key."""
    path, _, tokenizer = tiny_gguf
    other = write_llama_gguf(tmp_path / "tiny-llama.gguf", make_model(tokenizer, "llama", seed=4), tokenizer)
    assert other.stat().st_size == path.stat().st_size
    assert _file_digest(other) != _file_digest(path)
    assert resolve_model(str(other)).model_id != resolve_model(str(path)).model_id


@pytest.mark.parametrize("kind", ["missing", "missing_gguf", "not_gguf", "empty_dir"])
def test_resolve_model_rejects_what_is_not_a_model(tmp_path, kind):
    if kind == "missing":
        spec = tmp_path / "nowhere" / "model"
    elif kind == "missing_gguf":
        spec = tmp_path / "absent.gguf"
    elif kind == "not_gguf":
        spec = tmp_path / "weights.bin"
        spec.write_bytes(b"GGUF not really")
    else:
        spec = tmp_path / "empty-model-dir"
        spec.mkdir()
    with pytest.raises(FileNotFoundError, match=re.escape(repr(str(spec)))) as err:
        resolve_model(str(spec))
    assert ".gguf" in str(err.value)


def _without_merges(tokenizer, keep: int = 0):
    """The same vocabulary and special tokens with the BPE merges dropped (all but the first ``keep``):
    words fall apart into single characters, the way a tokenizer rebuilt wrongly from a GGUF file does."""
    import json

    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    state = json.loads(tokenizer.backend_tokenizer.to_str())
    state["model"]["merges"] = state["model"]["merges"][:keep]
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(state)), pad_token="<pad>", eos_token="<eos>",
        unk_token="<unk>", bos_token=tokenizer.bos_token,
    )


def test_tokenizer_problem_names_words_split_against_the_vocabulary():
    from judge_reward.backends.loading import tokenizer_problem

    good = make_tokenizer("bpe_bos")
    assert tokenizer_problem(good) is None  # "the", "news", "summary", "and", "that" are whole entries, kept whole
    broken = _without_merges(good)
    assert broken.get_vocab() == good.get_vocab()
    problem = tokenizer_problem(broken)
    assert problem is not None and problem.startswith("splits words its vocabulary holds whole (the")
    # A vocabulary without whole words (one entry per character) cannot be judged by the probe.
    assert tokenizer_problem(make_tokenizer("char")) is None


def test_conversion_with_a_tokenizer_that_splits_words_is_refused(tmp_path, monkeypatch):
    """A GGUF whose tokenizer reloads splitting words is not cached: the error names the fix."""
    tokenizer = make_tokenizer("bpe_bos")
    path = write_llama_gguf(tmp_path / "no-merges.gguf", make_model(tokenizer, "llama", seed=5),
                            _without_merges(tokenizer, keep=1))  # GGUF readers need a merges entry
    monkeypatch.setenv("JUDGE_REWARD_CACHE", str(tmp_path / "cache"))
    with pytest.raises(RuntimeError, match=r"no-merges\.gguf splits words its vocabulary holds whole .*transformers>=5\.18"):
        converted_directory(resolve_model(str(path)))
    assert [p.name for p in (tmp_path / "cache" / "converted").iterdir() if p.suffix != ".lock"] == []


def test_copy_without_the_checked_mark_is_converted_again(tiny_gguf, tmp_path, monkeypatch):
    """A dense copy made before the tokenizer check (weights, no mark) is not trusted: it is converted
    again and marked."""
    from judge_reward.backends.loading import CHECKED_MARK

    path, _, _ = tiny_gguf
    monkeypatch.setenv("JUDGE_REWARD_CACHE", str(tmp_path))
    target = converted_directory(resolve_model(str(path)))
    assert (target / CHECKED_MARK).is_file()
    (target / CHECKED_MARK).unlink()
    (target / "stale.txt").write_text("from the unchecked copy")
    assert converted_directory(resolve_model(str(path))) == target
    assert (target / CHECKED_MARK).is_file()
    assert not (target / "stale.txt").exists()
