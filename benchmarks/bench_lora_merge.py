"""A LoRA policy's rollout generation, adapter merged against unmerged (``merge_lora_for_rollouts``).

    OMP_NUM_THREADS=1 python benchmarks/bench_lora_merge.py --model smollm2 --prompts 16 --tokens 48 \\
        --repeats 3 --json benchmarks/results-lora-merge.json

SmolLM2-135M (float32) with a LoRA adapter of rank 16 on every linear layer (``target_modules="all-linear"``,
as ``--use_peft --lora_target_modules all-linear``; its B matrices set to small random values, as after
training, so that merging changes the weights). ``--prompts`` prompts x ``--tokens`` new tokens sampled
(completions forced to full length: ``min_new_tokens``) by the rollout's own code
(:func:`hfrl.core.rollout.generate_completions`), ``--repeats`` times each way, interleaved so that a busy
machine's load falls on both alike:

- ``unmerged``: as a rollout without merging samples (``logprobs_from_generation``: generation keeps the
  log-probs and hidden states, no scoring forward of the policy);
- ``merged``: :func:`hfrl.trainers.online.lora_rollouts.merged_for_rollout` around the same call, no
  capture, then the policy's scoring forward (unmerged) that the rollout then needs, timed apart, as is
  the merge and restore.

Prints (and with ``--json`` writes) generated tokens per second of each run, each run's rollout seconds
(generation + merge + scoring forward) and the load average before each run. Greedy completions merged
and unmerged are compared once (``greedy_equal``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="a built-in model or a folder")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    print(json.dumps(run(args)))


def lora_policy(model: str, rank: int, seed: int = 0) -> Any:
    """``model`` (float32) with a LoRA adapter of ``rank`` on every linear layer, its B matrices random."""
    import torch
    from peft import LoraConfig, get_peft_model

    from hfrl.core.models import load_model

    torch.manual_seed(seed)
    config = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.05, target_modules="all-linear",
                        task_type="CAUSAL_LM")  # fmt: skip
    policy = get_peft_model(load_model(model, {"dtype": torch.float32}), config)
    with torch.no_grad():
        for name, param in policy.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.02)
    return policy.eval()


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from hfrl.core.capture import CaptureSettings
    from hfrl.core.models import load_tokenizer
    from hfrl.core.rollout import generate_completions
    from hfrl.trainers.online.lora_rollouts import merged_for_rollout

    torch.set_num_threads(args.threads)
    policy, tokenizer = lora_policy(args.model, args.rank), load_tokenizer(args.model)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    words = ["the", "movie", "was", "a", "story", "of", "1", "2", "good", "day"]
    texts = [" ".join(words[i % 10 :] + words[: i % 10]) for i in range(args.prompts)]
    tokenizer.padding_side = "left"
    batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    ids, mask = batch["input_ids"], batch["attention_mask"]
    pad = tokenizer.pad_token_id
    sampling = {"max_new_tokens": args.tokens, "min_new_tokens": args.tokens, "do_sample": True, "top_k": 0}

    def unmerged() -> dict[str, float]:
        start = time.perf_counter()
        with torch.no_grad():
            generate_completions(policy, ids, mask, sampling, pad, capture=CaptureSettings(1.0, hidden=True))
        seconds = time.perf_counter() - start
        return {"generate_s": seconds, "rollout_s": seconds}

    def merged() -> dict[str, float]:
        start = time.perf_counter()
        with merged_for_rollout(policy):
            t_merged = time.perf_counter()
            with torch.no_grad():
                out = generate_completions(policy, ids, mask, sampling, pad)
            t_generated = time.perf_counter()
        t_restored = time.perf_counter()
        with torch.no_grad():  # the scoring forward the rollout then needs (unmerged: the trained policy)
            full = torch.cat([out.query_ids, out.response_ids], 1)
            policy(input_ids=full, attention_mask=torch.cat([out.query_mask, out.response_mask], 1))
        end = time.perf_counter()
        restore = (t_merged - start) + (t_restored - t_generated)
        return {"generate_s": t_generated - t_merged, "merge_restore_s": restore,
                "score_forward_s": end - t_restored, "rollout_s": end - start}  # fmt: skip

    runs: dict[str, list[dict[str, float]]] = {"unmerged": [], "merged": []}
    for _ in range(args.repeats):  # interleaved: a busy machine's load falls on both alike
        for name, fn in (("merged", merged), ("unmerged", unmerged)):
            load = os.getloadavg()[0]
            runs[name].append({**fn(), "load": load})
    tokens = args.prompts * args.tokens

    greedy = {"max_new_tokens": args.tokens, "do_sample": False}
    with torch.no_grad():
        plain = generate_completions(policy, ids, mask, greedy, pad).response_ids
        with merged_for_rollout(policy):
            fused = generate_completions(policy, ids, mask, greedy, pad).response_ids
    summary = {
        name: {
            "tok_s": [round(tokens / r["generate_s"], 2) for r in rows],
            "rollout_s": [round(r["rollout_s"], 2) for r in rows],
            **(
                {k: [round(r[k], 2) for r in rows] for k in ("merge_restore_s", "score_forward_s")}
                if name == "merged"
                else {}
            ),  # fmt: skip
            "load_before": [round(r["load"], 2) for r in rows],
        }
        for name, rows in runs.items()
    }
    result = {
        "model": args.model, "lora_rank": args.rank, "threads": torch.get_num_threads(), "prompts": args.prompts,
        "tokens": args.tokens, "repeats": args.repeats, "torch": torch.__version__, **summary,
        "greedy_equal": bool(torch.equal(plain, fused)),
        "greedy_equal_rows": int((plain == fused).all(1).sum()),
    }  # fmt: skip
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
            fh.write("\n")
    return result


if __name__ == "__main__":
    main()
