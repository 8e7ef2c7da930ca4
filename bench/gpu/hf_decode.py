#!/usr/bin/env python3
"""Hugging Face transformers' generate on the shapes of bench_gpu_decode (docs/gpu.md).

The same ~1B Llama (hidden 2048, 16 layers, 32 heads / 8 kv heads, MLP 8192, vocabulary
32000), random weights in bf16, a static KV cache (cache_implementation="static"), greedy,
min_new_tokens = max_new_tokens so that no row stops early. For each batch B: generate with
1 new token and with --steps + 1 new tokens (after a warm-up of each); the difference is
--steps decode steps: tokens/s = B * steps / difference. Effective bandwidth as braid's:
(every weight but the embedding table + B sequences x mean context of keys and values, bf16)
/ step time.

    python3 bench/gpu/hf_decode.py [--batches 1,64,256] [--prompt 512] [--steps 128] [--compile]
"""
import argparse
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="1,64,256")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--compile", action="store_true", help="torch.compile the forward (slow to start)")
    args = ap.parse_args()
    try:
        import torch
        import transformers
        from transformers import LlamaConfig, LlamaForCausalLM
    except Exception as e:  # noqa: BLE001
        print(f"hf_decode: transformers or torch not importable: {e}")
        return 1
    if not torch.cuda.is_available():
        print("hf_decode: no CUDA device")
        return 1
    print(f"hf_decode: torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{torch.cuda.get_device_name()}")
    cfg = LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                      num_key_value_heads=8, vocab_size=32000, max_position_embeddings=4096, rms_norm_eps=1e-5,
                      rope_theta=10000.0, tie_word_embeddings=False)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    if args.compile:
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    params = sum(p.numel() for p in model.parameters())
    weights = (params - cfg.vocab_size * cfg.hidden_size) * 2
    kv_per_token = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * (cfg.hidden_size // cfg.num_attention_heads) * 2
    print(f"hf_decode: {params / 1e9:.2f} B parameters, bf16")

    def run(batch, new):
        ids = torch.randint(0, cfg.vocab_size, (batch, args.prompt), device="cuda")
        mask = torch.ones_like(ids)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad():
            model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new, min_new_tokens=new,
                           do_sample=False, cache_implementation="static", pad_token_id=0)
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    for batch in [int(b) for b in args.batches.split(",")]:
        try:
            run(batch, 2)
            run(batch, args.steps + 1)
            one = min(run(batch, 1) for _ in range(2))
            many = run(batch, args.steps + 1)
        except Exception as e:  # noqa: BLE001
            print(f"hf_decode b{batch}: failed: {e}")
            sys.stdout.flush()
            continue
        step = max(many - one, 1e-9) / args.steps
        mean_ctx = args.prompt + 1 + args.steps / 2
        bw = (weights + batch * mean_ctx * kv_per_token) / step
        print(f"hf_decode b{batch} ctx {args.prompt}: step {step * 1e3:.3f} ms, {batch / step:.0f} tok/s, "
              f"{bw / 1e9:.0f} GB/s effective (generate of {args.steps + 1} tokens {many:.2f} s, of 1 {one:.2f} s)")
        sys.stdout.flush()
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
