#!/usr/bin/env python3
"""nuvec-lm beside transformers (eager, bf16) on the GPU: prefill tokens/s and batch-1 decode
tokens/s of random-initialised models shaped like Llama-3.2-1B, Qwen3-0.6B and Qwen3-8B, in
the same run; decode also as a fraction of its floor (the bytes one step reads, the weights
and the KV cache, over the copy bandwidth measured here).

    python3 bench/lm_compare.py --nuvec build/bench/nuvec-lm-timings [--shapes ...] [--prefill 1024,8192]
"""
import argparse
import json
import subprocess
import time

import torch

SHAPES = {
    "llama-3.2-1b": dict(model_type="llama", vocab_size=128256, hidden_size=2048, intermediate_size=8192,
                         num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                         max_position_embeddings=131072, rms_norm_eps=1e-5, tie_word_embeddings=True,
                         rope_theta=500000.0,
                         rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    "qwen3-0.6b": dict(model_type="qwen3", vocab_size=151936, hidden_size=1024, intermediate_size=3072,
                       num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                       max_position_embeddings=40960, rms_norm_eps=1e-6, tie_word_embeddings=True,
                       rope_theta=1000000.0),
    "qwen3-8b": dict(model_type="qwen3", vocab_size=151936, hidden_size=4096, intermediate_size=12288,
                     num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                     max_position_embeddings=40960, rms_norm_eps=1e-6, tie_word_embeddings=False,
                     rope_theta=1000000.0),
    # Qwen3-0.6B's 28 layers at tiny widths: the decode step's host cost (nuvec-lm-timings).
    "qwen3-tiny": dict(model_type="qwen3", vocab_size=512, hidden_size=64, intermediate_size=128,
                       num_hidden_layers=28, num_attention_heads=2, num_key_value_heads=1, head_dim=128,
                       max_position_embeddings=40960, rms_norm_eps=1e-6, tie_word_embeddings=True,
                       rope_theta=1000000.0),
}


def copy_bandwidth():
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(10):
        b.copy_(a)
    torch.cuda.synchronize()
    return 2 * n * 10 / (time.perf_counter() - t)


def transformers_model(shape):
    """A random-initialised transformers model of `shape` (bf16, eager attention, on the GPU)."""
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg = dict(SHAPES[shape])
    model_type = cfg.pop("model_type")
    config = AutoConfig.for_model(model_type, **cfg)
    return AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="eager").cuda().eval()


def transformers_timings(shape, prefills, decode):
    cfg = SHAPES[shape]
    model = transformers_model(shape)
    out = {}
    with torch.no_grad():
        for L in prefills:
            ids = torch.randint(0, cfg["vocab_size"], (1, L), device="cuda")
            best_p, best_d = 1e30, 1e30
            for rep in range(3):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                o = model(ids, use_cache=True)
                nxt = o.logits[:, -1].argmax(-1, keepdim=True)
                torch.cuda.synchronize()
                t1 = time.perf_counter()
                past = o.past_key_values
                for _ in range(decode):
                    o = model(nxt, past_key_values=past, use_cache=True)
                    past = o.past_key_values
                    nxt = o.logits[:, -1].argmax(-1, keepdim=True)
                torch.cuda.synchronize()
                t2 = time.perf_counter()
                if rep > 0:
                    best_p, best_d = min(best_p, t1 - t0), min(best_d, t2 - t1)
            out[L] = (L / best_p, decode / best_d)
    del model
    torch.cuda.empty_cache()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nuvec", required=True)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--prefill", default="1024,8192")
    ap.add_argument("--decode", type=int, default=64)
    ap.add_argument("--bits", default="0,4")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    prefills = [int(x) for x in args.prefill.split(",")]
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e9:.0f} GB/s")
    rows = []
    for shape in args.shapes.split(","):
        ref = {} if args.no_torch else transformers_timings(shape, prefills, args.decode)
        print(shape, "transformers", ref, flush=True)
        for bits in [int(b) for b in args.bits.split(",")]:
            r = subprocess.run([args.nuvec, shape, "--bits", str(bits), "--prefill", args.prefill,
                                "--decode", str(args.decode)], capture_output=True, text=True, timeout=900)
            if r.returncode != 0:
                print(shape, bits, "FAILED", r.stderr[-2000:])
                continue
            for line in r.stdout.splitlines():
                print(line, flush=True)  # each measurement as it comes (a cut-short run keeps them)
                m = json.loads(line)
                L = m["prefill"]
                # The decode steps run at contexts L .. L + decode; their mean KV read.
                step_bytes = m["weight_bytes"] + m["kv_bytes_per_token"] * (L + args.decode / 2)
                floor_tok_s = bw / step_bytes
                tp, td = ref.get(L, (float("nan"), float("nan")))
                rows.append((shape, bits, L, m["prefill_tok_s"], tp, m["decode_tok_s"], td, floor_tok_s, m))
    print(f"{'shape':14} {'bits':>4} {'L':>6} | {'prefill tok/s':>13} {'hf':>9} {'x':>6} | "
          f"{'decode tok/s':>12} {'hf':>7} {'x':>6} {'floor':>7} {'of floor':>8} | {'step ms':>7} "
          f"{'build ms':>8} {'nodes':>5}")
    for shape, bits, L, p, tp, d, td, fl, m in rows:
        print(f"{shape:14} {bits:>4} {L:>6} | {p:13.0f} {tp:9.0f} {p / tp:6.2f} | "
              f"{d:12.1f} {td:7.1f} {d / td:6.2f} {fl:7.0f} {d / fl:8.2f} | {m.get('step_ms', 0):7.2f} "
              f"{m.get('build_ms', 0):8.2f} {m.get('nodes', 0):5}")


if __name__ == "__main__":
    main()
