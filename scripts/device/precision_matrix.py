#!/usr/bin/env python3
"""The pilot's precision question on a real GPU: one program, a small GPT-style decoder (pre-LN blocks,
causal SDPA attention, GELU MLP, AdamW), run as fp32 or bf16 autocast, each with and without
activation checkpointing (torch.utils.checkpoint around every block). Prints one JSON line:

  peak_memory_bytes  the seed's recipe: torch.cuda.reset_peak_memory_stats(), one full step
                     (zero_grad, forward, backward, optimizer step), torch.cuda.max_memory_allocated()
  step_seconds       median of the timed steps (CUDA-synchronized wall clock), after warm-up steps
  losses             every step's loss, to compare the variants with fp32

  precision_matrix.py --precision fp32|bf16 [--checkpointing] [--steps N] [--device cuda]
Parameters, gradients and AdamW moments stay fp32 in every variant (autocast changes activations only)."""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def causal_attention(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):  # torch >= 2.0 (flash / memory-efficient kernels)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    t = q.shape[-2]  # torch 1.13 (a CPU dry run here): the same maths, unfused
    w = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5
    w = w.masked_fill(torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return w.softmax(-1) @ v


class Block(nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.heads, self.dropout = heads, nn.Dropout(dropout)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = causal_attention(q, k, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.dropout(self.proj(a))
        return x + self.dropout(self.mlp(self.ln2(x)))


class Decoder(nn.Module):
    def __init__(self, vocab, d, layers, heads, seq, dropout, checkpointing):
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads, dropout) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
        self.checkpointing = checkpointing

    def forward(self, ids):
        x = self.emb(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for blk in self.blocks:
            # use_reentrant=False with the RNG state preserved: the recompute replays dropout exactly.
            x = checkpoint(blk, x, use_reentrant=False) if self.checkpointing else blk(x)
        return self.head(self.ln(x))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--checkpointing", action="store_true")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--device", default="cuda")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--d-model", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--vocab", type=int, default=8192)
    a = p.parse_args()
    dev = torch.device(a.device)
    gpu = dev.type == "cuda"
    torch.manual_seed(45)
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32: no silent TF32
    torch.backends.cudnn.allow_tf32 = False
    model = Decoder(a.vocab, a.d_model, a.layers, a.heads, a.seq, 0.1, a.checkpointing).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    g = torch.Generator().manual_seed(7)
    batches = [torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=g) for _ in range(a.steps)]
    sync = (lambda: torch.cuda.synchronize(dev)) if gpu else (lambda: None)

    def step(ids):
        ids = ids.to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, a.vocab), ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        return loss

    losses, times, peak = [], [], None
    for i, ids in enumerate(batches):
        sync()
        if i == 0 and gpu:
            torch.cuda.reset_peak_memory_stats(dev)
        t0 = time.perf_counter()
        loss = step(ids)
        sync()
        dt = time.perf_counter() - t0
        if i == 0 and gpu:
            peak = torch.cuda.max_memory_allocated(dev)
        losses.append(loss.item())
        if i >= a.warmup:
            times.append(dt)
    params = sum(p.numel() for p in model.parameters())
    step_s = statistics.median(times) if times else None
    print(json.dumps({
        "variant": a.precision + (" + checkpointing" if a.checkpointing else ""), "precision": a.precision,
        "checkpointing": a.checkpointing, "device": torch.cuda.get_device_name(dev) if gpu else "cpu",
        "torch": torch.__version__, "parameters": params, "peak_memory_bytes": peak,
        "peak_memory_source": "torch.cuda.max_memory_allocated after reset_peak_memory_stats, first full step"
        if gpu else "not measured (no GPU)",
        "step_seconds": step_s, "step_seconds_all": times, "tokens_per_second":
        a.batch * a.seq / step_s if step_s else None, "losses": losses,
        "shape": {"layers": a.layers, "d_model": a.d_model, "heads": a.heads, "seq": a.seq, "batch": a.batch,
                  "vocab": a.vocab}, "steps": a.steps, "warmup": a.warmup}))


if __name__ == "__main__":
    main()
