#!/usr/bin/env python3
"""nuvec on the GPU beside PyTorch, in the same run, on the same GPU.

Runs build*/bench/nuvec-gpu-timings (nuvec's side: host-timed eval of 10 back-to-back copies
of each workload, per op, median of runs) and the same workloads in PyTorch (CUDA events
around 10 back-to-back calls, per op, median of runs), then prints one table:
time of each, PyTorch/nuvec (>1: nuvec faster), and the physical floor over nuvec's time:
bytes / the device-to-device copy bandwidth measured here (PyTorch's clone of 2^28 float32)
or FLOPs / the H200's dense peak (989 TFLOP/s bf16/f16 tensor cores, 67 TFLOP/s float32).

Usage: bench/gpu_compare.py --nuvec build-gpu/bench/nuvec-gpu-timings [--only GROUP]
GROUP: elementwise, reduce, softmax, norms, cross_entropy, rope, conv1d, attention, matmul, gated_delta, chain,
quantized (its own table: see quantized_table).
Attention rows compare with PyTorch's SDPA on its cuDNN backend, with a second row for its
flash backend.
"""
import argparse
import math
import re
import statistics
import subprocess
import sys

import torch

PEAK_TFLOPS = {"bf16": 989.4, "f16": 989.4, "f32": 66.9}
QUANT_ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 512)
QUANT_SHAPES = ((4096, 4096), (14336, 4096), (4096, 14336), (8192, 8192))


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


def gated_delta_check(binary, chunked, recurrent):
    """nuvec's gated_delta on the GPU beside transformers' two Qwen3-Next references on the
    same bf16 inputs (B 2, T 200, Hk 2, Hv 4, D 128, a random initial state): the log-decay
    becomes our decay (exp), q and k are repeated to Hv heads for them, q is scaled by
    1/sqrt(D) for us (they scale it inside), and their [B, H, Dk, Dv] state is transposed.
    Prints the largest differences relative to the outputs' scale."""
    import os
    import tempfile

    import torch.nn.functional as F
    from safetensors.torch import load_file, save_file
    dev = "cuda"
    b, t, hk, hv, d = 2, 200, 2, 4, 128
    unit = lambda: F.normalize(torch.randn(b, t, hk, d, device=dev), dim=-1).to(torch.bfloat16)
    q, k = unit(), unit()
    v = torch.randn(b, t, hv, d, device=dev).to(torch.bfloat16)
    logg = torch.log(torch.rand(b, t, hv, device=dev) * 0.5 + 0.5)
    beta = torch.rand(b, t, hv, device=dev).to(torch.bfloat16)
    state = torch.randn(b, hv, d, d, device=dev) * 0.3  # ours: [B, Hv, Dv, Dk]
    rep = lambda x: x.repeat_interleave(hv // hk, dim=2)
    theirs = {}
    for name, fn in (("chunked", chunked), ("recurrent", recurrent)):
        y, s = fn(rep(q), rep(k), v, logg, beta, initial_state=state.transpose(-1, -2).contiguous(),
                  output_final_state=True)
        theirs[name] = (y.float(), s.transpose(-1, -2).float())
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "in.safetensors"), os.path.join(tmp, "out.safetensors")
        qs = (q.float() * d ** -0.5).to(torch.bfloat16)
        save_file({"q": qs.contiguous(), "k": k.contiguous(), "v": v.contiguous(), "g": torch.exp(logg).contiguous(),
                   "beta": beta.contiguous(), "state": state.contiguous()}, src)
        subprocess.run([binary, "gated_delta_check", src, dst], check=True)
        ours = load_file(dst, device=dev)
    for name, (y, s) in theirs.items():
        dy = ((ours["y"].float() - y).abs().max() / y.abs().max()).item()
        ds = ((ours["state"].float() - s).abs().max() / s.abs().max()).item()
        print(f"# gated_delta vs transformers {name}: max |dy|/max|y| {dy:.2e}, max |dS|/max|S| {ds:.2e}")


def torch_side(only, binary=None):
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
    if want("conv1d"):
        # F.conv1d with groups = C in PyTorch's [N, C, L] layout (transformers' Qwen3-Next):
        # a decode step convolves the window cat(state [N, C, K - 1], x [N, C, 1]) (the new
        # state is the window's last K - 1 columns, a view); prefill pads by K - 1.
        import torch.nn.functional as F

        c, k = 8192, 4
        w = torch.randn(c, 1, k, device=dev).to(torch.bfloat16)
        for n in (1, 32, 256):
            x = torch.randn(n, c, 1, device=dev).to(torch.bfloat16)
            state = torch.randn(n, c, k - 1, device=dev).to(torch.bfloat16)

            def step():
                window = torch.cat([state, x], -1)
                return F.conv1d(window, w, groups=c), window[:, :, 1:]

            res[f"causal_conv1d_step_bf16_n{n}_c8192_k4"] = cuda_median_ms(step)
        x = torch.randn(1, c, 8192, device=dev).to(torch.bfloat16)
        res["conv1d_depthwise_bf16_n1_l8192_c8192_k4"] = cuda_median_ms(
            lambda: F.conv1d(x, w, padding=k - 1, groups=c))
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
        # Paged prefill (2048 queries at the end of 4096 positions): beside it SDPA over the same
        # keys, contiguous, with the bottom-right causal mask, on PyTorch's default choice of
        # backend (the flash and cuDNN ones take no such mask).
        qp = torch.randn(4, 32, 2048, 128, device=dev).to(torch.bfloat16)
        kp, vp = (torch.randn(4, 8, 4096, 128, device=dev).to(torch.bfloat16) for _ in range(2))
        mask = torch.ones(2048, 4096, dtype=torch.bool, device=dev).tril(4096 - 2048)
        res["paged_prefill_bf16_b4_hq32_hkv8_l2048_ctx4096_bs16_d128"] = cuda_median_ms(
            lambda: F.scaled_dot_product_attention(qp, kp, vp, attn_mask=mask, scale=0.088, enable_gqa=True),
            runs=10, batch=3)
        del qp, kp, vp, mask
        # Issue 15's prefill shapes (as bench/gpu_timings.cpp): B 4, L 4096 at D 128 (H 32),
        # 64 (H 64), 256 (H 16), forward and forward plus backward; D 128 at L 1024 and 16384.
        for b, h, l, d, backward in ((4, 32, 4096, 128, True), (4, 64, 4096, 64, True), (4, 16, 4096, 256, True),
                                     (4, 32, 1024, 128, False), (4, 32, 16384, 128, False)):
            q, k, v, g = (torch.randn(b, h, l, d, device=dev).to(torch.bfloat16) for _ in range(4))
            qg, kg, vg = (t.clone().requires_grad_(True) for t in (q, k, v))
            shape = f"bf16_b{b}_h{h}_l{l}_d{d}"
            scale = 1.0 / math.sqrt(d)
            for causal in (False, True):
                tag = "_causal" if causal else ""
                sdpa_times(f"sdpa_prefill_{shape}{tag}",
                           lambda: F.scaled_dot_product_attention(q, k, v, scale=scale, is_causal=causal),
                           runs=10, batch=3)

                def fb():
                    o = F.scaled_dot_product_attention(qg, kg, vg, scale=scale, is_causal=causal)
                    return torch.autograd.grad(o, (qg, kg, vg), g) + (o,)

                if backward:
                    sdpa_times(f"sdpa_prefill_fwd_bwd_{shape}{tag}", fb, runs=10, batch=3)
            del q, k, v, g, qg, kg, vg
    if want("matmul"):
        torch.backends.cuda.matmul.allow_tf32 = False
        for m in (4096, 8192):
            for dt, name in ((torch.bfloat16, "bf16"), (torch.float16, "f16"), (torch.float32, "f32")):
                a = torch.randn(m, m, device=dev).to(dt)
                b = torch.randn(m, m, device=dev).to(dt)
                runs = 5 if (m == 8192 and name == "f32") else 10
                res[f"matmul_{name}_{m}"] = cuda_median_ms(lambda: a @ b, runs=runs)
    if want("quantized"):
        # Beside nuvec's quantized products: the bf16 dense product x @ W.T (cuBLAS) and
        # PyTorch's int4 kernel (torch._weight_int4pack_mm, group 128: the nearest it has to
        # W4 g64), each op on another copy of the weights (over 256 MB in all, as nuvec's side).
        for n, k in QUANT_SHAPES:
            shape = f"{n}x{k}"
            copies = max(2, -(-256 * 2**20 // (n * k * 2)))
            dense = [torch.randn(n, k, device=dev).to(torch.bfloat16) for _ in range(copies)]
            for m in QUANT_ROWS:
                x = torch.randn(m, k, device=dev).to(torch.bfloat16)
                it = iter(range(1 << 60))
                res[f"dense_bf16_m{m}_{shape}"] = cuda_median_ms(
                    lambda: x @ dense[next(it) % copies].t(), runs=20 if m <= 64 else 10)
            del dense
            try:
                copies4 = max(2, -(-256 * 2**20 // (n * k // 2)))
                packed, sz = [], []
                for _ in range(copies4):
                    q = torch.randint(0, 16, (n, k), dtype=torch.int32, device=dev)
                    q8 = ((q[:, ::2] << 4) | q[:, 1::2]).to(torch.uint8)
                    packed.append(torch._convert_weight_to_int4pack(q8, 8))
                    sz.append(torch.randn(k // 128, n, 2, device=dev).to(torch.bfloat16))
                for m in QUANT_ROWS:
                    x = torch.randn(m, k, device=dev).to(torch.bfloat16)
                    it = iter(range(1 << 60))

                    def int4():
                        j = next(it) % copies4
                        return torch._weight_int4pack_mm(x, packed[j], 128, sz[j])

                    res[f"int4pack_g128_m{m}_{shape}"] = cuda_median_ms(int4, runs=20 if m <= 64 else 10)
                del packed, sz
            except (RuntimeError, AttributeError) as e:
                print(f"# torch._weight_int4pack_mm: {str(e).splitlines()[0][:100]}", file=sys.stderr)
    if want("gated_delta"):
        # transformers' Qwen3-Next torch references (no flash-linear-attention installed): the
        # recurrent rule for decode, the chunked one for prefill. They take a log-decay, heads
        # already repeated to Hv, and scale q by 1/sqrt(D) themselves (free beside the rule).
        try:
            from transformers.models.qwen3_next.modeling_qwen3_next import (
                torch_chunk_gated_delta_rule, torch_recurrent_gated_delta_rule)
        except ImportError as e:
            print(f"# transformers' Qwen3-Next: {e}", file=sys.stderr)
        else:
            import torch.nn.functional as F

            def gdn_inputs(b, t, h, d=128):
                unit = lambda: F.normalize(torch.randn(b, t, h, d, device=dev), dim=-1).to(torch.bfloat16)
                q, k = unit(), unit()
                v = torch.randn(b, t, h, d, device=dev).to(torch.bfloat16)
                g = torch.log(torch.rand(b, t, h, device=dev) * 0.5 + 0.5)
                beta = torch.rand(b, t, h, device=dev).to(torch.bfloat16)
                return q, k, v, g, beta

            for b in (1, 32, 256):
                q, k, v, g, beta = gdn_inputs(b, 1, 32)
                state = torch.randn(b, 32, 128, 128, device=dev)
                res[f"gated_delta_decode_bf16_b{b}_hk16_hv32_d128"] = cuda_median_ms(
                    lambda: torch_recurrent_gated_delta_rule(q, k, v, g, beta, state, True))
            gated_delta_check(binary, torch_chunk_gated_delta_rule, torch_recurrent_gated_delta_rule)
            for t in (8192, 65536):
                q, k, v, g, beta = gdn_inputs(1, t, 16)
                res[f"gated_delta_prefill_bf16_b1_t{t}_h16_d128"] = cuda_median_ms(
                    lambda: torch_chunk_gated_delta_rule(q, k, v, g, beta, output_final_state=True),
                    runs=3 if t > 8192 else 5, warmup=1, batch=1)
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
    # Depthwise conv1d, C 8192, K 4, bf16: a decode step reads x and the state and writes y
    # and the new state (N·C·K elements each way); prefill reads x and writes the L causal
    # outputs; plus the weight.
    for n in (1, 32, 256):
        bytes_[f"causal_conv1d_step_bf16_n{n}_c8192_k4"] = 2 * 2 * n * 8192 * 4 + 2 * 8192 * 4
    bytes_["conv1d_depthwise_bf16_n1_l8192_c8192_k4"] = 2 * 2 * 8192 * 8192 + 2 * 8192 * 4
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
    # Gated delta: decode reads and writes each float32 state [32, 128, 128] once; prefill is
    # counted in FLOPs as the rule's 6·Dk·Dv per token and head (S·k, S·q and the rank-1
    # update; the chunked form does more), over the bf16 tensor-core peak.
    if name.startswith("gated_delta_decode"):
        b = int(re.search(r"_b(\d+)_", name).group(1))
        return 2 * b * 32 * 128 * 128 * 4 / (copy_gbps * 1e9) * 1e3
    if name.startswith("gated_delta_prefill"):
        t = int(re.search(r"_t(\d+)_", name).group(1))
        return 6 * t * 16 * 128 * 128 / (PEAK_TFLOPS["bf16"] * 1e12) * 1e3
    if name.startswith("paged_prefill"):
        # 4·D FLOPs per (query, visible key): query i of L sees ctx − L + i + 1 keys.
        b, h, l, ctx = 4, 32, 2048, 4096
        return 4 * b * h * 128 * (l * (ctx - l) + l * (l + 1) / 2) / (PEAK_TFLOPS["bf16"] * 1e12) * 1e3
    if name.startswith("sdpa_prefill"):
        b, h, l, d = (int(x) for x in re.search(r"_b(\d+)_h(\d+)_l(\d+)_d(\d+)", name).groups())
        fwd = 4 * b * h * l * l * d
        flops = fwd * (3.5 if "fwd_bwd" in name else 1.0) * (0.5 if name.endswith("causal") else 1.0)
        return flops / (PEAK_TFLOPS["bf16"] * 1e12) * 1e3
    if name in bytes_:
        return bytes_[name] / (copy_gbps * 1e9) * 1e3
    if name.startswith("matmul_"):
        _, dt, m = name.split("_")
        m = int(m)
        return 2 * m**3 / (PEAK_TFLOPS[dt] * 1e12) * 1e3
    return None


def quantized_table(nv, th, copy_gbps):
    """The quantized group's table: per weight shape and row count, nuvec's W4/W8 g64 time,
    its speed-up over PyTorch's bf16 dense product and over nuvec's (both cuBLAS), PyTorch's
    int4 kernel (g128) for comparison, and the fraction of the weight-read floor (packed w +
    bf16 scales and biases over the copy bandwidth of this run); then the MoE rows, whose floor
    counts the experts an op touches."""
    print(f"\n{'quantized (bf16 x, affine g64)':34s} {'nuvec':>9s} {'dense pt':>9s} {'dense nv':>9s} "
          f"{'int4 pt':>9s} {'pt/nuvec':>9s} {'nvd/nuvec':>9s} {'int4/nuvec':>10s} {'floor':>6s}")
    for n, k in QUANT_SHAPES:
        shape = f"{n}x{k}"
        for bits in (4, 8):
            qbytes = n * k * bits / 8 + n * (k // 64) * 2 * 2
            for m in QUANT_ROWS:
                name = f"qmm_w{bits}g64_bf16_m{m}_{shape}"
                if name not in nv:
                    continue
                t = nv[name]
                dpt = th.get(f"dense_bf16_m{m}_{shape}")
                dnv = nv.get(f"dense_bf16_m{m}_{shape}")
                i4 = th.get(f"int4pack_g128_m{m}_{shape}") if bits == 4 else None
                fmt = lambda v: f"{v:9.4f}" if v else f"{'-':>9s}"
                rat = lambda v, w=9: f"{v / t:{w}.2f}" if v else f"{'-':>{w}s}"
                floor = qbytes / (copy_gbps * 1e9) * 1e3
                print(f"{name:34s} {t:9.4f} {fmt(dpt)} {fmt(dnv)} {fmt(i4)} {rat(dpt)} {rat(dnv)} {rat(i4, 10)} "
                      f"{floor / t:6.2f}")
    for name, t in nv.items():
        if not name.startswith("gather_qmm_"):
            continue
        # The equivalent dense-indexed product (one matrix) counts as one expert.
        touched = nv.get("info_touched_" + name, 1.0)
        n, k = (int(v) for v in name.rsplit("_", 1)[1].split("x"))
        per_expert = n * k / 2 + n * (k // 64) * 2 * 2
        fl = f"{touched * per_expert / (copy_gbps * 1e9) * 1e3 / t:6.2f}"
        print(f"{name:44s} {t:9.4f} ms  experts touched {touched:6.1f}  floor/nuvec {fl}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nuvec", required=True)
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    nv = nuvec_side(args.nuvec, args.only)
    th = torch_side(args.only, args.nuvec)
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
    if args.only in (None, "quantized"):
        quantized_table(nv, th, copy_gbps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
