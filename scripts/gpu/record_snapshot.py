#!/usr/bin/env python3
"""Records a PyTorch memory snapshot of a small, real training program.

Runs on a machine with PyTorch and a CUDA GPU. It trains a small GPT-style
model (random weights, random tokens) for a few steps with bf16 autocast and
AdamW, with a side stream that prepares each batch's inputs for the main
stream (record_stream), a sequence length drawn anew every step, and writes
the snapshot that torch.cuda.memory._dump_snapshot produces:

    python3 scripts/gpu/record_snapshot.py OUT.pickle [--steps N] [--context]
        [--layers L] [--width W]

gpumem convert OUT.pickle turns the snapshot into a trace; gpumem replay
replays the snapshot directly.
"""
import argparse
import math
import random

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.out = nn.Linear(4 * width, width)
        self.heads = heads

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, width, layers, heads, ctx):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(ctx, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=384)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--context", action="store_true",
                    help="record Python stacks too (a larger snapshot)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    random.seed(a.seed)
    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    vocab, ctx = 8192, 512
    if a.context:
        torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                                 max_entries=1_000_000)
    else:
        torch.cuda.memory._record_memory_history(enabled="all", context=None,
                                                 max_entries=1_000_000)
    model = GPT(vocab, a.width, a.layers, max(1, a.width // 64), ctx).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    side = torch.cuda.Stream()
    main_stream = torch.cuda.current_stream()
    for step in range(a.steps):
        t = random.choice([64, 96, 128, 192, 256, 384, 512])
        with torch.cuda.stream(side):
            x = torch.randint(0, vocab, (a.batch, t + 1), device=dev)
            inp, tgt = x[:, :-1].contiguous(), x[:, 1:].contiguous()
        main_stream.wait_stream(side)
        inp.record_stream(main_stream)
        tgt.record_stream(main_stream)
        del x
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(inp)
            loss = F.cross_entropy(logits.float().view(-1, vocab), tgt.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del inp, tgt, logits, loss
    torch.cuda.synchronize()
    torch.cuda.memory._dump_snapshot(a.out)
    torch.cuda.memory._record_memory_history(enabled=None)
    print("torch", torch.__version__, "device", torch.cuda.get_device_name(),
          "steps", a.steps, "peak_allocated", torch.cuda.max_memory_allocated(),
          "peak_reserved", torch.cuda.max_memory_reserved(), "snapshot", a.out)


if __name__ == "__main__":
    main()
