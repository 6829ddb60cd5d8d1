#!/usr/bin/python3
"""Runs bench/attention_bench (nuvec's fused CPU attention kernel and the same attention composed
of ordinary nuvec ops) and times the attention composed in NumPy on the same shapes, in the same
session; prints each time, nuvec fused / composed and fused / NumPy, and for the decode shape
the ratio to the memory floor (K and V bytes / the memcpy bandwidth measured here), and for
the prefill the fraction of the float32 FMA peak.

Shapes: prefill B 1, H 8, L 1024, D 64 float32 (causal and not), bfloat16 (fused only; NumPy has
no bfloat16); decode B 1, Hq 32, Hkv 8, Lq 1, Lk 4096, D 128 float32 (and bfloat16 fused).
PyTorch's CPU SDPA is timed too when /usr/bin/python3 can import torch (Debian's python3-torch;
not installed by scripts/setup.sh).

Usage: bench/attention_compare.py [build-dir]   (default: build; builds nothing itself)
"""
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

PREFILL = (1, 8, 8, 1024, 1024, 64)
DECODE = (1, 32, 8, 1, 4096, 128)


def best_time(fn, min_time=1.0, min_runs=5):
    fn()
    times = []
    start = time.perf_counter()
    while time.perf_counter() - start < min_time or len(times) < min_runs:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]  # median


def numpy_attention(q, k, v, scale, causal):
    """softmax(scale q kᵀ [causal]) v, float32, grouped heads by a reshape (no K/V copy)."""
    b, hq, lq, d = q.shape
    hkv, lk = k.shape[1], k.shape[2]
    rep = hq // hkv
    qs = (q * np.float32(scale)).reshape(b, hkv, rep * lq, d)
    s = qs @ k.transpose(0, 1, 3, 2)  # [b, hkv, rep·lq, lk]
    if causal:
        qi = np.tile(np.arange(lk - lq, lk), rep)[:, None]
        s = np.where(qi >= np.arange(lk)[None, :], s, np.float32(-np.finfo(np.float32).max))
    s = s - s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return (s @ v).reshape(b, hq, lq, v.shape[3])


def numpy_times():
    rng = np.random.default_rng(0)
    out = {}
    for name, shape, causal in (("prefill", PREFILL, False), ("prefill_causal", PREFILL, True),
                                ("decode", DECODE, False)):
        b, hq, hkv, lq, lk, d = shape
        q = rng.uniform(-1, 1, (b, hq, lq, d)).astype(np.float32)
        k = rng.uniform(-1, 1, (b, hkv, lk, d)).astype(np.float32)
        v = rng.uniform(-1, 1, (b, hkv, lk, d)).astype(np.float32)
        out[name] = best_time(lambda: numpy_attention(q, k, v, 1 / math.sqrt(d), causal))
    return out


def torch_times():
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(os.cpu_count())
    out = {}
    with torch.no_grad():
        for name, shape, causal in (("prefill", PREFILL, False), ("prefill_causal", PREFILL, True),
                                    ("decode", DECODE, False)):
            b, hq, hkv, lq, lk, d = shape
            q = torch.rand(b, hq, lq, d) * 2 - 1
            k = (torch.rand(b, hkv, lk, d) * 2 - 1).repeat_interleave(hq // hkv, 1)
            v = (torch.rand(b, hkv, lk, d) * 2 - 1).repeat_interleave(hq // hkv, 1)
            f = torch.nn.functional.scaled_dot_product_attention
            out[name] = best_time(lambda: f(q, k, v, is_causal=causal and lq > 1))
    return out


def cpu_peak_flops():
    """float32 FMA peak as bench/compare.py counts it: cores x GHz x 2 units x lanes x 2."""
    ghz = None
    flags = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("cpu MHz"):
                ghz = float(line.split(":")[1]) / 1000
                break
        flags = open("/proc/cpuinfo").read()
    except OSError:
        pass
    lanes = 16 if "avx512f" in flags else 8
    return os.cpu_count() * (ghz or 2.5) * 1e9 * 2 * lanes * 2


def memcpy_bandwidth():
    """Bytes moved per second (read + write) copying 64 MiB with NumPy."""
    a = np.ones(16 << 20, np.float32)
    b = np.empty_like(a)
    t = best_time(lambda: np.copyto(b, a), min_time=0.5)
    return 2 * a.nbytes / t


def nuvec_times(build):
    exe = os.path.join(build, "bench", "attention_bench")
    if not os.path.exists(exe):
        sys.exit(f"{exe} not found: build the attention_bench target first")
    res = subprocess.run([exe, "--benchmark_format=json", "--benchmark_min_time=1"],
                         check=True, capture_output=True, text=True).stdout
    out = {}
    for bench in json.loads(res)["benchmarks"]:
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[bench["time_unit"]]
        out[bench["name"].split("/")[0].removeprefix("BM_attention_")] = bench["real_time"] * scale
    return out


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    nv = nuvec_times(build)
    npt = numpy_times()
    th = torch_times()
    bw = memcpy_bandwidth()
    print(f"attention on the CPU ({os.cpu_count()} CPUs), times in ms; ratios < 1: nuvec's fused kernel faster")
    head = f"{'case':<26}{'fused':>9}{'composed':>10}{'numpy':>9}{'fused/comp':>12}{'fused/numpy':>13}"
    if th:
        head += f"{'torch':>9}{'fused/torch':>13}"
    print(head)
    for name in ("prefill", "prefill_causal", "decode"):
        f, c, n = nv[f"{name}_fused"], nv[f"{name}_composed"], npt[name]
        line = f"{name + ' f32':<26}{f * 1e3:9.2f}{c * 1e3:10.2f}{n * 1e3:9.2f}{f / c:12.2f}{f / n:13.2f}"
        if th:
            line += f"{th[name] * 1e3:9.2f}{f / th[name]:13.2f}"
        print(line)
    for name in ("prefill_bf16", "decode_bf16"):
        print(f"{name.replace('_bf16', ' bf16'):<26}{nv[name + '_fused'] * 1e3:9.2f}")
    b, hq, hkv, lq, lk, d = DECODE
    for dt, size in (("f32", 4), ("bf16", 2)):
        key = "decode_fused" if dt == "f32" else "decode_bf16_fused"
        floor = 2 * b * hkv * lk * d * size / bw  # K and V bytes over memcpy's bytes moved per second
        print(f"decode {dt}: memory floor {floor * 1e3:.2f} ms (memcpy {bw / 1e9:.1f} GB/s moved); "
              f"fused at {floor / nv[key]:.2f} of it")
    b, hq, hkv, lq, lk, d = PREFILL
    flops = 4.0 * b * hq * lq * lk * d
    peak = cpu_peak_flops()
    t = nv["prefill_fused"]
    print(f"prefill f32 fused: {flops / t / 1e9:.1f} GFLOP/s, {flops / peak / t:.2f} "
          f"of the FMA peak {peak / 1e9:.0f} (causal: {flops / 2 / nv['prefill_causal_fused'] / 1e9:.1f} GFLOP/s "
          f"on the unmasked half)")


if __name__ == "__main__":
    main()
