#!/usr/bin/env python3
"""The training and scoring figures of one bench/gpu/run.sh train part, as a Markdown table.

Reads the JSON objects bench_gpu --json and torch_gpu.py --json printed into LOG (one per
line) and prints, for the training step and the scoring passes, braid beside PyTorch:
tokens/s, model TFLOP/s, MFU against the bf16 matmul rate measured in the same run (torch's
8192^3 bf16 product; the nominal 780 TFLOP/s, marked so, when it is missing) and peak memory,
then the issue's floor: braid's training MFU >= 40% and braid's tokens/s >= PyTorch's.
    python3 bench/gpu/summary.py LOG > summary.md
Exit status: 0 when the table could be made (the floor's verdict is in it), 1 when a figure
is missing.
"""
import json
import sys

NOMINAL_PEAK = 780.0  # TFLOP/s: torch's bf16 matmul on an H200, as the device notes give it


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: summary.py LOG")
    figs = []
    with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    figs.append(json.loads(line))
                except json.JSONDecodeError:
                    pass

    def find(engine, part):
        for fig in figs:
            if fig.get("engine") == engine and fig.get("part") == part:
                return fig
        return None

    peak_fig = find("torch", "peak")
    peak = peak_fig["tflops"] if peak_fig else NOMINAL_PEAK
    print(f"bf16 matmul rate (MFU denominator): {peak:.1f} TFLOP/s"
          + (" measured by torch in this run" if peak_fig else " NOMINAL: torch's measurement is missing"))
    print()
    print("| part | engine | tokens/s | model TFLOP/s | MFU | peak MiB | ms |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    missing = []
    for part in ("train", "score"):
        for engine in ("braid", "torch"):
            fig = find(engine, part)
            if not fig:
                missing.append(f"{engine} {part}")
                print(f"| {part} | {engine} | missing | | | | |")
                continue
            mfu = fig.get("tflops", 0) / peak
            print(f"| {part} | {engine} | {fig.get('tokens_per_s', 0):.0f} | {fig.get('tflops', 0):.1f} | "
                  f"{100 * mfu:.1f}% | {fig.get('peak_mib', 0):.0f} | {fig.get('ms', 0):.1f} |")
    print()
    braid, torch = find("braid", "train"), find("torch", "train")
    if braid and torch:
        mfu = braid["tflops"] / peak
        ratio = braid["tokens_per_s"] / torch["tokens_per_s"]
        print(f"floor (training): MFU {100 * mfu:.1f}% {'>=' if mfu >= 0.4 else '<'} 40%: "
              f"{'met' if mfu >= 0.4 else 'NOT met'}; tokens/s {ratio:.2f}x PyTorch's: "
              f"{'met' if ratio >= 1 else 'NOT met'}")
    bs, ts = find("braid", "score"), find("torch", "score")
    if bs and ts:
        print(f"scoring: braid {bs['tokens_per_s'] / ts['tokens_per_s']:.2f}x PyTorch's tokens/s")
    if missing:
        print(f"\nmissing: {', '.join(missing)} (see train.log)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
