#!/usr/bin/env python3
"""PyTorch-on-GPU anchor of bench_gpu: the same shapes, medians and figures, on the same GPU.

peak:  the GPU's bf16 matrix-product rate, measured (8192^3, bf16 in, bf16 out): the MFU
       denominator of the run (docs/gpu.md).
ops:   4096^3 products (f32 with TF32 off, as braid's exact path, and bf16); causal
       scaled_dot_product_attention forward and backward on 4 x 2048 tokens of the 1B
       model's heads (32 / 4 of 64) in bf16.
train: the bench config (bench/model/shapes.hpp) trained the way a PyTorch user would write
       it: f32 parameters, bf16 autocast, fused AdamW, SDPA (flash) attention, cross-entropy
       over the logits; tokens/s, model TFLOP/s (the same FLOP count as bench_gpu) and the
       peak memory.
score: a reference model's forward with the log-probabilities of the next tokens and a
       critic's forward with a value head, in bf16 autocast under no_grad.
    python3 bench/gpu/torch_gpu.py [--part peak,ops,train,score] [--config 1b] [--batch 4]
                                   [--seq 2048] [--repeats 10] [--steps 5] [--json]
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F

CONFIGS = {  # bench/model/shapes.hpp
    "tiny": dict(hidden=128, layers=4, heads=4, kv_heads=2, inter=384, vocab=1024),
    "100m": dict(hidden=768, layers=12, heads=12, kv_heads=4, inter=2048, vocab=32000),
    "1b": dict(hidden=2048, layers=22, heads=32, kv_heads=4, inter=5632, vocab=32000),
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


JSON = False


def report(part, what, shape, seconds, rate, unit, **extra):
    print(f"{'torch ' + what:<30} {shape:<30} {seconds * 1e3:10.3f} ms {rate:12.2f} {unit}", flush=True)
    if JSON:
        fig = dict(engine="torch", part=part, measure=what, shape=shape, ms=round(seconds * 1e3, 4), **extra)
        if unit == "TFLOP/s":
            fig.setdefault("tflops", round(rate, 2))
        print(json.dumps(fig), flush=True)


def forward_flop_per_token(c, seq, lm_head):
    """bench_gpu's count: 2 N over the products (LM head or the value head) + causal attention."""
    D, I, L, H, KV = c["hidden"], c["inter"], c["layers"], c["heads"], c["kv_heads"]
    hd = D // H
    layer = D * (H + 2 * KV) * hd + H * hd * D + 3 * D * I
    head = c["vocab"] * D if lm_head else D
    return 2 * (L * layer + head) + 2 * L * H * hd * (seq + 1)


def sdpa_gqa():
    """SDPA with grouped kv heads on the flash kernel where this torch has it (enable_gqa),
    else with the kv heads repeated (flash takes equal head counts)."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        q = torch.randn(1, 4, 128, 64, device="cuda", dtype=torch.bfloat16)
        kv = torch.randn(1, 2, 128, 64, device="cuda", dtype=torch.bfloat16)
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            F.scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=True)
        return "enable_gqa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    except Exception:  # noqa: BLE001 - any refusal means: repeat the kv heads
        def repeated(q, k, v):
            g = q.shape[1] // k.shape[1]
            return F.scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), is_causal=True)
        return "kv heads repeated", repeated


class Llama(torch.nn.Module):
    def __init__(self, c, max_pos, lm_head=True, value_head=False, theta=10000.0, eps=1e-5):
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
        self.lm_head = torch.nn.Linear(D, V, bias=False) if lm_head else None
        self.score = torch.nn.Linear(D, 1, bias=False) if value_head else None
        for p in self.parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)
        inv = 1.0 / theta ** (torch.arange(0, self.hd, 2, dtype=torch.float32) / self.hd)
        f = torch.arange(max_pos, dtype=torch.float32)[:, None] * inv[None]
        emb = torch.cat((f, f), -1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)
        self.attend = sdpa_gqa()[1]

    def rms(self, x, w):
        if hasattr(F, "rms_norm"):
            return F.rms_norm(x, (x.shape[-1],), w, self.eps)
        return w * (x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)

    def rope(self, x, T):
        cos, sin = self.cos[:T].to(x.dtype), self.sin[:T].to(x.dtype)
        half = self.hd // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin

    def hidden(self, tokens):
        B, T = tokens.shape
        h = self.embed(tokens)
        for l in self.layers:
            q, k, v = l.qkv(self.rms(h, l.ln1)).split([self.H * self.hd, self.KV * self.hd, self.KV * self.hd], -1)
            q = self.rope(q.view(B, T, self.H, self.hd).transpose(1, 2), T)
            k = self.rope(k.view(B, T, self.KV, self.hd).transpose(1, 2), T)
            v = v.view(B, T, self.KV, self.hd).transpose(1, 2)
            a = self.attend(q, k, v)
            h = h + l.o(a.transpose(1, 2).reshape(B, T, self.H * self.hd))
            g, u = l.gate_up(self.rms(h, l.ln2)).chunk(2, -1)
            h = h + l.down(F.silu(g) * u)
        return self.rms(h, self.norm)

    def forward(self, tokens):
        return self.lm_head(self.hidden(tokens))


def part_peak(o, dev):
    n = 8192
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    w = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    s = median_seconds(max(o.repeats, 20), lambda: a @ w)
    report("peak", "matmul peak bf16", "8192x8192x8192", s, 2 * n**3 / s / 1e12, "TFLOP/s")


def part_ops(o, dev):
    n = 4096
    for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        a = torch.randn(n, n, device=dev, dtype=dtype)
        w = torch.randn(n, n, device=dev, dtype=dtype)
        s = median_seconds(o.repeats, lambda: a @ w.t())
        report("ops", f"gemm {name}", "4096x4096x4096 NT", s, 2 * n**3 / s / 1e12, "TFLOP/s")
    seqs, T, H, KV, hd = 4, 2048, 32, 4, 64
    flop = 4.0 * T * T / 2 * hd * H * seqs
    how, attend = sdpa_gqa()
    q = torch.randn(seqs, H, T, hd, device=dev, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(seqs, KV, T, hd, device=dev, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(seqs, KV, T, hd, device=dev, dtype=torch.bfloat16, requires_grad=True)
    shape = f"{seqs}x{T} h{H}/{KV} d{hd}"
    with torch.no_grad():
        s = median_seconds(o.repeats, lambda: attend(q, k, v))
    report("ops", f"attention forward bf16 ({how})", shape, s, flop / s / 1e12, "TFLOP/s")
    out = attend(q, k, v)
    g = torch.randn_like(out)
    s = median_seconds(o.repeats, lambda: torch.autograd.grad(out, (q, k, v), g, retain_graph=True))
    report("ops", f"attention backward bf16 ({how})", shape, s, 2.5 * flop / s / 1e12, "TFLOP/s")


def part_train(o, dev):
    c = CONFIGS[o.config]
    tokens = torch.randint(0, c["vocab"], (o.batch, o.seq), device=dev)
    m = Llama(c, o.seq).to(dev)
    nparams = sum(p.numel() for p in m.parameters())
    opt = torch.optim.AdamW(m.parameters(), lr=1e-5, weight_decay=0.1, fused=True)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = m(tokens)[:, :-1]
        loss = F.cross_entropy(logits.float().reshape(-1, c["vocab"]), tokens[:, 1:].reshape(-1))
        loss.backward()
        opt.step()

    torch.cuda.reset_peak_memory_stats()
    s = median_seconds(o.steps, step)
    n = o.batch * o.seq
    fpt = 3 * forward_flop_per_token(c, o.seq, True)
    peak = torch.cuda.max_memory_allocated() / 2**20
    shape = f"{o.config} bf16 autocast b{o.batch}xT{o.seq} ({nparams / 1e6:.0f}M)"
    report("train", "train step", shape, s, n / s, "tokens/s", tokens_per_s=round(n / s, 1),
           tflops=round(fpt * n / s / 1e12, 2), flop_per_token=fpt, peak_mib=round(peak))
    print(f"torch peak memory {peak:.0f} MiB; attention: {sdpa_gqa()[0]}", flush=True)
    del m, opt
    torch.cuda.empty_cache()


def part_score(o, dev):
    c = CONFIGS[o.config]
    tokens = torch.randint(0, c["vocab"], (o.batch, o.seq), device=dev)
    ref = Llama(c, o.seq).to(dev).eval()
    critic = Llama(c, o.seq, lm_head=False, value_head=True).to(dev).eval()

    @torch.no_grad()
    def passes():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = ref(tokens)[:, :-1]
            logprobs = torch.log_softmax(logits.float(), -1).gather(-1, tokens[:, 1:, None])
            values = critic.score(critic.hidden(tokens)).float()
        return logprobs, values

    torch.cuda.reset_peak_memory_stats()
    s = median_seconds(o.steps, passes)
    n = o.batch * o.seq
    fpt = forward_flop_per_token(c, o.seq, True) + forward_flop_per_token(c, o.seq, False)
    peak = torch.cuda.max_memory_allocated() / 2**20
    report("score", "score reference + critic", f"{o.config} bf16 autocast b{o.batch}xT{o.seq}", s, n / s, "tokens/s",
           tokens_per_s=round(n / s, 1), tflops=round(fpt * n / s / 1e12, 2), flop_per_token=fpt, peak_mib=round(peak))
    del ref, critic
    torch.cuda.empty_cache()


def main():
    global JSON
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", default="peak,ops,train,score", help="comma-separated: peak, ops, train, score")
    ap.add_argument("--config", default="1b", choices=sorted(CONFIGS))
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="also print each figure as one JSON object")
    o = ap.parse_args()
    JSON = o.json
    parts = o.part.split(",")
    unknown = set(parts) - {"peak", "ops", "train", "score"}
    if unknown:
        ap.error(f"--part: unknown {sorted(unknown)}")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    torch.manual_seed(1)
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name()}: {', '.join(parts)}", flush=True)
    for p in parts:
        {"peak": part_peak, "ops": part_ops, "train": part_train, "score": part_score}[p](o, dev)


if __name__ == "__main__":
    main()
