#!/usr/bin/env python3
"""`nuvec-lm train` tokens/s beside an equivalent PyTorch training loop (issue 17).

Runs `nuvec-lm train` for --steps updates with the given model sizes (its default corpus,
Debian's fortunes, or --data), reads the run's config.json and trainer_state.json, then trains
the same Llama (transformers' LlamaForCausalLM when transformers is installed, else the small
PyTorch Llama below: RMSNorm, rotary attention, SwiGLU, untied head) with the same batch,
context, AdamW settings and gradient clipping on random token windows, and prints one JSON
line per framework and the ratio. Both times leave out the first --warmup updates (nuvec's
from its loss.csv timestamps when present, else its whole run). bf16 autocast on CUDA,
float32 on the CPU, as `nuvec-lm train` does.

    python3 bench/lm_train_compare.py --nuvec build/examples/nuvec-lm [--steps 60] [--device cpu|cuda]
        [--layers 4 --hidden 128 --heads 4 --kv-heads 4 --intermediate 384 --context 128 --batch 8]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat((-x2, x1), -1) * sin


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, d = c["hidden_size"], c["head_dim"]
        self.nh, self.nkv, self.d = c["num_attention_heads"], c["num_key_value_heads"], d
        self.q = nn.Linear(h, self.nh * d, bias=False)
        self.k = nn.Linear(h, self.nkv * d, bias=False)
        self.v = nn.Linear(h, self.nkv * d, bias=False)
        self.o = nn.Linear(self.nh * d, h, bias=False)
        self.gate = nn.Linear(h, c["intermediate_size"], bias=False)
        self.up = nn.Linear(h, c["intermediate_size"], bias=False)
        self.down = nn.Linear(c["intermediate_size"], h, bias=False)
        self.n1 = RMSNorm(h, c["rms_norm_eps"])
        self.n2 = RMSNorm(h, c["rms_norm_eps"])

    def forward(self, x, cos, sin, mask):
        B, L, _ = x.shape
        y = self.n1(x)
        q = rotate(self.q(y).view(B, L, self.nh, self.d).transpose(1, 2), cos, sin)
        k = rotate(self.k(y).view(B, L, self.nkv, self.d).transpose(1, 2), cos, sin)
        v = self.v(y).view(B, L, self.nkv, self.d).transpose(1, 2)
        if self.nkv != self.nh:
            k = k.repeat_interleave(self.nh // self.nkv, 1)
            v = v.repeat_interleave(self.nh // self.nkv, 1)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(self.d) + mask
        a = (s.float().softmax(-1).to(q.dtype) @ v).transpose(1, 2).reshape(B, L, -1)
        x = x + self.o(a)
        y = self.n2(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


class SmallLlama(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.blocks = nn.ModuleList(Block(c) for _ in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)

    def forward(self, ids):
        L = ids.shape[1]
        d = self.c["head_dim"]
        theta = self.c.get("rope_theta") or self.c.get("rope_parameters", {}).get("rope_theta", 10000.0)
        inv = 1.0 / theta ** (torch.arange(0, d, 2, device=ids.device).float() / d)
        ang = torch.arange(L, device=ids.device).float()[:, None] * inv[None]
        ang = torch.cat((ang, ang), -1)
        x = self.embed(ids)
        cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
        mask = torch.full((L, L), float("-inf"), device=ids.device).triu(1).to(x.dtype)
        for b in self.blocks:
            x = b(x, cos, sin, mask)
        return self.head(self.norm(x))


def torch_model(c, device):
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
        cfg = LlamaConfig(**{k: v for k, v in c.items() if k not in ("architectures", "dtype", "torch_dtype")})
        return LlamaForCausalLM(cfg).to(device), "transformers LlamaForCausalLM"
    except Exception:
        return SmallLlama(c).to(device), "PyTorch Llama (bench/lm_train_compare.py)"


def run_torch(c, o, device):
    model, what = torch_model(c, device)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": o["weight_decay"]},
                             {"params": other, "weight_decay": 0.0}], lr=o["lr"], betas=(o["beta1"], o["beta2"]))
    B, L, V = o["batch"], o["context"], c["vocab_size"]
    gen = torch.Generator().manual_seed(0)
    autocast = device == "cuda"

    def step():
        ids = torch.randint(0, V, (B, L + 1), generator=gen).to(device)
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=autocast):
            out = model(ids[:, :-1])
            logits = out.logits if hasattr(out, "logits") else out
            loss = F.cross_entropy(logits.float().reshape(-1, V), ids[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), o["grad_clip"])
        opt.step()
        return loss

    for _ in range(o["warmup_steps"]):
        step()
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    n = o["timed_steps"]
    for _ in range(n):
        loss = step()
    float(loss)
    if device == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    return {"framework": what, "device": device, "tokens_per_s": n * B * L / dt, "steps": n}


def nuvec_tokens_per_s(run_dir, o, warmup):
    """(tokens/s over the updates after `warmup`, how): from loss.csv's elapsed seconds."""
    path = os.path.join(run_dir, "loss.csv")
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            header = f.readline().strip().split(",")
            for line in f:
                rows.append(dict(zip(header, line.strip().split(","))))
    key = next((k for k in ("seconds", "elapsed", "time") if rows and k in rows[0]), None)
    tokens = o["batch"] * o["context"]
    if key and len(rows) > warmup + 1:
        a, b = rows[warmup], rows[-1]
        return (int(b["step"]) - int(a["step"])) * tokens / (float(b[key]) - float(a[key])), "loss.csv after warm-up"
    with open(os.path.join(run_dir, "trainer_state.json")) as f:
        st = json.load(f)
    return st["step"] * tokens / st["seconds"], "whole run (trainer_state.json)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nuvec", required=True, help="the nuvec-lm binary")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--data")
    for name, default in (("layers", 4), ("hidden", 128), ("heads", 4), ("kv-heads", 4), ("intermediate", 384),
                          ("context", 128), ("batch", 8), ("vocab", 2048)):
        ap.add_argument("--" + name, type=int, default=default)
    args = ap.parse_args()
    out = tempfile.mkdtemp(prefix="nuvec-train-")
    cmd = [args.nuvec, "train", "--out", out, "--steps", str(args.steps), "--no-plot", "--no-progress",
           "--eval-every", "0", "--save-every", "0", "--device", "gpu" if args.device == "cuda" else "cpu"]
    for name in ("layers", "hidden", "heads", "kv-heads", "intermediate", "context", "batch", "vocab"):
        cmd += ["--" + name, str(getattr(args, name.replace("-", "_")))]
    if args.data:
        cmd += ["--data", args.data]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "config.json")) as f:
        c = json.load(f)
    with open(os.path.join(out, "trainer_state.json")) as f:
        o = json.load(f)["options"]
    nuvec_tps, how = nuvec_tokens_per_s(out, o, args.warmup)
    print(json.dumps({"framework": "nuvec", "device": args.device, "tokens_per_s": round(nuvec_tps, 1),
                      "steps": args.steps, "timed": how, "dtype": o["dtype"]}))
    o = dict(o, warmup_steps=args.warmup, timed_steps=max(args.steps - args.warmup, 1))
    t = run_torch(c, o, args.device)
    t["tokens_per_s"] = round(t["tokens_per_s"], 1)
    print(json.dumps(t))
    print(f"nuvec / PyTorch: {nuvec_tps / t['tokens_per_s']:.2f}x ({c['num_hidden_layers']} layers, hidden "
          f"{c['hidden_size']}, batch {o['batch']} x {o['context']}, {args.device})")


if __name__ == "__main__":
    main()
