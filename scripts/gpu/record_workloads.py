#!/usr/bin/env python3
"""Records PyTorch memory snapshots of real programs of other kinds than the
bundled traces' (which are GPT training), for the replays:

  unet     a diffusion U-Net (convolutions, group norm, attention at the
           lowest resolution, skip connections) trained as a denoiser,
           AdamW, bf16 autocast, image side and batch drawn anew every step
  kvserve  a decoder serving requests: batches of prompts of different
           lengths, prefill, then token-by-token decoding with a key/value
           cache that grows by concatenation; requests end at different
           lengths and leave the batch, new batches arrive (no grad)
  cnn      a residual convolutional network trained with a batch size that
           changes every step (a data loader's tail batches, a scheduler
           that ramps the batch), SGD with momentum, channels-last, bf16
  vit      a vision transformer trained at a resolution and micro-batch
           drawn anew every step, with gradient accumulation over one to
           four micro-batches and an evaluation pass every eighth step
  moe      a decoder whose feed-forward layers are a mixture of eight
           experts with top-2 routing, trained on batches of changing
           sequence length: every expert's share of the tokens, so the
           size of its tensors, depends on the data
  beam     beam search from a decoder: prompts of different lengths, two to
           eight beams, the key/value cache reordered (index_select) and
           grown at every token
  prefetch the convolutional network trained on two streams: a side stream
           copies the next batch from pinned host memory and normalizes it
           while the current batch trains, and the training stream takes
           it over (wait_stream, record_stream)

Weights and data are random: the allocation pattern, not the numbers, is
what is recorded. Usage (a machine with PyTorch and a CUDA GPU):

    python3 scripts/gpu/record_workloads.py WORKLOAD OUT.pickle [--seed S]

gpumem convert OUT.pickle turns the snapshot into a trace.
"""
import argparse
import random

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---- unet -------------------------------------------------------------------

class ResBlock(nn.Module):
    def __init__(self, cin, cout, tdim):
        super().__init__()
        self.n1 = nn.GroupNorm(8, cin)
        self.c1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.t = nn.Linear(tdim, cout)
        self.n2 = nn.GroupNorm(8, cout)
        self.c2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, temb):
        h = self.c1(F.silu(self.n1(x)))
        h = h + self.t(temb)[:, :, None, None]
        h = self.c2(F.silu(self.n2(h)))
        return h + self.skip(x)


class Attn(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n = nn.GroupNorm(8, c)
        self.qkv = nn.Conv2d(c, 3 * c, 1)
        self.o = nn.Conv2d(c, c, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv(self.n(x)).reshape(b, 3, 4, c // 4, h * w).unbind(1)
        y = F.scaled_dot_product_attention(q.transpose(-1, -2), k.transpose(-1, -2), v.transpose(-1, -2))
        return x + self.o(y.transpose(-1, -2).reshape(b, c, h, w))


class UNet(nn.Module):
    def __init__(self, base=128, mults=(1, 2, 3, 4)):
        super().__init__()
        tdim = base * 4
        self.temb = nn.Sequential(nn.Linear(base, tdim), nn.SiLU(), nn.Linear(tdim, tdim))
        self.base = base
        self.inp = nn.Conv2d(3, base, 3, padding=1)
        chans = [base * m for m in mults]
        self.down, self.pool = nn.ModuleList(), nn.ModuleList()
        c = base
        skips = []
        for i, co in enumerate(chans):
            self.down.append(nn.ModuleList([ResBlock(c, co, tdim), ResBlock(co, co, tdim)]))
            skips.append(co)
            c = co
            self.pool.append(nn.Conv2d(c, c, 3, stride=2, padding=1) if i < len(chans) - 1 else nn.Identity())
        self.mid1, self.mida, self.mid2 = ResBlock(c, c, tdim), Attn(c), ResBlock(c, c, tdim)
        self.up, self.ups = nn.ModuleList(), nn.ModuleList()
        for i, co in reversed(list(enumerate(chans))):
            self.up.append(nn.ModuleList([ResBlock(c + skips[i], co, tdim), ResBlock(co, co, tdim)]))
            c = co
            self.ups.append(nn.Upsample(scale_factor=2) if i > 0 else nn.Identity())
        self.out = nn.Sequential(nn.GroupNorm(8, c), nn.SiLU(), nn.Conv2d(c, 3, 3, padding=1))

    def forward(self, x, t):
        half = self.base // 2
        f = torch.exp(-torch.arange(half, device=x.device) * (9.2 / half))
        e = t[:, None] * f[None]
        temb = self.temb(torch.cat([e.sin(), e.cos()], 1))
        h = self.inp(x)
        hs = []
        for blocks, pool in zip(self.down, self.pool):
            for b in blocks:
                h = b(h, temb)
            hs.append(h)
            h = pool(h)
        h = self.mid2(self.mida(self.mid1(h, temb)), temb)
        for blocks, up in zip(self.up, self.ups):
            h = blocks[0](torch.cat([h, hs.pop()], 1), temb)
            h = blocks[1](h, temb)
            h = up(h)
        return self.out(h)


def unet(dev, steps):
    model = UNet().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(steps):
        side = random.choice([64, 96, 128])
        batch = random.choice([8, 16, 24, 32])
        x0 = torch.randn(batch, 3, side, side, device=dev)
        t = torch.rand(batch, device=dev) * 1000
        noise = torch.randn_like(x0)
        a = (1 - t / 1000)[:, None, None, None]
        xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.mse_loss(model(xt, t).float(), noise)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x0, t, noise, xt, loss


# ---- kvserve ----------------------------------------------------------------

def attend(x, qkv, proj, heads, cache):
    """Multi-head self-attention of x (batch, tokens, width) through the
    projections qkv and proj; cache, if not None, holds the keys and values
    of the tokens before x, which it extends (causal otherwise). Returns the
    output and the keys and values."""
    b, t, c = x.shape
    q, k, v = qkv(x).split(c, 2)
    q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
    if cache is not None:
        k = torch.cat([cache[0], k], 2)
        v = torch.cat([cache[1], v], 2)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
    return proj(y.transpose(1, 2).reshape(b, t, c)), (k, v)


class DecLayer(nn.Module):
    def __init__(self, w, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(w), nn.LayerNorm(w)
        self.qkv, self.proj = nn.Linear(w, 3 * w), nn.Linear(w, w)
        self.fc, self.out = nn.Linear(w, 4 * w), nn.Linear(4 * w, w)
        self.heads = heads

    def forward(self, x, cache):
        h, kv = attend(self.ln1(x), self.qkv, self.proj, self.heads, cache)
        x = x + h
        return x + self.out(F.gelu(self.fc(self.ln2(x)))), kv


class Decoder(nn.Module):
    def __init__(self, vocab=32000, w=1024, layers=8, heads=16, ctx=4096):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, w), nn.Embedding(ctx, w)
        self.layers = nn.ModuleList(DecLayer(w, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(w), nn.Linear(w, vocab, bias=False)

    def forward(self, idx, start, caches):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(start, start + t, device=idx.device))
        new = []
        for i, layer in enumerate(self.layers):
            x, kv = layer(x, caches[i] if caches else None)
            new.append(kv)
        return self.head(self.ln(x[:, -1:])), new


def kvserve(dev, steps):
    model = Decoder().to(dev).to(torch.bfloat16).eval()
    with torch.no_grad():
        for _ in range(steps):
            batch = random.choice([1, 2, 4, 8, 12, 16])
            prompt = random.choice([32, 128, 256, 512, 1024, 1536])
            ends = sorted(random.randint(8, 128) for _ in range(batch))
            idx = torch.randint(0, 32000, (batch, prompt), device=dev)
            logits, caches = model(idx, 0, None)
            pos, done = prompt, 0
            while done < len(ends) and pos < 4000:
                nxt = torch.argmax(logits[:, -1], -1, keepdim=True)
                logits, caches = model(nxt, pos, caches)
                pos += 1
                # requests that reached their length leave the batch
                while done < len(ends) and pos - prompt >= ends[done]:
                    done += 1
                    keep = len(ends) - done
                    if keep == 0:
                        break
                    caches = [(k[-keep:].contiguous(), v[-keep:].contiguous()) for k, v in caches]
                    logits = logits[-keep:]
            del idx, logits, caches


# ---- cnn ----------------------------------------------------------------------

class Basic(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


class ResNet(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        layers, c = [], 64
        for co, n, s in [(64, 2, 1), (128, 2, 2), (256, 2, 2), (512, 2, 2)]:
            for i in range(n):
                layers.append(Basic(c, co, s if i == 0 else 1))
                c = co
        self.body = nn.Sequential(*layers)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.body(self.stem(x)), 1), 1))


def cnn(dev, steps):
    model = ResNet().to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(steps):
        # a ramp, a tail batch at each "epoch" end, and random jitter
        batch = min(512, 32 * (1 + step // 3)) if step % 7 else random.randint(5, 97)
        side = random.choice([160, 192, 224])
        x = torch.randn(batch, 3, side, side, device=dev).to(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (batch,), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, y, loss


# ---- vit ----------------------------------------------------------------------

class ViTBlock(nn.Module):
    def __init__(self, w, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(w), nn.LayerNorm(w)
        self.attn = nn.MultiheadAttention(w, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(w, 4 * w), nn.GELU(), nn.Linear(4 * w, w))

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class ViT(nn.Module):
    def __init__(self, w=768, depth=12, heads=12, patch=16, most=288, classes=1000):
        super().__init__()
        self.embed = nn.Conv2d(3, w, patch, patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, w))
        self.pos = nn.Parameter(torch.zeros(1, (most // patch) ** 2 + 1, w))
        self.blocks = nn.ModuleList(ViTBlock(w, heads) for _ in range(depth))
        self.ln, self.head = nn.LayerNorm(w), nn.Linear(w, classes)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1)
        x = x + self.pos[:, : x.shape[1]]
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x[:, 0]))


def vit(dev, steps):
    model = ViT().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for step in range(steps):
        side = random.choice([160, 224, 288])
        micro = random.choice([16, 32, 64])
        accum = random.choice([1, 2, 4])
        for _ in range(accum):
            x = torch.randn(micro, 3, side, side, device=dev)
            y = torch.randint(0, 1000, (micro,), device=dev)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y) / accum
            loss.backward()
            del x, y, loss
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 8 == 7:
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                for _ in range(2):
                    model(torch.randn(256, 3, 224, 224, device=dev)).argmax(-1)


# ---- moe ----------------------------------------------------------------------

class MoE(nn.Module):
    def __init__(self, w, experts=8, k=2):
        super().__init__()
        self.router = nn.Linear(w, experts, bias=False)
        self.w1 = nn.ModuleList(nn.Linear(w, 4 * w) for _ in range(experts))
        self.w2 = nn.ModuleList(nn.Linear(4 * w, w) for _ in range(experts))
        self.k = k

    def forward(self, x):
        b, t, c = x.shape
        flat = x.reshape(-1, c)
        gates = F.softmax(self.router(flat).float(), -1)
        wts, sel = gates.topk(self.k, -1)
        wts = wts / wts.sum(-1, keepdim=True)
        out = torch.zeros(flat.shape, device=x.device, dtype=torch.float32)
        for e in range(len(self.w1)):
            tok, slot = (sel == e).nonzero(as_tuple=True)
            if tok.numel() == 0:
                continue
            y = self.w2[e](F.gelu(self.w1[e](flat[tok])))
            out.index_add_(0, tok, y.float() * wts[tok, slot, None])
        return out.view(b, t, c)


class MoELayer(nn.Module):
    def __init__(self, w, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(w), nn.LayerNorm(w)
        self.qkv, self.proj = nn.Linear(w, 3 * w), nn.Linear(w, w)
        self.moe = MoE(w)
        self.heads = heads

    def forward(self, x):
        x = x + attend(self.ln1(x), self.qkv, self.proj, self.heads, None)[0]
        return x + self.moe(self.ln2(x))


class MoELM(nn.Module):
    def __init__(self, vocab=32000, w=768, layers=6, heads=12, ctx=1024):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, w), nn.Embedding(ctx, w)
        self.layers = nn.ModuleList(MoELayer(w, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(w), nn.Linear(w, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for layer in self.layers:
            x = layer(x)
        return self.head(self.ln(x))


def moe(dev, steps):
    model = MoELM().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for _ in range(steps):
        batch = random.choice([4, 8, 16])
        seq = random.choice([256, 512, 768, 1024])
        idx = torch.randint(0, 32000, (batch, seq + 1), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), idx[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del idx, logits, loss


# ---- beam ---------------------------------------------------------------------

def beam(dev, steps):
    model = Decoder(layers=6).to(dev).to(torch.bfloat16).eval()
    with torch.no_grad():
        for _ in range(steps):
            batch = random.choice([1, 2, 4, 8])
            beams = random.choice([2, 4, 8])
            prompt = random.choice([64, 256, 512, 1024])
            idx = torch.randint(0, 32000, (batch, prompt), device=dev)
            logits, caches = model(idx, 0, None)
            caches = [(k.repeat_interleave(beams, 0), v.repeat_interleave(beams, 0)) for k, v in caches]
            scores, tok = F.log_softmax(logits[:, -1].float(), -1).topk(beams, -1)
            scores, tok = scores.reshape(-1), tok.reshape(-1, 1)
            seqs = tok
            base = torch.arange(batch, device=dev)[:, None] * beams
            pos = prompt
            for _ in range(random.randint(16, 96)):
                logits, caches = model(tok, pos, caches)
                pos += 1
                logp = F.log_softmax(logits[:, -1].float(), -1) + scores[:, None]
                vocab = logp.shape[-1]
                top, flat = logp.view(batch, -1).topk(beams, -1)
                src = (flat // vocab + base).reshape(-1)
                tok, scores = (flat % vocab).reshape(-1, 1), top.reshape(-1)
                caches = [(k.index_select(0, src), v.index_select(0, src)) for k, v in caches]
                seqs = torch.cat([seqs.index_select(0, src), tok], 1)
            del idx, logits, caches, seqs, scores, tok, base


# ---- prefetch -----------------------------------------------------------------

def prefetch(dev, steps):
    model = ResNet().to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sides = [128, 160, 192]
    host = {s: torch.randint(0, 256, (256, s, s, 3), dtype=torch.uint8).pin_memory() for s in sides}
    mean = torch.tensor([0.485, 0.456, 0.406], device=dev)[None, :, None, None] * 255
    std = torch.tensor([0.229, 0.224, 0.225], device=dev)[None, :, None, None] * 255
    copy = torch.cuda.Stream()
    train = torch.cuda.current_stream()
    copy.wait_stream(train)  # mean and std are made on the training stream

    def load():
        batch, side = random.choice([64, 128, 192, 256]), random.choice(sides)
        with torch.cuda.stream(copy):
            raw = host[side][:batch].to(dev, non_blocking=True)
            x = raw.permute(0, 3, 1, 2).float().sub_(mean).div_(std)
            if random.random() < 0.5:
                x = x.flip(3)
            x = x.contiguous(memory_format=torch.channels_last)
            y = torch.randint(0, 1000, (batch,), device=dev)
            del raw
        return x, y

    nxt = load()
    for _ in range(steps):
        train.wait_stream(copy)
        x, y = nxt
        x.record_stream(train)
        y.record_stream(train)
        nxt = load()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, y, loss


WORKLOADS = {"unet": (unet, 40), "kvserve": (kvserve, 12), "cnn": (cnn, 40), "vit": (vit, 24),
             "moe": (moe, 30), "beam": (beam, 8), "prefetch": (prefetch, 40)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=sorted(WORKLOADS))
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=0, help="0: the workload's default")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    random.seed(a.seed)
    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    fn, steps = WORKLOADS[a.workload]
    torch.cuda.memory._record_memory_history(enabled="all", context=None, max_entries=2_000_000)
    fn(dev, a.steps or steps)
    torch.cuda.synchronize()
    torch.cuda.memory._dump_snapshot(a.out)
    torch.cuda.memory._record_memory_history(enabled=None)
    print("workload", a.workload, "torch", torch.__version__, "device", torch.cuda.get_device_name(),
          "steps", a.steps or steps, "seed", a.seed,
          "peak_allocated", torch.cuda.max_memory_allocated(),
          "peak_reserved", torch.cuda.max_memory_reserved(), "snapshot", a.out)


if __name__ == "__main__":
    main()
