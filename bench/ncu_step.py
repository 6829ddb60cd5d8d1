#!/usr/bin/env python3
"""The kernels of one step of a repeated GPU loop, from an ncu CSV: count and device time per
kernel name, between the last two launches of a boundary kernel that runs once a step.

    ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \\
        --launch-skip 3600 --launch-count 2400 BINARY ARGS > step.csv
    python3 bench/ncu_step.py step.csv ["arg_reduce_kernel<__nv_bfloat16>"]

The default boundary is greedy sampling's argmax (one a decode step of nuvec-lm-timings);
--launch-skip should pass the model's initialisation and the first (captured) steps.
bench/GPU-NOTES.md's decode-step tables come from it.
"""
import csv
import sys


def main():
    rows = []
    with open(sys.argv[1]) as f:
        lines = [l for l in f if l.startswith('"')]
    for row in csv.DictReader(lines):
        if row.get("Metric Name") == "gpu__time_duration.sum":
            rows.append((row["Kernel Name"][:90], float(row["Metric Value"].replace(",", "")) / 1000.0))
    print("kernels profiled:", len(rows))
    key = sys.argv[2] if len(sys.argv) > 2 else "arg_reduce_kernel<__nv_bfloat16>"
    idx = [i for i, (n, _) in enumerate(rows) if key in n]
    if len(idx) < 2:
        sys.exit(f"fewer than two launches of {key!r}: profile more steps (--launch-count)")
    step = rows[idx[-2] + 1:idx[-1] + 1]
    print(f"step: {len(step)} kernels, {sum(d for _, d in step):.1f} us of kernel time (boundary {key})")
    agg = {}
    for n, d in step:
        c, t = agg.get(n, (0, 0.0))
        agg[n] = (c + 1, t + d)
    for n, (c, t) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        print(f"{t:9.1f} us {c:5d} x {t / c:7.2f} us  {n}")


if __name__ == "__main__":
    main()
