"""The floor of one PPO optimizer step on RL4LMs' increasing-numbers model, outside hfrl.

A bare loop over transformers' GPT-2 (2 layers, 2 heads, 64 dims, 278 tokens, dropout off as hfrl
runs it): forward, a log-softmax loss, backward, ``clip_grad_norm_`` and fused AdamW, on a minibatch
of the size hfrl's ``rl4lms_numbers.py`` setup draws (about 13 completions of up to 21 tokens). The
model is so small that the step is framework overhead; hfrl's own step (``time/update`` / optimizer
steps per iteration) is compared with this in benchmarks/RESULTS.md.

    python benchmarks/bench_step_floor.py --threads 2 1
    python benchmarks/bench_step_floor.py --threads 2 --compile   # torch.compile(dynamic=True) first
"""

from __future__ import annotations

import argparse
import time


def step_ms(threads: int, batch: int, length: int, steps: int, compile_model: bool) -> tuple[float, float]:
    """(warm-up seconds, milliseconds per step) at ``threads`` torch threads."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=278, n_layer=2, n_head=2, n_embd=64, n_positions=128, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)  # fmt: skip
    model = GPT2LMHeadModel(config).train()
    params = list(model.parameters())
    optimizer = torch.optim.AdamW(params, lr=1e-3, fused=True)
    forward = torch.compile(model, dynamic=True) if compile_model else model

    def step(b: int, t: int) -> None:
        ids = torch.randint(0, 278, (b, t))
        logits = forward(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
        logits.log_softmax(-1)[..., 0].mean().backward()
        torch.nn.utils.clip_grad_norm_(params, 0.5, foreach=True)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    start = time.perf_counter()
    for i in range(10):  # shapes vary as hfrl's minibatches do
        step(batch + i % 3 - 1, length - i % 4)
    warm = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(steps):
        step(batch + i % 3 - 1, length - i % 4)
    return warm, (time.perf_counter() - start) * 1000 / steps


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    parser.add_argument("--batch", type=int, default=13, help="completions per minibatch")
    parser.add_argument("--length", type=int, default=21, help="tokens per completion (prompt included)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (dynamic shapes)")
    a = parser.parse_args(argv)
    for threads in a.threads:
        warm, ms = step_ms(threads, a.batch, a.length, a.steps, a.compile)
        print(f"{threads} thread(s): {ms:.2f} ms per step ({a.steps} steps; warm-up {warm:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
