#!/usr/bin/python3
"""PyTorch-on-CPU counterpart of bench_model: the same Llama shapes (bench/model/shapes.hpp),
the same threads and the same measurements (training step = forward + next-token
logprobs + backward + AdamW; prefill; decode at given batch sizes), in float32.

The model is written in plain torch ops the way a PyTorch user would (nn.Linear layers,
softmax(q·kᵀ)·v attention, a preallocated KV cache, torch.optim.AdamW), so the
comparison is against idiomatic eager PyTorch. Run with Debian's python3-torch:
    /usr/bin/python3 bench/model/torch_bench.py --config tiny --threads 2 [--json]
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn.functional as F

CONFIGS = {
    "tiny": dict(hidden=128, layers=4, heads=4, kv_heads=2, inter=384, vocab=1024),
    "100m": dict(hidden=768, layers=12, heads=12, kv_heads=4, inter=2048, vocab=32000),
}


class Llama(torch.nn.Module):
    def __init__(self, c, max_pos=1024, theta=10000.0, eps=1e-5):
        super().__init__()
        D, H, KV, I, V = c["hidden"], c["heads"], c["kv_heads"], c["inter"], c["vocab"]
        self.H, self.KV, self.hd, self.eps = H, KV, D // H, eps
        self.embed = torch.nn.Embedding(V, D)
        self.layers = torch.nn.ModuleList()
        for _ in range(c["layers"]):
            l = torch.nn.Module()
            l.ln1 = torch.nn.Parameter(torch.ones(D))
            l.q = torch.nn.Linear(D, H * self.hd, bias=False)
            l.k = torch.nn.Linear(D, KV * self.hd, bias=False)
            l.v = torch.nn.Linear(D, KV * self.hd, bias=False)
            l.o = torch.nn.Linear(H * self.hd, D, bias=False)
            l.ln2 = torch.nn.Parameter(torch.ones(D))
            l.gate = torch.nn.Linear(D, I, bias=False)
            l.up = torch.nn.Linear(D, I, bias=False)
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
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    def rope(self, x, pos):  # x [B, h, T, hd], pos [T]
        cos, sin = self.cos[pos], self.sin[pos]
        half = self.hd // 2
        rot = torch.cat((-x[..., half:], x[..., :half]), -1)
        return x * cos + rot * sin

    def forward(self, tokens, cache=None, start=0):
        """tokens [B, T]; with cache (list of (k, v) [B, KV, max, hd]) appends at `start`."""
        B, T = tokens.shape
        pos = torch.arange(start, start + T)
        h = self.embed(tokens)
        rep = self.H // self.KV
        for i, l in enumerate(self.layers):
            x = self.rms(h, l.ln1)
            q = self.rope(l.q(x).view(B, T, self.H, self.hd).transpose(1, 2), pos)
            k = self.rope(l.k(x).view(B, T, self.KV, self.hd).transpose(1, 2), pos)
            v = l.v(x).view(B, T, self.KV, self.hd).transpose(1, 2)
            if cache is not None:
                ck, cv = cache[i]
                ck[:, :, start:start + T] = k
                cv[:, :, start:start + T] = v
                k, v = ck[:, :, :start + T], cv[:, :, :start + T]
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
            # torch 1.13 (Debian) has no scaled_dot_product_attention: the classic form.
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hd))
            if T > 1:
                mask = torch.ones(T, start + T, dtype=torch.bool).tril(start)
                att = att.masked_fill(~mask, float("-inf"))
            a = torch.softmax(att, dim=-1) @ v
            h = h + l.o(a.transpose(1, 2).reshape(B, T, self.H * self.hd))
            x = self.rms(h, l.ln2)
            h = h + l.down(F.silu(l.gate(x)) * l.up(x))
        return self.rms(h, self.norm)

    def new_cache(self, B, max_len):
        return [(torch.zeros(B, self.KV, max_len, self.hd), torch.zeros(B, self.KV, max_len, self.hd))
                for _ in self.layers]


def measure(repeats, tokens, fn):
    fn()
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        rates.append(tokens / (time.perf_counter() - t0))
    return statistics.mean(rates), (statistics.stdev(rates) if len(rates) > 1 else 0.0)


def measure_timed(repeats, tokens, fn):
    """fn times its own measured part and returns the seconds."""
    fn()
    rates = [tokens / fn() for _ in range(repeats)]
    return statistics.mean(rates), (statistics.stdev(rates) if len(rates) > 1 else 0.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="tiny", choices=sorted(CONFIGS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--train-batch", type=int, default=4)
    ap.add_argument("--train-len", type=int, default=128)
    ap.add_argument("--prefill-batch", type=int, default=4)
    ap.add_argument("--prefill-len", type=int, default=128)
    ap.add_argument("--decode-batches", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--decode-context", type=int, default=64)
    ap.add_argument("--decode-steps", type=int, default=16)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--label", default="pytorch", help="engine name in the output (e.g. to tell run settings apart)")
    o = ap.parse_args()
    torch.set_num_threads(o.threads)
    torch.manual_seed(1)
    c = CONFIGS[o.config]
    m = Llama(c)
    V = c["vocab"]

    def report(what, shape, stat):
        mean, sd = stat
        if o.json:
            print(json.dumps({"engine": o.label, "config": o.config, "threads": o.threads, "measure": what,
                              "shape": shape, "tokens_per_s": round(mean, 2), "sd": round(sd, 2)}), flush=True)
        else:
            print(f"{o.label}  {o.config:5} {o.threads:>2} threads  {what:8} {shape:14} {mean:10.1f} ± {sd:.1f} tokens/s",
                  flush=True)

    if not o.json:
        n = sum(p.numel() for p in m.parameters())
        print(f"# {o.config} config: {n} parameters, {torch.get_num_threads()} threads, torch {torch.__version__}")

    # training step
    B, T = o.train_batch, o.train_len
    tokens = torch.randint(0, V, (B, T))
    opt = torch.optim.AdamW(m.parameters(), lr=1e-5, weight_decay=0.1)

    def train_step():
        opt.zero_grad(set_to_none=True)
        h = m(tokens)
        logits = m.lm_head(h[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V), tokens[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()

    report("train", f"b{B}xT{T}", measure(o.repeats, B * T, train_step))

    with torch.inference_mode():
        Bp, Tp = o.prefill_batch, o.prefill_len
        prompts = torch.randint(0, V, (Bp, Tp))
        cache = m.new_cache(Bp, Tp)

        def prefill():
            h = m(prompts, cache, 0)
            return m.lm_head(h[:, -1])

        report("prefill", f"pp{Tp}xb{Bp}", measure(o.repeats, Bp * Tp, prefill))

        for b in o.decode_batches:
            ctx, steps = o.decode_context, o.decode_steps
            prompt = torch.randint(0, V, (b, ctx))
            cache = m.new_cache(b, ctx + steps)

            def run():  # only the decode steps are timed, as in bench_model
                logits = m.lm_head(m(prompt, cache, 0)[:, -1])
                t0 = time.perf_counter()
                for t in range(steps):
                    nxt = logits.argmax(-1, keepdim=True)
                    logits = m.lm_head(m(nxt, cache, ctx + t)[:, -1])
                return time.perf_counter() - t0

            report("decode", f"tg{steps}@ctx{ctx}xb{b}", measure_timed(o.repeats, b * steps, run))

if __name__ == "__main__":
    main()
