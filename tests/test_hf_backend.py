"""Exactness of the local backend: candidates, batching, padding, prefix sharing."""

import math

import pytest
import torch

from judge_reward.backends.base import CandidateRequest, ContinuationRequest
from judge_reward.candidates import number_continuation_ids
from tiny_models import make_backend

PROMPT = "Evaluation Form (scores ONLY):\n\n- Coherence: "
SCALES = {
    "1-5": tuple(str(v) for v in range(1, 6)),
    "1-10": tuple(str(v) for v in range(1, 11)),
    "0-100 by 10": tuple(str(v) for v in range(0, 101, 10)),
}


def brute_force(backend, prompt, candidates):
    """Per candidate, one full forward pass over the canonical tokens of prompt + value.

    Returns the normalised distribution over candidates. Where a value is a prefix of another,
    the value must also end there: times (1 - P(next token starts with a digit)).
    """
    model, tok = backend.model, backend.tokenizer
    terminate = any(b != a and b.startswith(a) for a in candidates for b in candidates)
    digits = number_continuation_ids(tok.convert_ids_to_tokens(list(range(len(tok)))))
    scores = []
    for c in candidates:
        ids = backend.encode(prompt + c)
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), -1)
        total = sum(logp[t - 1, ids[t]].item() for t in range(1, len(ids)))
        if terminate:
            total += math.log1p(-logp[-1, digits].exp().sum().item())
        scores.append(total)
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    return [w / sum(weights) for w in weights]


def normalise(logprobs):
    top = max(logprobs)
    w = [math.exp(x - top) for x in logprobs]
    return [x / sum(w) for x in w]


@pytest.mark.parametrize("style", ["char", "bpe", "bpe_bos"])
@pytest.mark.parametrize("scale", list(SCALES))
def test_candidate_distribution_equals_brute_force(style, scale):
    backend = make_backend(style)
    candidates = SCALES[scale]
    for prompt in (PROMPT, PROMPT.rstrip()):  # with and without the space before the digit
        [got] = backend.candidate_logprobs([CandidateRequest(prompt, candidates)])
        assert got.error is None
        expected = brute_force(backend, prompt, candidates)
        assert normalise(got.logprobs) == pytest.approx(expected, abs=1e-5)


def test_multi_token_candidates_are_really_multi_token():
    backend = make_backend("char")
    [got] = backend.candidate_logprobs([CandidateRequest(PROMPT, SCALES["0-100 by 10"])])
    assert got.details["candidate_tokens"][-1] == 3  # "100" is three characters
    assert got.details["terminated"] is True


def test_mass_is_the_probability_of_the_slot_values():
    backend = make_backend("char")
    [got] = backend.candidate_logprobs([CandidateRequest(PROMPT, SCALES["1-5"])])
    ids = backend.encode(PROMPT)
    with torch.no_grad():
        logp = torch.log_softmax(backend.model(torch.tensor([ids])).logits[0, -1].double(), -1)
    digit = [backend.tokenizer.convert_tokens_to_ids(c) for c in SCALES["1-5"]]
    assert sum(math.exp(x) for x in got.logprobs) == pytest.approx(logp[digit].exp().sum().item(), rel=1e-5)



def test_head_bias_and_logit_softcapping_match_the_models_own_logits():
    """The head is applied apart from the body (only where read): bias and soft-capping must match."""
    from judge_reward.backends.hf import HFBackend, HFBackendConfig
    from tiny_models import make_model, make_tokenizer

    tok = make_tokenizer("char")
    model = make_model(tok, "gemma3")
    model.config.final_logit_softcapping = 3.0  # small, so capping changes the numbers visibly
    old = model.lm_head
    model.lm_head = torch.nn.Linear(old.in_features, old.out_features, bias=True)
    with torch.no_grad():
        model.lm_head.weight.copy_(old.weight)
        model.lm_head.bias.normal_(0.0, 2.0)
    backend = HFBackend(HFBackendConfig(device="cpu", progress=False, head_chunk=4), model=model, tokenizer=tok)
    [got] = backend.candidate_logprobs([CandidateRequest(PROMPT, SCALES["1-10"])])
    assert normalise(got.logprobs) == pytest.approx(brute_force(backend, PROMPT, SCALES["1-10"]), abs=1e-5)
    context, text = "A cat sat on the mat.", " A cat sat quietly on it."
    [cont] = backend.continuation_logprobs([ContinuationRequest(context, text)])
    ids, start, _ = backend.split_tokens(context, text)
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), -1)
    expected = [logp[t - 1, ids[t]].item() for t in range(start, len(ids))]
    assert len(expected) > 4  # more positions than one head chunk
    assert cont.token_logprobs == pytest.approx(expected, abs=1e-4)

TEXTS = [
    ("The council met on Tuesday to discuss the budget. " * 3, " The council met."),
    ("A cat sat on the mat.", " A cat sat."),
    ("The news article reports that the council met on Tuesday.", " Council met Tuesday, the article reports in full."),
    ("Short.", " S"),
]


def continuation_scores(backend, requests):
    return [r.token_logprobs for r in backend.continuation_logprobs(requests)]


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_batch_and_padding_invariance(arch, padding_side):
    alone_backend = make_backend("char", arch)
    batch_backend = make_backend("char", arch, padding_side=padding_side, max_batch_tokens=10_000)
    requests = [ContinuationRequest(c, h) for c, h in TEXTS]
    alone = [continuation_scores(alone_backend, [r])[0] for r in requests]
    batched = continuation_scores(batch_backend, requests)
    for a, b in zip(alone, batched):
        assert len(a) == len(b)
        assert max(abs(x - y) for x, y in zip(a, b)) <= 1e-4


@pytest.mark.parametrize("arch", ["llama", "gemma3"])  # gemma3 here has a 6-token sliding window
def test_prefix_sharing_gives_the_same_numbers(arch):
    shared = make_backend("char", arch, min_shared_tokens=4, max_batch_tokens=400)
    flat = make_backend("char", arch, prefix_sharing=False)
    context = "Article: The council met on Tuesday to discuss the budget.\n\nTL;DR:"
    hypos = [" The council met.", " Budget talks on Tuesday.", " A meeting happened about money and more.", " x"]
    requests = [ContinuationRequest(context, h, group="doc") for h in hypos]
    a = continuation_scores(shared, requests)
    b = continuation_scores(flat, requests)
    for x, y in zip(a, b):
        assert max(abs(p - q) for p, q in zip(x, y)) <= 1e-4
    cands = [CandidateRequest(context + h + "\n- Coherence: ", SCALES["1-10"], group="doc") for h in hypos]
    for x, y in zip(shared.candidate_logprobs(cands), flat.candidate_logprobs(cands)):
        assert x.logprobs == pytest.approx(y.logprobs, abs=1e-4)


TREE_HYPOS = [
    " The council met on Tuesday to discuss the budget for next year.",
    " The council met on Tuesday and agreed on nothing at all.",
    " The council met on Tuesday and agreed on nothing at all.",  # a duplicate shares every token
    " The council met.",
    " Budget talks.",
    " The council met on Tuesday and agreed on a budget.",
]


def body_tokens(backend):
    """Count the (padded) token columns the decoder body runs over."""
    seen = []
    backend.body.register_forward_pre_hook(lambda m, a, kw: seen.append(kw["input_ids"].numel()), with_kwargs=True)
    return seen


@pytest.mark.parametrize("arch", ["llama", "gemma3"])  # gemma3: 6-token sliding window, far shorter than the rows
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_token_tree_sharing_gives_the_same_numbers_with_less_work(arch, attn):
    tree = make_backend("char", arch, attn_implementation=attn, min_shared_tokens=4, tree_min_shared=4)
    chains = make_backend("char", arch, attn_implementation=attn, min_shared_tokens=4, tree_sharing=False)
    flat = make_backend("char", arch, attn_implementation=attn, prefix_sharing=False)
    assert tree._tree_layout is not None and chains._tree_layout is None
    context = "Article: The council met on Tuesday to discuss the budget.\n\nTL;DR:"
    requests = [ContinuationRequest(context, h, group="doc") for h in TREE_HYPOS]
    work = {name: body_tokens(b) for name, b in [("tree", tree), ("chains", chains)]}
    expected = continuation_scores(flat, requests)
    for backend in (tree, chains):
        for x, y in zip(continuation_scores(backend, requests), expected):
            assert len(x) == len(y)
            assert max(abs(p - q) for p, q in zip(x, y)) <= 1e-4
    assert sum(work["tree"]) < 0.8 * sum(work["chains"])  # the shared " The council met on Tuesday" runs once
    cands = [CandidateRequest(context + h + "\n- Coherence: ", SCALES["1-10"], group="doc") for h in TREE_HYPOS]
    for x, y in zip(tree.candidate_logprobs(cands), flat.candidate_logprobs(cands)):
        assert x.logprobs == pytest.approx(y.logprobs, abs=1e-4)


def test_tree_sharing_is_off_where_the_model_cannot_take_tree_masks():
    backend = make_backend("char", "llama")
    backend.model.config.sliding_window = 16  # one model-wide window and no layer types: no tree masks
    assert backend._tree_mask_layout() is None
    backend.model.config.sliding_window = None
    assert backend._tree_mask_layout() == {"full_attention": (0, None)}
    assert make_backend("char", "gemma3")._tree_layout == {"sliding_attention": (0, 6), "full_attention": (1, None)}


def test_bos_exactly_once_even_when_the_text_carries_it():
    backend = make_backend("char")
    assert backend.encode("<bos>hello")[:2] == [backend.tokenizer.bos_token_id, backend.encode("h")[1]]
    assert make_backend("bpe").encode("hello")[0] != make_backend("bpe_bos").tokenizer.bos_token_id


def test_context_window_is_reported_not_crashed():
    backend = make_backend("char", max_length=64)
    [res] = backend.continuation_logprobs([ContinuationRequest("x" * 100, " y")])
    assert res.token_logprobs is None and "context window of 64" in res.error
    [res] = backend.candidate_logprobs([CandidateRequest("x" * 100, ("1", "2"))])
    assert res.logprobs is None and "context window" in res.error


def test_generation_returns_n_samples_and_honours_stop():
    backend = make_backend("char")
    from judge_reward.backends.base import GenerationRequest

    [gen] = backend.generate([GenerationRequest("Rating:", n=3, temperature=1.0, max_new_tokens=12, stop=("\n",), seed=1)])
    assert gen.error is None and len(gen.texts) == 3
    assert all("\n" not in t for t in gen.texts)


def test_seeded_generation_is_reproducible_and_leaves_the_global_rng_alone():
    """A trainer calls the judge between its own sampling steps: the judge's seed must not reset them."""
    backend = make_backend("char")
    from judge_reward.backends.base import GenerationRequest

    request = GenerationRequest("Rating:", n=4, temperature=1.0, max_new_tokens=8, seed=7)
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    [first] = backend.generate([request])
    assert torch.equal(torch.rand(3), expected_next)  # global stream as if the judge never ran
    [second] = backend.generate([request])
    assert first.texts == second.texts


def test_batches_bound_padding_and_keep_small_batches_whole():
    backend = make_backend("char")
    lengths = [135, 84, 116, 86, 104, 87, 135, 106]
    batches = list(backend._batches(lengths, range(len(lengths))))
    assert [[lengths[i] for i in b] for b in batches] == [[84, 86, 87, 104, 106], [116, 135, 135]]
    for b in batches:  # padding stays within max_padding of each batch's padded tokens
        longest = max(lengths[i] for i in b)
        assert len(b) * longest - sum(lengths[i] for i in b) <= backend.config.max_padding * len(b) * longest
    backend.config.min_split_tokens = 10_000  # too few tokens to be worth splitting
    assert len(list(backend._batches(lengths, range(len(lengths))))) == 1
    backend.config.min_split_tokens, backend.config.max_padding = 0, 1.0  # never split for padding
    assert len(list(backend._batches(lengths, range(len(lengths))))) == 1


def test_max_padding_must_not_be_negative():
    with pytest.raises(ValueError, match="max_padding: .* got -0.1"):
        make_backend("char", max_padding=-0.1)


def test_attention_kernels_on_cuda_and_on_a_cpu():
    """fp32 on CUDA: only PyTorch's math SDPA kernel (its default choice was measured 2.42 nats off
    on an H200); bf16 on CUDA: all but cuDNN's unless asked; anything on a CPU: PyTorch's own choice."""
    from judge_reward.backends.hf import attention_kernels

    flags = lambda: (torch.backends.cuda.math_sdp_enabled(), torch.backends.cuda.flash_sdp_enabled(),  # noqa: E731
                     torch.backends.cuda.mem_efficient_sdp_enabled(), torch.backends.cuda.cudnn_sdp_enabled())
    before = flags()
    assert before == (True, True, True, True)
    for choice in ("no_cudnn", "pytorch"):
        with attention_kernels(torch.device("cuda"), torch.float32, choice):
            assert flags() == (True, False, False, False)
        assert flags() == before
    # bf16 on CUDA: every kernel but cuDNN's (its per-shape plans), or PyTorch's own choice
    with attention_kernels(torch.device("cuda"), torch.bfloat16):
        assert flags() == (True, True, True, False)
    assert flags() == before
    with attention_kernels(torch.device("cuda"), torch.bfloat16, "pytorch"):
        assert flags() == before
    for dtype in (torch.float32, torch.bfloat16):
        with attention_kernels(torch.device("cpu"), dtype):
            assert flags() == before


@pytest.mark.parametrize("style", ["char", "bpe", "bpe_bos"])
def test_candidates_from_the_last_line_equal_whole_text_tokenisation(style):
    """Tokenising only the prompt's last line with each candidate gives the ids of the whole text,
    and the whole prompt is tokenised once, not once per candidate; prompts whose last line cannot
    be split off cleanly fall back to whole texts."""
    from judge_reward.candidates import tokenize_candidates
    from tiny_models import make_tokenizer

    tok = make_tokenizer(style)
    whole_calls = []

    def encode(text):
        whole_calls.append(text)
        return tok(text)["input_ids"]

    def pieces(texts):
        return [tok(text, add_special_tokens=False)["input_ids"] for text in texts]

    prompts = [
        "The summary is coherent and fluent.\n\nEvaluation Form (scores ONLY):\n\n- Coherence: ",
        "A cat sat on the mat.\n- Fluency:",
        "Rating: 4 Score: 80 out of 100 stars\nRelevance (1-5) 1 2 3 ",
        "no newline at all: ",
        "ends with a newline\n",
    ]
    scales = [("1", "2", "3", "4", "5"), ("1", "10", "100", "2"), (" 1", " 5")]
    fast_paths = 0
    for prompt in prompts:
        for scale in scales:
            whole_calls.clear()
            quick = tokenize_candidates(encode, prompt, scale, pieces)
            fast_paths += len(whole_calls) == 1
            assert quick == tokenize_candidates(encode, prompt, scale)
    assert fast_paths >= 9  # the three prompts with a last line, every scale


@pytest.mark.parametrize("style", ["char", "bpe", "bpe_bos"])
def test_texts_sharing_a_head_tokenise_as_whole_texts(style, monkeypatch):
    """Texts that differ only in their last line (G-Eval's aspects of an item) tokenise their shared
    head once; every text still gets exactly the ids of tokenising it whole, including lines whose
    start could merge with the newline before it, and the kept heads stay bounded."""
    import random

    import judge_reward.backends.hf as hf

    monkeypatch.setattr(hf, "HEAD_MEMO_SIZE", 3)
    backend = make_backend(style)
    tok = backend.tokenizer
    heads = ["Evaluation Form (scores ONLY):\n\n", "A cat sat on the mat.\n", "Rating: 4\n\n\n", "x\n",
             "The news article reports that the council met on Tuesday. " * 6 + "\n"]
    lines = ["- Coherence: ", "- Fluency:", " leading space", "  two spaces", "\tTab", "Coherence: 5", "10", "\n",
             "- Relevance: ", "a much longer last line than its head, so that it is checked only on a second sighting"]
    texts = [h + line for h in heads for line in lines]
    whole = []
    real_tokenize = backend._tokenize
    backend._tokenize = lambda text: (whole.append(text) if text in texts else None) or real_tokenize(text)
    rng = random.Random(0)
    for round_ in range(3):
        rng.shuffle(texts)
        for text in texts:
            assert backend._encode_piece(text) == tok(text, add_special_tokens=False)["input_ids"], (round_, text)
            assert backend.encode(text) == tok(text, add_special_tokens=True)["input_ids"], (round_, text)
            assert len(backend._heads) <= 3
    assert len(whole) < 2 * 3 * len(texts)  # the kept heads served part of it, even while evicted in turn

    # As G-Eval asks: the four form lines of each item, each prompt tokenised twice (fit, then score):
    # one whole tokenisation per item (two for a head shorter than three form lines)
    monkeypatch.setattr(hf, "HEAD_MEMO_SIZE", 1024)
    backend.clear_token_memo()
    whole.clear()
    forms = [f"- {name}: " for name in ("Coherence", "Consistency", "Fluency", "Relevance")]
    texts = [h + form for h in heads for form in forms]  # what ``whole`` records
    for h in heads:
        for _ in range(2):
            for form in forms:
                assert backend.encode(h + form) == tok(h + form, add_special_tokens=True)["input_ids"]
    # a short head is checked on its second text (its first costs no extra line tokenisation)
    assert len(whole) == sum(1 if 4 * len(forms[0]) <= len(h + forms[0]) else 2 for h in heads)
    backend.clear_token_memo()
    assert not backend._heads


def test_a_head_with_a_merge_across_its_last_line_is_tokenised_whole():
    """Where the whole text's ids do not end in the last line's own ids (a token spans the newline),
    the head is marked and its texts are tokenised whole, with the right ids."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from judge_reward.backends.hf import _UNSAFE, HFBackend, HFBackendConfig
    from tiny_models import SPECIALS, _wrap, make_model

    raw = Tokenizer(models.BPE(unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)  # no split at the newline
    raw.train_from_iterator(["score\nb5"] * 50, trainers.BpeTrainer(
        vocab_size=300, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = _wrap(raw, bos=False)
    backend = HFBackend(HFBackendConfig(device="cpu", progress=False), model=make_model(tok), tokenizer=tok)
    head, line = "a long enough head to check the line at once: score\n", "b5"
    ids = tok(head + line, add_special_tokens=False)["input_ids"]
    line_ids = tok(line, add_special_tokens=False)["input_ids"]
    assert ids[-len(line_ids):] != line_ids  # the trained merges join the newline and "b"
    for _ in range(3):
        assert backend._encode_piece(head + line) == ids
        assert backend.encode(head + "b") == tok(head + "b")["input_ids"]
    assert backend._heads[head] == _UNSAFE
