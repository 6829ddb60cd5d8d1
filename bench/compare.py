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
        ("chain 10k ops (per op)", nv["BM_chain_10k"]["real_time"] / 1e3 / 1e4, best_time(chain) / 1e4, None),
    ]
    print(f"memcpy bandwidth (read+write, all threads): {bw / 1e9:.1f} GB/s; float32 peak estimate: {peak / 1e9:.0f} GFLOP/s")
    print(f"{'benchmark':<24}{'nuvec':>12}{'numpy':>12}{'numpy/nuvec':>13}{'floor/nuvec':>13}")
    for name, t_nv, t_np, floor in rows:
        unit, scale = ("us", 1e6) if t_nv < 1e-3 else ("ms", 1e3)
        fl = f"{floor / t_nv:.2f}" if floor else "-"
        print(f"{name:<24}{t_nv * scale:>9.3f} {unit}{t_np * scale:>9.3f} {unit}{t_np / t_nv:>13.2f}{fl:>13}")
    print("numpy/nuvec > 1 means nuvec is faster; floor/nuvec is the fraction of the physical limit reached.")


if __name__ == "__main__":
    main()
