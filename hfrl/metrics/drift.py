"""Drift from natural text: ``causal_perplexity``, the policy's perplexity on the *reference* texts
(RL4LMs' ``causal_perplexity``, docs/algorithms.md §9). It rises when RL pulls the policy away from fluent
language, whatever the completions look like.

The model is the policy being evaluated (trainers and ``hfrl eval`` pass it as ``policy=`` and
``policy_tokenizer=``; see :func:`hfrl.trainers.evaluation.score_completions`) or a model named in the metric's
``model`` argument (a Hub id or local folder, loaded once per process). Each reference is scored on its
own, after the BOS token (so its first token counts too), optionally after the sample's prompt.
Per sample: ``exp(mean token NLL)`` over its references; corpus: ``exp(total NLL / total tokens)``.
RL4LMs joins all references into one text with a sliding window instead; per-reference scoring
gives the same token-weighted average up to the context each token sees.

    from hfrl.metrics.drift import CausalPerplexity
"""

from __future__ import annotations

import math
from typing import Any, cast

from hfrl.metrics.base import NAN, MetricResult, cached, default_device, evaluating_on, reference_lists, text_of


class CausalPerplexity:
    """Perplexity of the policy (a causal LM) on the reference texts: a measure of drift.

    >>> CausalPerplexity(model="gpt2")(prompts=[""], completions=[""], references=[["Hello world."]])  # doctest: +SKIP
    {'causal_perplexity': ...}
    """

    name = "causal_perplexity"
    needs_policy = True  # score_completions passes policy= and policy_tokenizer=

    def __init__(
        self,
        model: str | None = None,
        batch_size: int = 8,
        max_length: int = 1024,
        condition_on_prompt: bool = False,
        device: str | None = None,
    ) -> None:
        self.model, self.batch_size, self.max_length = model, batch_size, max_length
        self.condition_on_prompt, self.device = condition_on_prompt, device

    def _model(self, policy: Any, tokenizer: Any) -> tuple[Any, Any]:
        if policy is not None:
            if tokenizer is None:
                raise ValueError("causal_perplexity: policy= was given without policy_tokenizer=")
            return policy, tokenizer
        if self.model is None:
            raise ValueError(
                "causal_perplexity needs the policy: set model: <Hub id or folder> in its args, or evaluate "
                "through a trainer or `hfrl eval`, which pass the policy"
            )
        device, model = self.device or default_device(), self.model

        def build() -> Any:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            from hfrl.utils.assets import hub_kwargs
            from hfrl.utils.trust import remote_code

            pin = hub_kwargs(model, trust_remote_code=remote_code(model))  # a manifest model at its pin
            lm = AutoModelForCausalLM.from_pretrained(model, **pin)
            return evaluating_on(lm, device), AutoTokenizer.from_pretrained(model, **pin)

        return cast(tuple[Any, Any], cached(("causal_lm", self.model, device), build))

    def __call__(
        self,
        prompts: list[Any],
        completions: list[Any],
        references: Any = None,
        policy: Any = None,
        policy_tokenizer: Any = None,
        **columns: Any,
    ) -> MetricResult:
        import torch

        model, tokenizer = self._model(policy, policy_tokenizer)
        if getattr(getattr(model, "config", None), "is_encoder_decoder", False):
            raise ValueError("causal_perplexity needs a causal LM; this policy is an encoder-decoder model")
        refs = reference_lists(references, len(completions), self.name)
        start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        rows = []  # (sample, context ids, reference ids)
        for i, sample_refs in enumerate(refs):
            context = [start] if start is not None else []
            if self.condition_on_prompt:
                context += tokenizer(text_of(prompts[i]), add_special_tokens=False)["input_ids"]
            for r in sample_refs:
                ids = tokenizer(r, add_special_tokens=False)["input_ids"]
                n_ref, ids = len(ids), (context + ids)[-self.max_length :]
                n_target = min(n_ref, len(ids) - 1)  # the first token has nothing before it to predict it
                if n_target > 0:
                    rows.append((i, ids, n_target))
        nll, count = [0.0] * len(completions), [0] * len(completions)
        device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        try:
            for b in range(0, len(rows), self.batch_size):
                chunk = rows[b : b + self.batch_size]
                width = max(len(ids) for _, ids, _ in chunk)
                input_ids = torch.zeros(len(chunk), width, dtype=torch.long)
                mask = torch.zeros(len(chunk), width, dtype=torch.long)
                target = torch.zeros(len(chunk), width, dtype=torch.bool)  # positions whose token is scored
                for row, (_, ids, n_target) in enumerate(chunk):
                    input_ids[row, : len(ids)] = torch.tensor(ids)
                    mask[row, : len(ids)] = 1
                    target[row, len(ids) - n_target : len(ids)] = True
                with torch.no_grad():
                    logits = model(input_ids=input_ids.to(device), attention_mask=mask.to(device)).logits.float().cpu()
                logp = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, input_ids[:, 1:, None])[..., 0]
                token_nll = -(logp * target[:, 1:])  # token t is predicted at position t - 1
                for row, (i, _, n_target) in enumerate(chunk):
                    nll[i] += float(token_nll[row].sum())
                    count[i] += n_target
        finally:
            model.train(was_training)
        per_sample = [math.exp(s / c) if c else NAN for s, c in zip(nll, count, strict=True)]
        total = sum(count)
        corpus = math.exp(sum(nll) / total) if total else NAN
        return MetricResult({self.name: corpus}, {self.name: per_sample})
