"""Request and response bodies of the reward service (pydantic models = the API contract)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Method = Literal["gptscore", "geval", "rating"]


class ItemIn(BaseModel):
    """One text to judge."""

    model_config = ConfigDict(extra="forbid")

    output: str
    """The text under judgment (a completion, a summary)."""
    source: str = ""
    """What it was written for (the prompt, the article)."""
    reference: str | None = None
    """A human reference, for methods or directions that use one."""
    id: str | int | None = None
    """Echoed back unchanged."""
    aspects: list[str] | None = None
    """Aspects for this item only (overrides the request's)."""


class ScoreRequest(BaseModel):
    """``POST /v1/score``: score items on aspects."""

    model_config = ConfigDict(extra="forbid")

    items: list[ItemIn] = Field(min_length=1)
    aspects: list[str] | None = None
    """Aspects to score (``None``: the judge's configured aspects)."""
    method: Method | None = None
    """Scoring method (``None``: the judge's configured method)."""
    details: bool = True
    """Include each score's details (distribution, mass, entropy, log-probabilities) and its per-token
    log-probabilities (``tokens``) where the judge gives them."""


class AspectScore(BaseModel):
    value: float | None
    """The method's score: on the aspect's scale (G-Eval, rating) or a mean log-probability (GPTScore)."""
    normalised: float | None = None
    """``value`` mapped onto [0, 1] by the aspect's scale (G-Eval and rating only)."""
    reason: str | None = None
    """Why ``value`` is None."""
    details: dict[str, Any] | None = None
    tokens: dict[str, list] | None = None
    """With ``details``, and a GPTScore judge with ``unconditional``: the output's tokens and their
    log-probabilities with and without the source (``texts``, ``with_source``, ``without_source``)."""


class ItemResult(BaseModel):
    id: str | int | None = None
    reward: float | None
    """The aspects' scores combined into one number (see ``ServiceConfig.reward_weights``); None if any failed."""
    failure: str | None = None
    scores: dict[str, AspectScore]


class BatchOut(BaseModel):
    items: int
    """Items in the judge call this request's items ran in (merged with other requests)."""
    requests: int
    judge_seconds: float
    queued_seconds: float


class ScoreResponse(BaseModel):
    model: str
    method: str
    results: list[ItemResult]
    batches: list[BatchOut]


class OpenRLHFRequest(BaseModel):
    """``POST /get_reward``: OpenRLHF's remote reward model protocol (``--reward.remote_url``).

    ``query[i]`` is prompt + response as OpenRLHF decodes it; ``prompts[i]`` the prompt;
    ``labels[i]`` the dataset's label (used as the reference when it is text). Other keys that
    OpenRLHF versions add (``datasources``, token ids) are accepted and ignored.
    """

    model_config = ConfigDict(extra="allow")

    query: list[str] = Field(min_length=1)
    prompts: list[str] | None = None
    labels: list[Any] | None = None
    aspects: list[str] | None = None
    method: Method | None = None


class OpenRLHFResponse(BaseModel):
    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, list[float]]
    failures: list[str | None]
