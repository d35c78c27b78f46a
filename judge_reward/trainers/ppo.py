"""The judge as a PPO reward model (``trl.experimental.ppo``, TRL 1.9-1.12).

PPO never calls a reward *function*: it calls ``trl.experimental.utils.get_reward(model,
query_responses, pad_token_id, context_length)``, which runs ``getattr(model,
model.base_model_prefix)`` on the policy's token ids (pads replaced by 0, with an attention mask),
passes the last hidden states through ``model.score`` and reads the value at each row's last
response token. :class:`JudgeRewardModel` fits that shape:

* its backbone decodes each row's real tokens with the *policy* tokenizer, splits prompt from
  response, asks the judge (through a :class:`~judge_reward.trainers.reward.JudgeReward`), and returns the
  reward broadcast over the sequence as a ``(batch, length, 1)`` "hidden state" (TRL 1.12 reads
  ``hidden_states[-1]``, 1.16 reads ``last_hidden_state``; both are set);
* ``score`` is the identity, so get_reward's index picks the judge's reward.

The backbone does not see ``context_length``, so the prompt/response split comes from the prompts
themselves: pass ``contexts`` (the training rows' ``input_ids``, optionally with ``source`` and
``reference`` text for the judge) and the longest matching prefix is the prompt. Otherwise
``response_marker`` (e.g. ``"TL;DR:"``) splits the decoded text at its last occurrence.

PPO cannot leave a row out (its rewards are whitened over the batch), so a failed judgment is
filled with the running mean of the successful rewards (neutral) and counted as
``rewards/<name>/filled``; set ``on_failure`` to a number to fill with that instead. A batch that
fails entirely before any reward has succeeded has no mean to fill with and raises, naming the
failures.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import torch
from torch import nn
from transformers.modeling_outputs import BaseModelOutputWithPast

from .reward import JudgeReward


class _JudgeBackbone(nn.Module):
    def __init__(self, owner: "JudgeRewardModel"):
        super().__init__()
        object.__setattr__(self, "_owner", owner)  # not a submodule: avoids a reference cycle in modules()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **_: Any):
        rewards = self._owner.rewards_for(input_ids, attention_mask)
        hidden = rewards.to(input_ids.device)[:, None, None].expand(input_ids.shape[0], input_ids.shape[1], 1)
        return BaseModelOutputWithPast(last_hidden_state=hidden, hidden_states=(hidden,))


class JudgeRewardModel(nn.Module):
    """A reward ``nn.Module`` for PPO-style trainers that asks the judge (see the module docstring).

    Args:
        reward: the judge reward (aspects, weights, normalisation).
        tokenizer: the policy's tokenizer, to decode the ids PPO passes in.
        contexts: rows with ``input_ids`` (the prompt ids exactly as in the PPO dataset) and
            optionally ``source`` / ``reference`` text.
        response_marker: split decoded text at the last occurrence of this string when no
            context matches.
        on_failure: ``"running_mean"`` or a number to use for a failed judgment.
    """

    base_model_prefix = "judge_backbone"

    def __init__(
        self,
        reward: JudgeReward,
        tokenizer,
        contexts: Sequence[Mapping[str, Any]] | None = None,
        response_marker: str | None = None,
        on_failure: str | float = "running_mean",
    ):
        super().__init__()
        if not (on_failure == "running_mean" or (isinstance(on_failure, (int, float)) and math.isfinite(on_failure))):
            raise ValueError(f"on_failure: expected 'running_mean' or a finite number, got {on_failure!r}")
        if contexts is None and not response_marker:
            raise ValueError("contexts: give the prompts' input_ids (or a response_marker) to split prompt from response")
        self.reward = reward
        self.tokenizer = tokenizer
        self.response_marker = response_marker
        self.on_failure = on_failure
        self.judge_backbone = _JudgeBackbone(self)
        self.score = nn.Identity()
        self._contexts: dict[tuple[int, ...], Mapping[str, Any]] = {}
        for k, row in enumerate(contexts or ()):
            ids = row.get("input_ids") if isinstance(row, Mapping) else None
            if not isinstance(ids, (list, tuple)) or not ids or not all(isinstance(t, int) for t in ids):
                raise ValueError(f"contexts[{k}].input_ids: expected a non-empty list of token ids, got {ids!r:.80}")
            for key in ("source", "reference"):
                if row.get(key) is not None and not isinstance(row[key], str):
                    raise ValueError(f"contexts[{k}].{key}: expected text, got {row[key]!r:.80}")
            self._contexts[tuple(ids)] = row
        self._lengths = sorted({len(k) for k in self._contexts}, reverse=True)
        self._sum = 0.0
        self._count = 0
        self.filled = 0

    @property
    def __name__(self) -> str:  # what TRL would log it as
        return self.reward.__name__

    def split(self, ids: list[int]) -> tuple[str, str, Mapping[str, Any] | None]:
        """(prompt text, response text, matching context row) of one row's real token ids."""
        for n in self._lengths:
            if n < len(ids) and tuple(ids[:n]) in self._contexts:
                row = self._contexts[tuple(ids[:n])]
                decode = lambda t: self.tokenizer.decode(t, skip_special_tokens=True)  # noqa: E731
                return decode(ids[:n]), decode(ids[n:]), row
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        if self.response_marker and self.response_marker in text:
            cut = text.rindex(self.response_marker) + len(self.response_marker)
            return text[:cut], text[cut:], None
        raise ValueError(
            "query_responses: a row matches no context's input_ids"
            + (f" and has no response_marker {self.response_marker!r}" if self.response_marker else "")
            + f" (decoded: {text[:120]!r})"
        )

    @torch.no_grad()
    def rewards_for(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids, dtype=torch.bool)
        prompts, completions, sources, references = [], [], [], []
        for row_ids, mask in zip(input_ids.tolist(), attention_mask.bool().tolist()):
            ids = [t for t, keep in zip(row_ids, mask) if keep]
            prompt, response, ctx = self.split(ids)
            prompts.append(prompt)
            completions.append(response)
            sources.append(ctx.get("source") if ctx is not None and ctx.get("source") is not None else prompt)
            references.append(ctx.get("reference") if ctx is not None else None)
        columns: dict[str, Any] = {self.reward.config.source_column: sources}
        if any(r is not None for r in references):
            columns[self.reward.config.reference_column] = references
        values = self.reward(prompts=prompts, completions=completions, **columns)
        ok = [v for v in values if v is not None]
        self._sum += sum(ok)
        self._count += len(ok)
        missing = len(values) - len(ok)
        if self.on_failure == "running_mean":
            if missing and not self._count:  # no mean to fill with: a 0 here would be a silent fallback
                reasons = ", ".join(f"{why} ({n})" for why, n in self.reward.failures.items()) or "no reason recorded"
                raise RuntimeError(f"the judge failed on all {missing} rows before any reward succeeded ({reasons}); "
                                   "PPO needs a number per row: fix the judge, or set on_failure to the number to fill with")
            fill = self._sum / self._count if self._count else None  # None: no row failed, nothing is filled
        else:
            fill = float(self.on_failure)
        self.filled += missing
        self.reward.record_metric(f"rewards/{self.reward.__name__}/filled", float(missing))
        return torch.tensor([fill if v is None else v for v in values], dtype=torch.float32)

    def drain_metrics(self) -> dict[str, float]:
        return self.reward.drain_metrics()
