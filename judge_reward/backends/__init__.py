"""Judge backends: local Hugging Face models (:mod:`.hf`) and OpenAI-compatible servers (:mod:`.openai_compat`)."""

from .base import (
    BackendError, CandidateLogprobs, CandidateRequest, ContinuationLogprobs, ContinuationRequest,
    GenerationRequest, Generations, JudgeBackend,
)

__all__ = [
    "BackendError", "CandidateLogprobs", "CandidateRequest", "ContinuationLogprobs", "ContinuationRequest",
    "GenerationRequest", "Generations", "JudgeBackend",
]
