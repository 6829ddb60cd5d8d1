#!/usr/bin/env python3
"""nuvec-lm's serving engine beside transformers' batched generate (eager, bf16) on the GPU:
output tokens/s at several concurrencies (C requests of --prompt random tokens and --output
new ones, greedy), and nuvec's p50/p99 time to first token and inter-token latency (batch-1
decode against its floor: bench/lm_compare.py).

    python3 bench/lm_serve_compare.py --nuvec build/bench/nuvec-lm-serve-timings \\
        [--shapes llama-3.2-1b,qwen3-8b] [--concurrency 1,8,64,256] [--prompt 512] [--output 256]
"""
import argparse
import json
import subprocess
import time

import torch

from lm_compare import SHAPES, copy_bandwidth, transformers_model


def transformers_throughput(shape, concurrency, prompt, output):
    cfg = SHAPES[shape]
    model = transformers_model(shape)
    out = {}
    with torch.no_grad():
        for c in concurrency:
            ids = torch.randint(0, cfg["vocab_size"], (c, prompt), device="cuda")
            try:
                model.generate(ids[:, :16], max_new_tokens=2, min_new_tokens=2, do_sample=False)  # warm-up
                torch.cuda.synchronize()
                t = time.perf_counter()
                model.generate(ids, max_new_tokens=output, min_new_tokens=output, do_sample=False)
                torch.cuda.synchronize()
                out[c] = c * output / (time.perf_counter() - t)
            except torch.cuda.OutOfMemoryError:
                out[c] = float("nan")
                torch.cuda.empty_cache()
            # Each as it comes: a run cut short by a time limit keeps what it measured.
            print(shape, "transformers C =", c, f"{out[c]:.1f} tok/s", flush=True)
    del model
    torch.cuda.empty_cache()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nuvec", required=True)
    ap.add_argument("--shapes", default="llama-3.2-1b,qwen3-8b")
    ap.add_argument("--concurrency", default="1,8,64,256")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--output", type=int, default=256)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-graphs", action="store_true", help="also run nuvec without CUDA graphs")
    args = ap.parse_args()
    conc = [int(c) for c in args.concurrency.split(",")]
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e9:.0f} GB/s", flush=True)
    rows = []
    for shape in args.shapes.split(","):
        # nuvec first (seconds), then transformers (minutes at C = 256 for the 8B shape).
        measured = []
        for extra in ([[], ["--no-graphs"]] if args.no_graphs else [[]]):
            r = subprocess.run([args.nuvec, shape, "--concurrency", args.concurrency, "--prompt", str(args.prompt),
                                "--output", str(args.output)] + extra, capture_output=True, text=True, timeout=1800)
            if r.returncode != 0:
                print(shape, "FAILED", r.stderr[-2000:])
                continue
            for line in r.stdout.splitlines():
                print(line, flush=True)
                measured.append(json.loads(line))
        ref = {} if args.no_torch else transformers_throughput(shape, conc, args.prompt, args.output)
        rows += [(shape, m, ref.get(m["concurrency"], float("nan"))) for m in measured]
    # Batch-1 floor: the weights plus the KV cache at the mean length, over the copy bandwidth.
    print(f"{'shape':14} {'graphs':>6} {'C':>4} | {'out tok/s':>10} {'hf':>9} {'x':>6} | {'ttft p50':>9} {'p99':>9} | "
          f"{'itl p50':>8} {'p99':>8} ms | {'of floor':>8}")
    for shape, m, hf in rows:
        step_bytes = m["weight_bytes"] + m["kv_bytes_per_token"] * (m["prompt"] + m["output"] / 2)
        floor = f"{step_bytes / bw * 1e3 / m['itl_p50_ms']:8.2f}" if m["concurrency"] == 1 else " " * 8
        print(f"{shape:14} {str(m['graphs']):>6} {m['concurrency']:>4} | {m['output_tok_s']:10.1f} {hf:9.1f} "
              f"{m['output_tok_s'] / hf:6.2f} | {m['ttft_p50_ms']:9.1f} {m['ttft_p99_ms']:9.1f} | "
              f"{m['itl_p50_ms']:8.2f} {m['itl_p99_ms']:8.2f}    | {floor}")


if __name__ == "__main__":
    main()
