#!/usr/bin/python3
"""nuvec-mnist beside PyTorch: trains the same MLP (784-512-256-10, ReLU) with Adam
(bias-corrected, as PyTorch's) on the same Fashion-MNIST files, shuffled mini-batches of the
same size, for the same epochs, then runs nuvec-mnist with matching flags and prints both
test accuracies and both training throughputs (images/s) with their ratio.

Usage: bench/mnist_torch.py [--epochs N] [--batch-size N] [--lr X] [--seed N] [--data DIR]
                            [--nuvec PATH] [--threads N] [--skip-nuvec] [--skip-torch]
                            [--device cpu|gpu]
--device gpu trains both on the GPU (PyTorch on "cuda", nuvec-mnist with --device gpu).
Needs Debian's python3-torch (apt-get install -y python3-torch); run with /usr/bin/python3.
"""
import argparse
import csv
import gzip
import math
import os
import re
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def read_idx(path):
    """An IDX file (plain or gzip) as a NumPy array; independent of nuvec's reader."""
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        raw = f.read()
    zero, type_code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0:
        raise ValueError(f"{path}: not an IDX file")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    dtype = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}[type_code]
    return np.frombuffer(raw, dtype=dtype, offset=4 + 4 * ndim).reshape(dims)


def find(data_dir, stem):
    for name in (stem, stem + ".gz"):
        p = os.path.join(data_dir, name)
        if os.path.exists(p):
            return p
    sys.exit(f"missing {stem}[.gz] in {data_dir}: apt-get install dataset-fashion-mnist, or pass --data DIR")


def load(data_dir):
    x_train = read_idx(find(data_dir, "train-images-idx3-ubyte")).reshape(-1, 784).astype(np.float32) / 255.0
    y_train = read_idx(find(data_dir, "train-labels-idx1-ubyte")).astype(np.int64)
    x_test = read_idx(find(data_dir, "t10k-images-idx3-ubyte")).reshape(-1, 784).astype(np.float32) / 255.0
    y_test = read_idx(find(data_dir, "t10k-labels-idx1-ubyte")).astype(np.int64)
    return x_train, y_train, x_test, y_test


def train_torch(args):
    try:
        import torch
    except ImportError:
        sys.exit("PyTorch is missing: apt-get install -y python3-torch (and run with /usr/bin/python3)")
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = "cuda" if args.device == "gpu" else "cpu"
    x_train, y_train, x_test, y_test = (torch.from_numpy(a).to(dev) for a in load(args.data))
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    n = x_train.shape[0]
    steps = args.epochs * ((n + args.batch_size - 1) // args.batch_size)
    # nuvec-mnist's default schedule: cosine decay from lr to 0 over all steps, per step.
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda step: 0.5 * (1 + math.cos(math.pi * min(step, steps) / steps))
        if args.schedule == "cosine" else 1.0)
    loss_fn = torch.nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(args.seed)
    train_seconds = 0.0
    acc = 0.0
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(n, generator=gen).to(dev)
        model.train()
        t0 = time.perf_counter()
        total = 0.0
        for i in range(0, n, args.batch_size):
            idx = perm[i:i + args.batch_size]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x_train[idx]), y_train[idx])
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * idx.shape[0]
        seconds = time.perf_counter() - t0
        train_seconds += seconds
        model.eval()
        with torch.no_grad():
            acc = (model(x_test).argmax(1) == y_test).float().mean().item() * 100
        print(f"torch epoch {epoch}/{args.epochs}  loss {total / n:.4f}  "
              f"{n / seconds:.0f} images/s  test accuracy {acc:.2f}%", flush=True)
    return acc, n * args.epochs / train_seconds


def run_nuvec(args):
    if not os.path.exists(args.nuvec):
        sys.exit(f"{args.nuvec} not found: build it with ./scripts/build.sh (or pass --nuvec PATH)")
    with tempfile.TemporaryDirectory() as out:
        cmd = [args.nuvec, "--model", "mlp", "--epochs", str(args.epochs),
               "--batch-size", str(args.batch_size), "--lr", str(args.lr),
               "--seed", str(args.seed), "--schedule", args.schedule, "--data", args.data, "--out", out, "--no-plot", "--no-progress",
               "--device", args.device]
        print("running:", " ".join(cmd), flush=True)
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout.splitlines():
            if re.match(r"^(epoch|nuvec-mnist|model|data)", line):
                print("nuvec", line)
        if proc.returncode != 0:
            sys.exit(f"nuvec-mnist failed ({proc.returncode}):\n{proc.stdout[-2000:]}")
        with open(os.path.join(out, "mlp_curve.csv")) as f:
            rows = list(csv.DictReader(f))
    seconds = sum(float(r["train_seconds"]) for r in rows)
    images = sum(float(r["images"]) for r in rows)
    return float(rows[-1]["test_accuracy"]), images / seconds


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--schedule", choices=["cosine", "constant"], default="cosine")
    p.add_argument("--data", default=DEFAULT_DATA)
    p.add_argument("--nuvec", default=os.path.join(ROOT, "build", "examples", "nuvec-mnist"))
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: PyTorch's)")
    p.add_argument("--skip-nuvec", action="store_true")
    p.add_argument("--skip-torch", action="store_true")
    p.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    args = p.parse_args()

    results = {}
    if not args.skip_torch:
        results["pytorch"] = train_torch(args)
    if not args.skip_nuvec:
        results["nuvec"] = run_nuvec(args)
    print(f"\nMLP 784-512-256-10, Adam lr {args.lr}, batch {args.batch_size}, {args.epochs} epochs, "
          f"{os.cpu_count()} cores")
    print(f"{'':10} {'test accuracy':>14} {'images/s':>10}")
    for name, (acc, ips) in results.items():
        print(f"{name:10} {acc:13.2f}% {ips:10.0f}")
    if len(results) == 2:
        ratio = results["nuvec"][1] / results["pytorch"][1]
        print(f"nuvec / pytorch images/s: {ratio:.2f}x")


if __name__ == "__main__":
    main()
