#!/usr/bin/env python3
"""nuvec on the GPU beside PyTorch, in the same run, on the same GPU.

Runs build*/bench/nuvec-gpu-timings (nuvec's side: host-timed eval of 10 back-to-back copies
of each workload, per op, median of runs) and the same workloads in PyTorch (CUDA events
around 10 back-to-back calls, per op, median of runs), then prints one table:
time of each, PyTorch/nuvec (>1: nuvec faster), and the physical floor over nuvec's time:
bytes / the device-to-device copy bandwidth measured here (PyTorch's clone of 2^28 float32)
or FLOPs / the H200's dense peak (989 TFLOP/s bf16/f16 tensor cores, 67 TFLOP/s float32).

Usage: bench/gpu_compare.py --nuvec build-gpu/bench/nuvec-gpu-timings [--only GROUP]
GROUP: elementwise, reduce, softmax, norms, cross_entropy, rope, attention, matmul, chain.
Attention rows compare with PyTorch's SDPA on its cuDNN backend, with a second row for its
flash backend.
"""
import argparse
import statistics
import subprocess
import sys

import torch

PEAK_TFLOPS = {"bf16": 989.4, "f16": 989.4, "f32": 66.9}


def cuda_median_ms(fn, runs=20, warmup=3, batch=10):
    """Median over runs of the time per op of `batch` back-to-back calls of fn, bracketed by
    CUDA events (outputs kept alive, as nuvec's side keeps its batch)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        outs = [fn() for _ in range(batch)]
        end.record()
        end.synchronize()
        del outs
        times.append(start.elapsed_time(end) / batch)
    return statistics.median(times)


def torch_side(only):
    dev = "cuda"
    res = {}
    want = lambda g: only is None or only == g
    n = 1 << 28
    x = torch.randn(n, device=dev)
    res["copy_bandwidth_clone_f32_2^28"] = cuda_median_ms(lambda: x.clone())
    if want("elementwise"):
        y = torch.randn(n, device=dev)
        res["copy_cast_f32_i32_2^28"] = cuda_median_ms(lambda: x.to(torch.int32))
        res["add_f32_2^28"] = cuda_median_ms(lambda: x + y)
        res["exp_f32_2^28"] = cuda_median_ms(lambda: torch.exp(x))
        del y
    if want("reduce"):
        x2 = x.view(1 << 14, 1 << 14)
        res["sum_all_f32_2^28"] = cuda_median_ms(lambda: x.sum())
        res["max_all_f32_2^28"] = cuda_median_ms(lambda: x.max())
        res["sum_last_f32_16384x16384"] = cuda_median_ms(lambda: x2.sum(-1))
        res["max_last_f32_16384x16384"] = cuda_median_ms(lambda: x2.amax(-1))
    if want("softmax"):
        s = torch.randn(16384, 4096, device=dev).to(torch.bfloat16)
        res["softmax_last_bf16_16384x4096"] = cuda_median_ms(lambda: torch.softmax(s, -1))
    if want("norms"):
        import torch.nn.functional as F

        rows, d, eps = 16384, 4096, 1e-5
        bf = torch.bfloat16
        x = torch.randn(rows, d, device=dev).to(bf)
        r = torch.randn(rows, d, device=dev).to(bf)
        g = torch.randn(rows, d, device=dev).to(bf)
        gl = torch.randn(rows, 1, device=dev).to(bf)
        w = torch.randn(d, device=dev).to(bf)
        b = torch.randn(d, device=dev).to(bf)

        def add_rms(x, r, w):
            h = x + r
            return h, F.rms_norm(h, (d,), w, eps)

        res["rms_norm_bf16_16384x4096"] = cuda_median_ms(lambda: F.rms_norm(x, (d,), w, eps))
        res["add_rms_norm_bf16_16384x4096"] = cuda_median_ms(lambda: add_rms(x, r, w))
        res["layer_norm_bf16_16384x4096"] = cuda_median_ms(lambda: F.layer_norm(x, (d,), w, b, eps))
        res["logsumexp_last_bf16_16384x4096"] = cuda_median_ms(lambda: torch.logsumexp(x, -1, keepdim=True))
        xg, rg, wg, bg = (t.clone().requires_grad_(True) for t in (x, r, w, b))

        def fb(f, inputs, cot):
            y = f(*inputs)
            return torch.autograd.grad(y, inputs, cot) + (y,)

        res["rms_norm_fwd_bwd_bf16_16384x4096"] = cuda_median_ms(
            lambda: fb(lambda a, c: F.rms_norm(a, (d,), c, eps), (xg, wg), g), runs=10)
        res["add_rms_norm_fwd_bwd_bf16_16384x4096"] = cuda_median_ms(
            lambda: fb(lambda a, q, c: add_rms(a, q, c)[1], (xg, rg, wg), g), runs=10)
        res["layer_norm_fwd_bwd_bf16_16384x4096"] = cuda_median_ms(
            lambda: fb(lambda a, c, e: F.layer_norm(a, (d,), c, e, eps), (xg, wg, bg), g), runs=10)
        res["softmax_fwd_bwd_bf16_16384x4096"] = cuda_median_ms(
            lambda: fb(lambda a: torch.softmax(a, -1), (xg,), g), runs=10)
        res["logsumexp_fwd_bwd_bf16_16384x4096"] = cuda_median_ms(
            lambda: fb(lambda a: torch.logsumexp(a, -1, keepdim=True), (xg,), gl), runs=10)
    if want("cross_entropy"):
        import torch.nn.functional as F

        rows, vocab = 8192, 151936
        x = torch.randn(rows, vocab, device=dev).to(torch.bfloat16)
        t = torch.randint(0, vocab, (rows,), device=dev)
        g = torch.randn(rows, device=dev)
        res["cross_entropy_bf16_8192x151936"] = cuda_median_ms(
            lambda: F.cross_entropy(x, t, reduction="none"), runs=10, batch=3)
        xg = x.clone().requires_grad_(True)

        def fb():
            loss = F.cross_entropy(xg, t, reduction="none")
            return torch.autograd.grad(loss, (xg,), g.to(loss.dtype)) + (loss,)

        res["cross_entropy_fwd_bwd_bf16_8192x151936"] = cuda_median_ms(fb, runs=10, batch=3)
        del x, xg
    if want("rope"):
        # PyTorch's eager rotate-half (transformers' apply_rotary_pos_emb) with the cos and sin
        # tables built per call, as nuvec computes its angles per call.
        def rope_eager(x, offset):
            t = x.shape[-2]
            inv = 1.0 / (10000.0 ** (torch.arange(0, 128, 2, device=dev, dtype=torch.float32) / 128))
            pos = torch.arange(offset, offset + t, device=dev, dtype=torch.float32)
            emb = torch.cat([torch.outer(pos, inv)] * 2, -1)
            cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
            x1, x2 = x[..., :64], x[..., 64:]
            return x * cos + torch.cat((-x2, x1), -1) * sin

        q = torch.randn(1, 32, 16384, 128, device=dev).to(torch.bfloat16)
        qd = torch.randn(32, 32, 1, 128, device=dev).to(torch.bfloat16)
        res["rope_bf16_1x32x16384x128"] = cuda_median_ms(lambda: rope_eager(q, 0))
        res["rope_decode_bf16_32x32x1x128"] = cuda_median_ms(lambda: rope_eager(qd, 4096))

        # norm_rope: F.rms_norm, the eager rotate-half, and the rows written into the cache.
        import torch.nn.functional as F

        w = torch.randn(128, device=dev).to(torch.bfloat16)
        cache = torch.randn(1, 32, 16384, 128, device=dev).to(torch.bfloat16)

        def norm_rope_eager(x, offset):
            r = rope_eager(F.rms_norm(x, (128,), w, 1e-6), offset)
            cache[..., offset:offset + x.shape[-2], :] = r
            return cache

        res["norm_rope_cache_bf16_1x32x16384x128"] = cuda_median_ms(lambda: norm_rope_eager(q, 0))
    if want("attention"):
        # PyTorch's SDPA with its cuDNN backend (the main column) and its flash backend (the
        # second row), on the same shapes; a backend that refuses a shape is left out.
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def sdpa_times(name, make, runs=20, batch=10):
            for backend, suffix in ((SDPBackend.CUDNN_ATTENTION, ""), (SDPBackend.FLASH_ATTENTION, "|flash")):
                try:
                    with sdpa_kernel(backend):
                        make()
                        res[name + suffix] = cuda_median_ms(make, runs=runs, batch=batch)
                except RuntimeError as e:
                    print(f"# {name}{suffix}: {str(e).splitlines()[0][:100]}", file=sys.stderr)

        for lk in (8192, 512):
            q = torch.randn(32, 32, 1, 128, device=dev).to(torch.bfloat16)
            k = torch.randn(32, 8, lk, 128, device=dev).to(torch.bfloat16)
            v = torch.randn(32, 8, lk, 128, device=dev).to(torch.bfloat16)
            name = f"sdpa_decode_bf16_b32_hq32_hkv8_lk{lk}_d128"
            sdpa_times(name, lambda: F.scaled_dot_product_attention(q, k, v, scale=0.088, enable_gqa=True))
            if lk == 8192:
                # No paged attention in PyTorch: the paged kernel is set beside contiguous SDPA
                # over the same keys.
                sdpa_times("paged_decode_bf16_b32_hq32_hkv8_ctx8192_bs16_d128",
                           lambda: F.scaled_dot_product_attention(q, k, v, scale=0.088, enable_gqa=True))
        q, k, v, g = (torch.randn(4, 32, 4096, 128, device=dev).to(torch.bfloat16) for _ in range(4))
        qg, kg, vg = (t.clone().requires_grad_(True) for t in (q, k, v))
        for causal in (False, True):
            tag = "_causal" if causal else ""
            sdpa_times("sdpa_prefill_bf16_b4_h32_l4096_d128" + tag,
                       lambda: F.scaled_dot_product_attention(q, k, v, scale=0.088, is_causal=causal),
                       runs=10, batch=3)

            def fb():
                o = F.scaled_dot_product_attention(qg, kg, vg, scale=0.088, is_causal=causal)
                return torch.autograd.grad(o, (qg, kg, vg), g) + (o,)

            sdpa_times("sdpa_prefill_fwd_bwd_bf16_b4_h32_l4096_d128" + tag, fb, runs=10, batch=3)
    if want("matmul"):
        torch.backends.cuda.matmul.allow_tf32 = False
        for m in (4096, 8192):
            for dt, name in ((torch.bfloat16, "bf16"), (torch.float16, "f16"), (torch.float32, "f32")):
                a = torch.randn(m, m, device=dev).to(dt)
                b = torch.randn(m, m, device=dev).to(dt)
                runs = 5 if (m == 8192 and name == "f32") else 10
                res[f"matmul_{name}_{m}"] = cuda_median_ms(lambda: a @ b, runs=runs)
    if want("chain"):
        xs = torch.randn(1024, device=dev)

        def chain():
            y = xs
            for _ in range(10000):
                y = y + xs
            return y

        ms = cuda_median_ms(chain, runs=5, warmup=1, batch=1)
        res["chain_10000_small_ops_per_op_us"] = ms * 1000.0 / 10000
    return res


def nuvec_side(binary, only):
    cmd = [binary] + ([only] if only else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    res = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            res[parts[0]] = float(parts[1])
    return res


def floor_ms(name, copy_gbps):
    """The physical floor of a workload in ms (None where none applies)."""
    n = 1 << 28
    bytes_ = {
        "copy_cast_f32_i32_2^28": 8 * n,
        "add_f32_2^28": 12 * n,
        "exp_f32_2^28": 8 * n,
        "sum_all_f32_2^28": 4 * n,
        "max_all_f32_2^28": 4 * n,
        "sum_last_f32_16384x16384": 4 * n,
        "max_last_f32_16384x16384": 4 * n,
        "softmax_last_bf16_16384x4096": 2 * 2 * 16384 * 4096,
    }
    # The row ops on bf16 16384 x 4096 (2 bytes per element): the full-size arrays each must
    # read and write at least once (row statistics and the 4096-element parameters are noise).
    m = 2 * 16384 * 4096
    ce = 2 * 8192 * 151936
    bytes_["rope_bf16_1x32x16384x128"] = 2 * 2 * 32 * 16384 * 128      # x; y
    bytes_["rope_decode_bf16_32x32x1x128"] = 2 * 2 * 32 * 32 * 128
    bytes_["norm_rope_cache_bf16_1x32x16384x128"] = 2 * 2 * 32 * 16384 * 128  # x; cache rows
    bytes_.update({
        "cross_entropy_bf16_8192x151936": ce,               # logits
        "cross_entropy_fwd_bwd_bf16_8192x151936": 3 * ce,   # logits | logits; dlogits
        "rms_norm_bf16_16384x4096": 2 * m,              # x; y
        "add_rms_norm_bf16_16384x4096": 4 * m,          # x, r; h, y
        "layer_norm_bf16_16384x4096": 2 * m,            # x; y
        "logsumexp_last_bf16_16384x4096": m,            # x
        "rms_norm_fwd_bwd_bf16_16384x4096": 5 * m,      # x; y | x, g; dx
        "add_rms_norm_fwd_bwd_bf16_16384x4096": 7 * m,  # x, r; h, y | h, g; dh
        "layer_norm_fwd_bwd_bf16_16384x4096": 5 * m,    # x; y | x, g; dx
        "softmax_fwd_bwd_bf16_16384x4096": 5 * m,       # x; y | y, g; dx
        "logsumexp_fwd_bwd_bf16_16384x4096": 3 * m,     # x | x; dx
    })
    # Attention: decode reads K and V once (the floor is their bytes over the copy
    # bandwidth); prefill is bound by its FLOPs: 4·B·H·L²·D forward (QKᵀ and PV), 2.5 times
    # that backward, halved under a causal mask.
    kv = lambda lk: 2 * 2 * 32 * 8 * lk * 128
    bytes_["sdpa_decode_bf16_b32_hq32_hkv8_lk8192_d128"] = kv(8192)
    bytes_["sdpa_decode_bf16_b32_hq32_hkv8_lk512_d128"] = kv(512)
    bytes_["paged_decode_bf16_b32_hq32_hkv8_ctx8192_bs16_d128"] = kv(8192)
    if name.startswith("sdpa_prefill"):
        fwd = 4 * 4 * 32 * 4096 * 4096 * 128
        flops = fwd * (3.5 if "fwd_bwd" in name else 1.0) * (0.5 if name.endswith("causal") else 1.0)
        return flops / (PEAK_TFLOPS["bf16"] * 1e12) * 1e3
    if name in bytes_:
        return bytes_[name] / (copy_gbps * 1e9) * 1e3
    if name.startswith("matmul_"):
        _, dt, m = name.split("_")
        m = int(m)
        return 2 * m**3 / (PEAK_TFLOPS[dt] * 1e12) * 1e3
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nuvec", required=True)
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    nv = nuvec_side(args.nuvec, args.only)
    th = torch_side(args.only)
    copy_ms = th["copy_bandwidth_clone_f32_2^28"]
    copy_gbps = 8 * (1 << 28) / (copy_ms * 1e-3) / 1e9
    print(f"device-to-device copy (PyTorch clone, 2^28 float32): {copy_ms:.3f} ms = "
          f"{copy_gbps / 1e3:.2f} TB/s (read + write)")
    print(f"{'workload':34s} {'nuvec':>11s} {'PyTorch':>11s} {'PyTorch/nuvec':>14s} {'floor/nuvec':>12s}")
    for name, t in nv.items():
        if name not in th:
            continue
        unit = "us/op" if name.startswith("chain") else "ms"
        f = floor_ms(name, copy_gbps)
        fl = f"{f / t:.2f}" if f else "-"
        print(f"{name:34s} {t:9.3f}{unit[:2]:>2s} {th[name]:9.3f}{unit[:2]:>2s} {th[name] / t:14.2f} {fl:>12s}")
        if name + "|flash" in th:
            tf = th[name + "|flash"]
            print(f"{'  (PyTorch flash backend)':34s} {'':11s} {tf:9.3f}ms {tf / t:14.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
