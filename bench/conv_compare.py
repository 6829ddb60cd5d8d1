#!/usr/bin/python3
"""Times conv2d (batch 32, 64 -> 64 channels, 3x3, 56x56, padding 1, float32) in PyTorch on
the CPU and in nuvec's bench/conv_bench (run here, in the same session), and prints
nuvec / PyTorch. PyTorch comes from Debian's python3-torch (`apt-get install -y python3-torch`);
it is not part of scripts/setup.sh because no test needs it. Debian's package installs into
/usr/bin/python3's site-packages, hence the shebang (a pyenv python3 on PATH will not see it).

Usage: bench/conv_compare.py [build-dir]   (default: build; builds nothing itself)
"""
import json
import os
import subprocess
import sys
import time

N, H, W, C, K = 32, 56, 56, 64, 3
FLOPS = 2.0 * N * H * W * C * K * K * C


def best_time(fn, min_time=2.0, min_runs=5):
    fn()  # warm-up (allocations, thread pools)
    times = []
    start = time.perf_counter()
    while time.perf_counter() - start < min_time or len(times) < min_runs:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]  # median


def torch_time():
    import torch

    torch.manual_seed(0)
    # Same thread count as OpenBLAS takes by default (every CPU), so the ratio compares
    # kernels rather than thread settings.
    torch.set_num_threads(os.cpu_count())
    # PyTorch's layout is channels-first; channels_last memory format matches nuvec's data
    # layout (NHWC) and is the faster PyTorch CPU path, so both are timed and the best kept.
    x = torch.rand(N, C, H, W, dtype=torch.float32) * 2 - 1
    w = torch.rand(C, C, K, K, dtype=torch.float32) * 2 - 1
    results = {}
    with torch.no_grad():
        results["NCHW"] = best_time(lambda: torch.nn.functional.conv2d(x, w, padding=1))
        xl = x.contiguous(memory_format=torch.channels_last)
        wl = w.contiguous(memory_format=torch.channels_last)
        results["NHWC"] = best_time(lambda: torch.nn.functional.conv2d(xl, wl, padding=1))
    return results, torch.get_num_threads(), torch.__version__


def nuvec_time(build):
    exe = os.path.join(build, "bench", "conv_bench")
    if not os.path.exists(exe):
        sys.exit(f"{exe} not found: build the conv_bench target first")
    out = subprocess.run(
        [exe, "--benchmark_format=json", "--benchmark_min_time=2"],
        check=True, capture_output=True, text=True).stdout
    bench = json.loads(out)["benchmarks"][0]
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[bench["time_unit"]]
    return bench["real_time"] * scale


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    t_nuvec = nuvec_time(build)
    t_torch, threads, version = torch_time()
    best = min(t_torch.values())
    print(f"conv2d N={N} {H}x{W} {C}->{C} {K}x{K} pad 1 float32, {os.cpu_count()} CPUs")
    print(f"  nuvec (NHWC, im2col + sgemm)   {t_nuvec * 1e3:8.1f} ms  {FLOPS / t_nuvec / 1e9:7.1f} GFLOP/s")
    for layout, t in t_torch.items():
        print(f"  torch {version} ({layout}, {threads} thr) {t * 1e3:8.1f} ms  {FLOPS / t / 1e9:7.1f} GFLOP/s")
    print(f"  ratio nuvec / best torch: {t_nuvec / best:.2f}")


if __name__ == "__main__":
    main()
