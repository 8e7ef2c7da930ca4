#!/usr/bin/env python3
"""braid against transformers itself, for every model family braid runs (docs/models.md),
on a machine that has transformers and torch (the GPU machine: bench/gpu/run.sh families).

For each family: a tiny config with the family's quirks on (biases, q/k norms, head_dim
apart from hidden / heads, rope scaling, sliding windows shorter than the sequences, Gemma's
soft-caps), the model made by AutoModelForCausalLM.from_config (eager attention, float32),
its weights randomised, save_pretrained; then

  import   `braid import` of the folder, braid's logits (tests/model_outputs) against
           transformers' on the same token sequences: max |braid - hf| / max |hf|
  export   `braid export` of the imported checkpoint loaded back by transformers
           (from_pretrained): its logits against the original model's (max |diff|)
  reward   the same for <Family>ForSequenceClassification (the score at the last token)
  value    and <Family>ForTokenClassification (a score per token; none for gemma3)

Prints a table and exits 1 when a figure is past its bound (import 1e-4 relative: braid's
f32 against transformers' f32, RoPE tables from double here and float there; export 1e-6:
the same weights through another file).

    python3 bench/gpu/hf_families.py --braid BUILD/bin/braid --outputs BUILD/tests/model_outputs \
        [--device cpu|cuda] [--work DIR]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import torch
import transformers
from safetensors.torch import load_file
from transformers import (AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification,
                          AutoModelForTokenClassification)

SHAPE = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=101, max_position_embeddings=128, rms_norm_eps=1e-5)

# model_type -> (config keys, token classification exists)
FAMILIES = {
    "llama": (dict(attention_bias=True, mlp_bias=True, tie_word_embeddings=False, rope_theta=500000.0,
                   rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 32}), True),
    "mistral": (dict(sliding_window=8, head_dim=24, tie_word_embeddings=False, rope_theta=10000.0), True),
    "qwen2": (dict(use_sliding_window=True, sliding_window=8, max_window_layers=1, tie_word_embeddings=True,
                   rope_theta=1000000.0,
                   rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}), True),
    "qwen3": (dict(head_dim=24, attention_bias=True, tie_word_embeddings=True, rope_theta=1000000.0,
                   rope_scaling={"rope_type": "linear", "factor": 2.0}), True),
    "gemma2": (dict(head_dim=24, query_pre_attn_scalar=24, attn_logit_softcapping=5.0,
                    final_logit_softcapping=5.0, sliding_window=8, hidden_activation="gelu_pytorch_tanh"), True),
    "gemma3_text": (dict(head_dim=24, query_pre_attn_scalar=24, final_logit_softcapping=5.0, sliding_window=8,
                         # the pattern (transformers < 4.53) and the layer_types it means (later ones)
                         sliding_window_pattern=2,
                         layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                         rope_theta=1000000.0, rope_local_base_freq=10000.0,
                         rope_scaling={"rope_type": "linear", "factor": 8.0},
                         hidden_activation="gelu_pytorch_tanh"), False),
}
SEQS = [[5, 17, 30, 3, 3, 21, 11, 8, 26, 40, 99, 7, 64, 2, 2, 50, 33, 12, 9, 1],
        [1, 0, 31, 28, 9, 14, 77, 88, 5, 60, 61, 3]]


def make_config(model_type, keys, **extra):
    kw = dict(SHAPE, **keys, **extra)
    try:
        return AutoConfig.for_model(model_type, **kw)
    except (TypeError, ValueError):
        # A transformers that no longer takes gemma3's pattern: layer_types says it.
        kw.pop("sliding_window_pattern", None)
        return AutoConfig.for_model(model_type, **kw)


def randomise(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g) * (0.15 if p.dim() >= 2 else 0.1)
            if p.dim() >= 2:
                p.copy_(noise)
            else:
                p.add_(noise)  # norms about their init (1, or Gemma's 0), biases about 0


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()[-2000:]}")
    return r.stdout


def braid_outputs(args, folder, work, name):
    ck = os.path.join(work, name + ".h5")
    run([args.braid, "-q", "import", folder, "-o", ck])
    out = os.path.join(work, name + ".outputs.safetensors")
    run([args.outputs, ck, ";".join(",".join(map(str, s)) for s in SEQS), out, args.device])
    return ck, load_file(out)


def rel(a, b):
    return ((a - b).abs().max() / b.abs().max()).item()


def hf_logits(model):
    with torch.no_grad():
        return torch.cat([model(torch.tensor([s])).logits[0].float() for s in SEQS])


def check_family(args, model_type, keys, token_cls, work):
    row = {}
    cfg = make_config(model_type, keys)
    # float32 without naming it: transformers 4 makes and loads float32 by default, 5 loads
    # the files' dtype (float32 here); torch_dtype= is deprecated in 5, dtype= unknown to early 4.
    kind = dict(attn_implementation="eager")
    lm = AutoModelForCausalLM.from_config(cfg, **kind).eval()
    randomise(lm, 7)
    folder = os.path.join(work, model_type)
    lm.save_pretrained(folder)
    want = hf_logits(lm)
    ck, got = braid_outputs(args, folder, work, model_type)
    row["import"] = rel(got["logits"], want)
    exported = os.path.join(work, model_type + "-export")
    run([args.braid, "-q", "export", ck, "-o", exported])
    back = AutoModelForCausalLM.from_pretrained(exported, **kind).eval()
    assert lm.dtype == back.dtype == torch.float32, (lm.dtype, back.dtype)
    row["export"] = (hf_logits(back) - want).abs().max().item()

    heads = [("reward", AutoModelForSequenceClassification)]
    if token_cls:
        heads.append(("value", AutoModelForTokenClassification))
    for what, auto in heads:
        # A pad id no sequence holds: the sequence classifier scores the last token that is not
        # padding (older transformers: the one before the first pad).
        hcfg = make_config(model_type, keys, num_labels=1, pad_token_id=SHAPE["vocab_size"] - 1)
        try:
            m = auto.from_config(hcfg, **kind).eval()
        except ValueError as e:  # an older transformers without this family's class
            print(f"{model_type}: no {auto.__name__} here ({str(e)[:80]}...)")
            continue
        randomise(m, 11)
        hfolder = os.path.join(work, f"{model_type}-{what}")
        m.save_pretrained(hfolder)
        with torch.no_grad():
            ref = [m(torch.tensor([s])).logits[0].float() for s in SEQS]  # [1] pooled, or [len, 1]
        hck, hout = braid_outputs(args, hfolder, work, f"{model_type}-{what}")
        values = hout["values"]
        if what == "reward":  # the score of each sequence's last token
            ends = [sum(len(s) for s in SEQS[: i + 1]) - 1 for i in range(len(SEQS))]
            got_v, want_v = values[ends], torch.cat([r.reshape(-1) for r in ref])
        else:
            got_v, want_v = values, torch.cat([r[:, 0] for r in ref])
        row[what] = rel(got_v, want_v)
        hexp = os.path.join(work, f"{model_type}-{what}-export")
        run([args.braid, "-q", "export", hck, "-o", hexp])
        back = auto.from_pretrained(hexp, **kind).eval()
        with torch.no_grad():
            again = [back(torch.tensor([s])).logits[0].float() for s in SEQS]
        row[what + " export"] = max((a - r).abs().max().item() for a, r in zip(again, ref))
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--braid", required=True)
    ap.add_argument("--outputs", required=True, help="tests/model_outputs of the same build")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="braid-hf-families-")
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, braid on {args.device}, in {work}")
    bounds = {"import": 1e-4, "export": 1e-6, "reward": 1e-4, "reward export": 1e-6, "value": 1e-4,
              "value export": 1e-6}
    cols = list(bounds)
    print(f"{'family':<12}" + "".join(f"{c:>15}" for c in cols))
    failed = []
    for model_type, (keys, token_cls) in FAMILIES.items():
        try:
            row = check_family(args, model_type, keys, token_cls, work)
        except Exception as e:  # noqa: BLE001 - report and go on with the next family
            print(f"{model_type:<12} FAILED: {e}")
            failed.append(model_type)
            continue
        print(f"{model_type:<12}" + "".join(f"{row[c]:>15.2e}" if c in row else f"{'-':>15}" for c in cols))
        bad = [c for c in row if row[c] > bounds[c]]
        if bad:
            failed.append(f"{model_type} ({', '.join(bad)})")
    print(f"bounds: {bounds}")
    print("failed: " + (", ".join(failed) if failed else "none"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
