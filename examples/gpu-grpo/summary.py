#!/usr/bin/env python3
"""The figures of a braid run with the ablation every iteration (examples/gpu-grpo/run.sh):
per iteration and way (fused: as the run ran it; serial: the ablation's re-run), the
iteration's wall time, each stage's share of it, and tokens per second; then the medians
over the iterations after the first (the warm-up) and serial / fused.

    python3 examples/gpu-grpo/summary.py OUT/grpo

Figures (docs/tools/run.md, "The report"): total = the rollout step + the training step as
braid run ran them (process start, model loads and files included); generate, score, train =
each tool's wall_seconds as a share of the total (a piped rollout's score starts with the
generation and waits for its shards, so the two overlap; a fused rollout's generate holds
its scoring); other = what the steps took beyond their tools (start-up, loads, files);
gen tok/s = response tokens / actor_gen seconds (the slowest rank's generation); train tok/s
= tokens trained / actor_train seconds; iter tok/s = the iteration's tokens / total.
"""
import json
import statistics
import sys
from pathlib import Path


def load(path):
    with open(path) as f:
        return json.load(f)


def way_figures(variant, folder):
    m = variant["measured"]
    gen = load(folder / "generate.stats.json")
    train = load(folder / "train.stats.json")
    total = m["total"]
    rollout = m.get("rollout_step", max(m["generate"], m.get("score", 0)))
    tools_rollout = max(m["generate"], m.get("score", 0))
    call = gen["calls"]["actor_gen"]
    actor_train = train["calls"]["actor_train"]
    return {
        "total": total,
        "rollout": rollout,
        "train_step": m.get("train_step", m["train"]),
        "generate": m["generate"] / total,
        "score": m["score"] / total if "score" in m else None,
        "train": m["train"] / total,
        "other": max(0.0, total - tools_rollout - m["train"]) / total,
        "gen_tps": call["response_tokens"] / call["seconds"] if call["seconds"] > 0 else float("nan"),
        "train_tps": actor_train["tokens"] / actor_train["seconds"] if actor_train["seconds"] > 0 else float("nan"),
        "iter_tps": gen["tokens"] / total if total > 0 else float("nan"),
    }


def pct(x):
    return "     -" if x is None else f"{100 * x:5.1f}%"


def row(label, name, f):
    return (f"{label:>4} {name:<12} {f['total']:8.2f} {f['rollout']:9.2f} {f['train_step']:8.2f} "
            f"{pct(f['generate']):>8} {pct(f['score'])} {pct(f['train'])} {pct(f['other'])} "
            f"{f['gen_tps']:10.0f} {f['train_tps']:11.0f} {f['iter_tps']:10.0f}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: summary.py RUN_FOLDER")
    run = Path(sys.argv[1])
    report = load(run / "report.json")
    runfile = load(report["run"])
    rows, lines = {}, []
    for ab in report.get("ablation", []):
        i = ab["iteration"]
        # The run's own way is the fused one when it fuses; the other way is the re-run's.
        own_fused = bool(ab["settings"].get("fuse") or ab["settings"].get("train_schedule"))
        for v in ab["variants"]:
            own = bool(v["fusions"]) == own_fused
            f = way_figures(v, run / f"iter-{i:04d}" if own else run / ab["settings"]["rerun"])
            rows.setdefault(v["name"], []).append((i, f))
            lines.append(row(str(i), v["name"], f))
    if not rows:
        sys.exit(f"summary.py: {run}/report.json holds no ablation yet ({len(report['iterations'])} iterations done)")
    lengths = [r["mean_response_length"] for r in report["iterations"] if r.get("mean_response_length") is not None]
    print(f"{report['algorithm']} on {runfile.get('device', 'cpu')} ({runfile.get('dtype', 'f32')}), "
          f"{len(report['iterations'])} of {report['iterations_planned']} iterations; mean response length "
          f"{statistics.mean(lengths):.1f} tokens")
    print(f"{'iter':>4} {'way':<12} {'total s':>8} {'rollout s':>9} {'train s':>8} {'generate':>8} {'score':>6} "
          f"{'train':>6} {'other':>6} {'gen tok/s':>10} {'train tok/s':>11} {'iter tok/s':>10}")
    print("\n".join(lines))
    print("median over the iterations after the first:")
    medians = {}
    for name, rs in rows.items():
        later = [f for i, f in rs if i > 1] or [f for _, f in rs]
        medians[name] = {k: None if later[0][k] is None else statistics.median([f[k] for f in later]) for k in later[0]}
        print(row("", name, medians[name]))
    fused = [n for n in medians if n != "serial"]
    if fused and "serial" in medians:
        print(f"serial / {fused[0]}: {medians['serial']['total'] / medians[fused[0]]['total']:.3f} "
              f"(iteration time; above 1: fusion pays)")


if __name__ == "__main__":
    main()
