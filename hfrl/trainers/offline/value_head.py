"""The A-LoL value estimate ``V(x)`` of the reference policy (docs/algorithms.md §6).

A small head on the *frozen* reference's last hidden states of the prompt only: one learned query
attends over them with multi-head attention, then ``Linear(hidden, 1)``, then ``sigmoid * max_value``
(LoL-RL's ``ValueHeadAttention``, with the prompt padding masked out). It is fitted by MSE to the
rewards of the reference's greedy generations on the validation prompts, keeping the epoch with the
lowest held-out MSE.

    head, stats = fit_value_head(hidden_states, rewards, num_heads=8, max_value=1.0)
"""

from __future__ import annotations

import copy
import math
from typing import cast

import torch
from torch import nn


class PromptValueHead(nn.Module):
    """``V(x) = sigmoid(Linear(MHA(q, h_x, h_x))) * max_value`` over prompt hidden states ``h_x (B, P, H)``."""

    def __init__(self, hidden_size: int, num_heads: int = 8, max_value: float = 1.0, dropout: float = 0.1) -> None:
        super().__init__()
        if hidden_size % num_heads:
            raise ValueError(
                f"value_num_heads ({num_heads}) must divide the model's hidden size ({hidden_size}); "
                "change value_num_heads"
            )
        self.query = nn.Parameter(torch.randn(hidden_size))  # the one learned query (LoL-RL: randn)
        self.attention = nn.MultiheadAttention(hidden_size, num_heads, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.summary = nn.Linear(hidden_size, 1)
        self.max_value = max_value

    def forward(self, hidden_states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``hidden_states (B, P, H)``, ``mask (B, P)`` 1 on prompt tokens -> ``V(x) (B,)``."""
        hidden = self.dropout(hidden_states.to(self.summary.weight.dtype))
        query = self.query.expand(hidden.shape[0], 1, -1)
        attended, _ = self.attention(query, hidden, hidden, key_padding_mask=mask == 0, need_weights=False)
        return torch.sigmoid(self.summary(self.dropout(attended))[:, 0, 0]) * self.max_value


@torch.no_grad()
def prompt_hidden_states(lm: nn.Module, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> torch.Tensor:
    """Last hidden states ``(B, P, H)`` of the prompt: the encoder's for seq2seq models, the last
    layer's for causal models (left-padded prompts, position ids from the mask as in ``generate``)."""
    if getattr(lm.config, "is_encoder_decoder", False):
        encoder = lm.get_encoder()  # type: ignore[operator]
        return cast(torch.Tensor, encoder(input_ids=prompt_ids, attention_mask=prompt_mask).last_hidden_state)
    kwargs = {
        "input_ids": prompt_ids,
        "attention_mask": prompt_mask,
        "position_ids": (prompt_mask.cumsum(1) - 1).clamp(min=0),
        "output_hidden_states": True,
        "use_cache": False,
    }
    try:  # the head needs hidden states, not (B, P, V) logits
        out = lm(**kwargs, logits_to_keep=1)
    except TypeError:  # an architecture without logits_to_keep
        out = lm(**kwargs)
    return cast(torch.Tensor, out.hidden_states[-1])


def _pad_hidden(states: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad ``(P_i, H)`` tensors to ``(B, P, H)`` and a ``(B, P)`` mask."""
    width = max(s.shape[0] for s in states)
    hidden = states[0].new_zeros(len(states), width, states[0].shape[1])
    mask = torch.zeros(len(states), width, dtype=torch.long)
    for row, s in enumerate(states):
        hidden[row, : s.shape[0]] = s
        mask[row, : s.shape[0]] = 1
    return hidden, mask


def value_predictions(head: PromptValueHead, states: list[torch.Tensor], batch_size: int = 64) -> torch.Tensor:
    """``V(x)`` of each prompt's hidden states ``(P_i, H)``, in eval mode."""
    device = head.summary.weight.device
    was_training = head.training
    head.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(states), batch_size):
            hidden, mask = _pad_hidden(states[start : start + batch_size])
            out.append(head(hidden.to(device), mask.to(device)).float().cpu())
    head.train(was_training)
    return torch.cat(out) if out else torch.zeros(0)


def fit_value_head(
    states: list[torch.Tensor],
    targets: list[float] | torch.Tensor,
    num_heads: int = 8,
    max_value: float = 1.0,
    epochs: int = 10,
    learning_rate: float = 1e-4,
    batch_size: int = 16,
    holdout_fraction: float = 0.2,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> tuple[PromptValueHead, dict[str, float]]:
    """Fit :class:`PromptValueHead` by MSE to ``targets`` (one reward per prompt's hidden states
    ``(P_i, H)``) with AdamW; return the head of the epoch with the lowest held-out MSE and stats:
    ``value_mse`` (that MSE), ``value_best_epoch``, ``value_train_mse`` (its training MSE),
    ``value_holdout_size``. Deterministic for a given ``seed``."""
    n = len(states)
    if n < 2:
        raise ValueError(f"the value head needs at least 2 validation prompts, got {n}: give a larger eval_dataset")
    targets = torch.as_tensor(targets, dtype=torch.float)
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(n, generator=generator).tolist()
    n_holdout = min(max(round(holdout_fraction * n), 1), n - 1) if holdout_fraction > 0 else 0
    holdout, train = order[:n_holdout], order[n_holdout:]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        head = PromptValueHead(states[0].shape[-1], num_heads, max_value).to(device)
    optimizer = torch.optim.AdamW(head.parameters(), lr=learning_rate)
    best = {"value_mse": math.inf, "value_best_epoch": 0.0, "value_train_mse": math.inf}
    best_state = copy.deepcopy(head.state_dict())
    for epoch in range(1, epochs + 1):
        head.train()
        permuted = [train[i] for i in torch.randperm(len(train), generator=generator).tolist()]
        total, count = 0.0, 0
        for start in range(0, len(permuted), batch_size):
            rows = permuted[start : start + batch_size]
            hidden, mask = _pad_hidden([states[i] for i in rows])
            with torch.random.fork_rng(devices=[]):  # dropout draws do not disturb the caller's RNG
                torch.manual_seed(seed * 100003 + epoch * 1009 + start)
                values = head(hidden.to(device), mask.to(device))
            loss = nn.functional.mse_loss(values.float(), targets[rows].to(values.device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total, count = total + loss.item() * len(rows), count + len(rows)
        train_mse = total / max(count, 1)
        if holdout:
            predictions = value_predictions(head, [states[i] for i in holdout])
            mse = float(((predictions - targets[holdout]) ** 2).mean())
        else:
            mse = train_mse  # LoL-RL picks the epoch by its training MSE
        if mse < best["value_mse"]:
            best = {"value_mse": mse, "value_best_epoch": float(epoch), "value_train_mse": train_mse}
            best_state = copy.deepcopy(head.state_dict())
    head.load_state_dict(best_state)
    head.eval()
    return head, {**best, "value_holdout_size": float(len(holdout))}
