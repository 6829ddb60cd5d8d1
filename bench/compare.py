#!/usr/bin/env python3
"""Times the core benchmarks' operations in NumPy (same sizes, same process run as the C++
results it reads) and prints nuvec / NumPy ratios and the ratio to the physical floor:
bytes / memcpy bandwidth for memory-bound ops, FLOPs / peak for matmul."""
import json
import os
import sys
import time

import numpy as np


def best_time(fn, min_time=0.5):
    fn()
    times = []
    start = time.perf_counter()
    while time.perf_counter() - start < min_time or len(times) < 3:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def cpu_peak_flops():
    """float32 FMA peak: cores x GHz x 2 FMA units x (8 lanes AVX2 | 16 AVX-512) x 2."""
    ghz = None
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("cpu MHz"):
                ghz = float(line.split(":")[1]) / 1000
                break
        flags = open("/proc/cpuinfo").read()
    except OSError:
        flags = ""
    lanes = 16 if "avx512f" in flags else 8
    return os.cpu_count() * (ghz or 2.5) * 1e9 * 2 * lanes * 2


def main():
    nv = {}
    for path in sys.argv[1:]:
        for b in json.load(open(path))["benchmarks"]:
            nv[b["name"].split("/")[0]] = b
    n = 10_000_000
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, n).astype(np.float32)
    b = rng.uniform(-1, 1, n).astype(np.float32)
    m1 = rng.uniform(-1, 1, (1024, 1024)).astype(np.float32)
    m2 = rng.uniform(-1, 1, (1024, 1024)).astype(np.float32)
    x = rng.uniform(-1, 1, 16).astype(np.float32)
    s6 = rng.uniform(-1, 1, 1_000_000).astype(np.float32)
    cols = rng.uniform(-1, 1, (4096, 1024)).astype(np.float32)

    def chain():
        y = x
        for i in range(10_000):
            y = y * np.float32(0.999) if i % 2 else y + np.float32(0.001)
        return y

    rows_x = rng.uniform(-1, 1, (4096, 1024)).astype(np.float32)
    w1 = rng.uniform(-1, 1, 1024).astype(np.float32)
    b1 = rng.uniform(-1, 1, 1024).astype(np.float32)
    logits = rng.uniform(-3, 3, (512, 32000)).astype(np.float32)
    targets = rng.integers(0, 32000, 512)
    q = rng.uniform(-1, 1, (1, 32, 1024, 128)).astype(np.float32)
    eps = np.float32(1e-5)

    def np_rms():
        return rows_x / np.sqrt(np.mean(rows_x * rows_x, -1, keepdims=True) + eps) * w1

    def np_ln():
        mu = np.mean(rows_x, -1, keepdims=True)
        xc = rows_x - mu
        return xc / np.sqrt(np.mean(xc * xc, -1, keepdims=True) + eps) * w1 + b1

    def np_softmax():
        e = np.exp(rows_x - np.max(rows_x, -1, keepdims=True))
        return e / np.sum(e, -1, keepdims=True)

    def np_ce():
        m = np.max(logits, -1, keepdims=True)
        lse = np.log(np.sum(np.exp(logits - m), -1)) + m[:, 0]
        return lse - logits[np.arange(512), targets]

    def np_rope():
        inv = 1.0 / (10000.0 ** (np.arange(0, 128, 2, dtype=np.float32) / 128))
        th = np.outer(np.arange(1024, dtype=np.float32), inv)
        c, s = np.cos(th), np.sin(th)
        x1, x2 = q[..., :64], q[..., 64:]
        return np.concatenate([x1 * c - x2 * s, x1 * s + x2 * c], -1)

    # Affine 4-bit, groups of 64, MLX's packing (8 codes a uint32, low nibble first): the
    # NumPy peer dequantizes inside the timed call, then multiplies (what a NumPy user does;
    # np_qmm_pre is the product alone against a matrix dequantized beforehand).
    wq = rng.integers(0, 2**32, (4096, 512), dtype=np.uint64).astype(np.uint32)
    sc = rng.uniform(0.01, 0.1, (4096, 64)).astype(np.float32)
    bi = rng.uniform(-1, 1, (4096, 64)).astype(np.float32)
    shifts = (4 * np.arange(8, dtype=np.uint32))

    def np_dequant():
        codes = ((wq[:, :, None] >> shifts) & 15).reshape(4096, 64, 64).astype(np.float32)
        return (codes * sc[:, :, None] + bi[:, :, None]).reshape(4096, 4096)

    wdq = np_dequant()
    xq1 = rng.uniform(-1, 1, (1, 4096)).astype(np.float32)
    xq256 = rng.uniform(-1, 1, (256, 4096)).astype(np.float32)

    # The MoE decode expert product: x [1, 2048] against 8 of 64 experts [768, 2048].
    moe_w = rng.uniform(-1, 1, (64, 768, 2048)).astype(np.float32)
    moe_x = rng.uniform(-1, 1, (1, 1, 2048)).astype(np.float32)
    moe_rhs = np.arange(0, 56, 7)

    def np_moe():
        return moe_x @ moe_w[moe_rhs].swapaxes(-1, -2)

    bw = nv["BM_memcpy"]["bytes_per_second"]
    peak = cpu_peak_flops()
    rows = [
        ("add 1e7 f32", nv["BM_add"]["real_time"] / 1e3, best_time(lambda: np.add(a, b)), 12 * n / bw),
        ("exp 1e7 f32", nv["BM_exp"]["real_time"] / 1e3, best_time(lambda: np.exp(a)), 8 * n / bw),
        ("sum 1e7 f32", nv["BM_sum"]["real_time"] / 1e3, best_time(lambda: np.sum(a)), 4 * n / bw),
        ("sum axis 0 4096x1024 f32", nv["BM_sum_axis0_4096x1024"]["real_time"] / 1e3, best_time(lambda: np.sum(cols, axis=0)), 4 * cols.size / bw),
        ("matmul 1024^3 f32", nv["BM_matmul_1024"]["real_time"] / 1e3, best_time(lambda: m1 @ m2), 2 * 1024**3 / peak),
        ("cumsum 1e7 f32", nv["BM_cumsum_1e7"]["real_time"] / 1e3, best_time(lambda: np.cumsum(a)), 8 * n / bw),
        ("sort 1e6 f32", nv["BM_sort_1e6"]["real_time"] / 1e3, best_time(lambda: np.sort(s6)), None),
        ("rms_norm 4096x1024 f32", nv["BM_rms_norm_4096x1024"]["real_time"] / 1e3, best_time(np_rms), 8 * rows_x.size / bw),
        ("layer_norm 4096x1024 f32", nv["BM_layer_norm_4096x1024"]["real_time"] / 1e3, best_time(np_ln), 8 * rows_x.size / bw),
        ("softmax 4096x1024 f32", nv["BM_softmax_4096x1024"]["real_time"] / 1e3, best_time(np_softmax), 8 * rows_x.size / bw),
        ("cross_entropy 512x32000", nv["BM_cross_entropy_512x32000"]["real_time"] / 1e3, best_time(np_ce), 4 * logits.size / bw),
        ("rope 1x32x1024x128 f32", nv["BM_rope_1x32x1024x128"]["real_time"] / 1e3, best_time(np_rope), 8 * q.size / bw),
        ("qmm w4g64 M=1 4096^2", nv["BM_qmm_w4g64_m1_4096"]["real_time"] / 1e3, best_time(lambda: xq1 @ np_dequant().T), (4096 * 2048 + 4096 * 64 * 8) / bw),
        ("  (numpy, pre-dequantized)", nv["BM_qmm_w4g64_m1_4096"]["real_time"] / 1e3, best_time(lambda: xq1 @ wdq.T), None),
        ("qmm w4g64 M=256 4096^2", nv["BM_qmm_w4g64_m256_4096"]["real_time"] / 1e3, best_time(lambda: xq256 @ np_dequant().T), 2 * 256 * 4096**2 / peak),
        ("  (numpy, pre-dequantized)", nv["BM_qmm_w4g64_m256_4096"]["real_time"] / 1e3, best_time(lambda: xq256 @ wdq.T), None),
        ("gather_mm MoE 8/64 f32", nv["BM_gather_mm_moe_e64_top8"]["real_time"] / 1e3, best_time(np_moe), 8 * 768 * 2048 * 4 / bw),
        ("chain 10k ops (per op)", nv["BM_chain_10k"]["real_time"] / 1e3 / 1e4, best_time(chain) / 1e4, None),
    ]
    print(f"memcpy bandwidth (read+write, all threads): {bw / 1e9:.1f} GB/s; float32 peak estimate: {peak / 1e9:.0f} GFLOP/s")
    print(f"{'benchmark':<26}{'nuvec':>12}{'numpy':>12}{'numpy/nuvec':>13}{'floor/nuvec':>13}")
    for name, t_nv, t_np, floor in rows:
        unit, scale = ("us", 1e6) if t_nv < 1e-3 else ("ms", 1e3)
        fl = f"{floor / t_nv:.2f}" if floor else "-"
        print(f"{name:<26}{t_nv * scale:>9.3f} {unit}{t_np * scale:>9.3f} {unit}{t_np / t_nv:>13.2f}{fl:>13}")
    print("numpy/nuvec > 1 means nuvec is faster; floor/nuvec is the fraction of the physical limit reached.")


if __name__ == "__main__":
    main()
