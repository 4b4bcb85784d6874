"""Shared prompt prefill: a group's rollout with each prompt encoded once, against encoding every copy.

With ``num_generations`` G > 1 the online trainers encode each prompt once and expand its KV cache
(a seq2seq model's encoder outputs) to the group's G completions (``hfrl.core.rollout.shared_prefill``).
This times the rollout's generation (``generate_completions`` with the capture a rollout uses) both
ways on the same prompts, alternating the two so that a busy neighbour slows both alike, and checks
that greedy completions are the same.

    OMP_NUM_THREADS=1 python benchmarks/bench_prefill.py --model gpt2-small --prompts 4 --generations 8 \
        --prompt-tokens 64 --new-tokens 20 --repeats 3 --json benchmarks/results-prefill.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_online import model_dir  # noqa: E402


def prompts_of(tokenizer, count: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` distinct prompts of exactly ``length`` tokens (numbers and words, cut to length)."""
    from hfrl.core.rollout import pad

    rows = []
    for i in range(count):
        text = " ".join(f"{i + k} the movie was" for k in range(length))
        rows.append(tokenizer(text)["input_ids"][:length])
    return pad(rows, tokenizer.pad_token_id, "left")


def main(argv: list[str] | None = None) -> dict:
    from hfrl.core.capture import CaptureSettings
    from hfrl.core.models import fix_tokenizer, load_model, load_tokenizer
    from hfrl.core.rollout import generate_completions

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt2-small", help="tiny, gpt2-small, or a local causal model directory")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3, help="timed rollouts each way (after one warm-up each)")
    parser.add_argument("--json", help="write the figures to this file")
    a = parser.parse_args(argv)
    torch.manual_seed(0)
    path = model_dir(a.model, tempfile.mkdtemp(prefix="hfrl-bench-"))
    model = load_model(path).eval()
    tokenizer = load_tokenizer(path)
    fix_tokenizer(tokenizer, model)
    ids, mask = prompts_of(tokenizer, a.prompts, a.prompt_tokens)
    sampling = {"max_new_tokens": a.new_tokens, "min_new_tokens": a.new_tokens, "do_sample": True, "top_k": 0}

    def rollout(share: bool, settings: dict) -> tuple[float, torch.Tensor]:
        start = time.perf_counter()
        out = generate_completions(
            model, ids, mask, settings, tokenizer.pad_token_id, num_generations=a.generations, share_prefill=share,
            capture=CaptureSettings(1.0, hidden=True),
        )  # fmt: skip
        return time.perf_counter() - start, out.response_ids

    greedy = {**sampling, "do_sample": False}
    same = torch.equal(rollout(True, greedy)[1], rollout(False, greedy)[1])
    times: dict[str, list[float]] = {"shared": [], "every_copy": []}
    for repeat in range(a.repeats + 1):
        for name, share in (("shared", True), ("every_copy", False)):
            seconds = rollout(share, sampling)[0]
            if repeat:  # the first of each is warm-up
                times[name].append(seconds)
    results = {
        "model": a.model, "prompts": a.prompts, "num_generations": a.generations, "prompt_tokens": a.prompt_tokens,
        "new_tokens": a.new_tokens, "threads": torch.get_num_threads(), "greedy_identical": same,
        **{f"{name}_seconds": statistics.mean(values) for name, values in times.items()},
        "raw": times,
    }  # fmt: skip
    results["speedup"] = results["every_copy_seconds"] / results["shared_seconds"]
    print(
        f"{a.model}: {a.prompts} prompts x {a.generations} completions, {a.prompt_tokens}-token prompts, "
        f"{a.new_tokens} new tokens, {results['threads']} threads: shared prefill {results['shared_seconds']:.3f} s, "
        f"every copy encoded {results['every_copy_seconds']:.3f} s, {results['speedup']:.2f}x; greedy identical: {same}"
    )
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
