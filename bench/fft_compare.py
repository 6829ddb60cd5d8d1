#!/usr/bin/python3
"""Times a one-dimensional complex64 FFT of 2^20 points in NumPy and in nuvec's
bench/fft_bench (run here, in the same session), and prints nuvec / NumPy. NumPy is Debian's
python3-numpy (pocketfft, single-threaded, computes complex64 input in complex128), hence the
/usr/bin/python3 shebang.

Usage: bench/fft_compare.py [build-dir]   (default: build; builds nothing itself)
"""
import json
import math
import os
import subprocess
import sys
import time

N = 1 << 20
FLOPS = 5.0 * N * math.log2(N)


def best_time(fn, min_time=2.0, min_runs=5):
    fn()  # warm-up
    times = []
    start = time.perf_counter()
    while time.perf_counter() - start < min_time or len(times) < min_runs:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]  # median


def numpy_time():
    import numpy as np

    rng = np.random.default_rng(0)
    x = (rng.uniform(-1, 1, N) + 1j * rng.uniform(-1, 1, N)).astype(np.complex64)
    return best_time(lambda: np.fft.fft(x)), np.__version__


def nuvec_time(build):
    exe = os.path.join(build, "bench", "fft_bench")
    if not os.path.exists(exe):
        sys.exit(f"{exe} not found: build the fft_bench target first")
    out = subprocess.run(
        [exe, "--benchmark_format=json", "--benchmark_min_time=2"],
        check=True, capture_output=True, text=True).stdout
    bench = json.loads(out)["benchmarks"][0]
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[bench["time_unit"]]
    return bench["real_time"] * scale


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    t_nuvec = nuvec_time(build)
    t_np, version = numpy_time()
    print(f"fft complex64 n=2^20, {os.cpu_count()} CPUs")
    print(f"  nuvec (FFTW, estimate plan)  {t_nuvec * 1e3:8.2f} ms  {FLOPS / t_nuvec / 1e9:7.2f} GFLOP/s")
    print(f"  numpy {version} (pocketfft)   {t_np * 1e3:8.2f} ms  {FLOPS / t_np / 1e9:7.2f} GFLOP/s")
    print(f"  ratio nuvec / numpy: {t_nuvec / t_np:.2f}")


if __name__ == "__main__":
    main()
