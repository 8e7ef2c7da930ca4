#!/usr/bin/env python3
"""PyTorch-on-GPU counterpart of bench_gpu: the same shapes and the same medians, printed in
the same table, so that braid's figures stand beside what plain PyTorch does on the GPU.

gemm: 4096^3 in f32 (TF32 off, as braid) and bf16; attention: 4 x 2048 tokens, 16/8 heads of
128, causal scaled_dot_product_attention forward and backward, f32 and bf16; train step: the
bench config (bench/model/shapes.hpp) at 4 x 512 tokens, forward + cross-entropy + backward
+ AdamW, in f32 and in bf16 autocast with fused AdamW (what a PyTorch user would write).
    python3 bench/gpu/torch_gpu.py [--config 100m] [--repeats 10]
"""
import argparse
import math
import statistics

import torch
import torch.nn.functional as F

CONFIGS = {  # bench/model/shapes.hpp
    "tiny": dict(hidden=128, layers=4, heads=4, kv_heads=2, inter=384, vocab=1024),
    "100m": dict(hidden=768, layers=12, heads=12, kv_heads=4, inter=2048, vocab=32000),
}


def median_seconds(repeats, fn):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def report(what, shape, seconds, rate, unit):
    print(f"{'torch ' + what:<28} {shape:<26} {seconds * 1e3:10.3f} ms {rate:12.2f} {unit}", flush=True)


class Llama(torch.nn.Module):
    def __init__(self, c, max_pos=1024, theta=10000.0, eps=1e-5):
        super().__init__()
        D, H, KV, I, V = c["hidden"], c["heads"], c["kv_heads"], c["inter"], c["vocab"]
        self.H, self.KV, self.hd, self.eps = H, KV, D // H, eps
        self.embed = torch.nn.Embedding(V, D)
        self.layers = torch.nn.ModuleList()
        for _ in range(c["layers"]):
            l = torch.nn.Module()
            l.ln1, l.ln2 = torch.nn.Parameter(torch.ones(D)), torch.nn.Parameter(torch.ones(D))
            l.qkv = torch.nn.Linear(D, (H + 2 * KV) * self.hd, bias=False)
            l.o = torch.nn.Linear(H * self.hd, D, bias=False)
            l.gate_up = torch.nn.Linear(D, 2 * I, bias=False)
            l.down = torch.nn.Linear(I, D, bias=False)
            self.layers.append(l)
        self.norm = torch.nn.Parameter(torch.ones(D))
        self.lm_head = torch.nn.Linear(D, V, bias=False)
        for p in self.parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)
        inv = 1.0 / theta ** (torch.arange(0, self.hd, 2, dtype=torch.float32) / self.hd)
        f = torch.arange(max_pos, dtype=torch.float32)[:, None] * inv[None]
        emb = torch.cat((f, f), -1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def rms(self, x, w):
        return w * (x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)

    def rope(self, x, T):
        cos, sin = self.cos[:T].to(x.dtype), self.sin[:T].to(x.dtype)
        half = self.hd // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin

    def forward(self, tokens):
        B, T = tokens.shape
        h = self.embed(tokens)
        for l in self.layers:
            q, k, v = l.qkv(self.rms(h, l.ln1)).split([self.H * self.hd, self.KV * self.hd, self.KV * self.hd], -1)
            q = self.rope(q.view(B, T, self.H, self.hd).transpose(1, 2), T)
            k = self.rope(k.view(B, T, self.KV, self.hd).transpose(1, 2), T)
            v = v.view(B, T, self.KV, self.hd).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            h = h + l.o(a.transpose(1, 2).reshape(B, T, self.H * self.hd))
            g, u = l.gate_up(self.rms(h, l.ln2)).chunk(2, -1)
            h = h + l.down(F.silu(g) * u)
        return self.lm_head(self.rms(h, self.norm))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="100m", choices=sorted(CONFIGS))
    ap.add_argument("--repeats", type=int, default=10)
    o = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    torch.manual_seed(1)
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name()}, median of {o.repeats} runs", flush=True)

    n = 4096
    for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        a = torch.randn(n, n, device=dev, dtype=dtype)
        w = torch.randn(n, n, device=dev, dtype=dtype)
        s = median_seconds(o.repeats, lambda: a @ w.t())
        report(f"gemm {name}", "4096x4096x4096 NT", s, 2 * n**3 / s / 1e12, "TFLOP/s")

    seqs, T, H, KV, hd = 4, 2048, 16, 8, 128
    flop = 4.0 * T * T / 2 * hd * H * seqs
    for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        q = torch.randn(seqs, H, T, hd, device=dev, dtype=dtype, requires_grad=True)
        k = torch.randn(seqs, KV, T, hd, device=dev, dtype=dtype, requires_grad=True)
        v = torch.randn(seqs, KV, T, hd, device=dev, dtype=dtype, requires_grad=True)
        sdpa = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        shape = f"{seqs}x{T} h{H}/{KV} d{hd}"
        with torch.no_grad():
            s = median_seconds(o.repeats, sdpa)
        report(f"attention fwd {name}", shape, s, flop / s / 1e12, "TFLOP/s")
        out = sdpa()
        g = torch.randn_like(out)
        s = median_seconds(o.repeats, lambda: torch.autograd.grad(out, (q, k, v), g, retain_graph=True))
        report(f"attention bwd {name}", shape, s, 2.5 * flop / s / 1e12, "TFLOP/s")

    c = CONFIGS[o.config]
    B, L = 4, 512
    tokens = torch.randint(0, c["vocab"], (B, L), device=dev)
    for mode in ("f32", "bf16 autocast"):
        m = Llama(c).to(dev)
        nparams = sum(p.numel() for p in m.parameters())
        opt = torch.optim.AdamW(m.parameters(), lr=1e-5, weight_decay=0.1, fused=True)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode != "f32"):
                logits = m(tokens)[:, :-1]
            loss = F.cross_entropy(logits.float().reshape(-1, c["vocab"]), tokens[:, 1:].reshape(-1))
            loss.backward()
            opt.step()

        torch.cuda.reset_peak_memory_stats()
        s = median_seconds(o.repeats, step)
        shape = f"{o.config} b{B}xT{L} ({nparams / 1e6:.0f}M)"
        report(f"train step {mode}", shape, s, B * L / s, "tokens/s")
        report(f"train step {mode} (6ND)", shape, s, 6.0 * nparams * B * L / s / 1e12, "TFLOP/s")
        print(f"torch peak memory {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB", flush=True)
        del m, opt


if __name__ == "__main__":
    main()
