#!/usr/bin/env python3
"""Writes the schedspecs of RLHFuse Table 3 (33B/13B at PP 8/4 and 8/8, 65B/33B at
PP 16/8 and 16/16, three global batch sizes each) from the model shapes of the
paper's Table 2:

  forward time per stage   ~ layers per stage x hidden^2   (unit: one layer at hidden 4096)
  backward time per stage  = 2 x forward
  activation memory/stage  ~ layers per stage x hidden     (unit: one layer at hidden 4096)

Layers are split evenly (60 layers over 8 stages is 7.5 per stage). The actor
runs one pipeline over all devices (K = 1) with GBS micro-batches; the critic
runs devices/PP1 mirrored replicas with GBS/K micro-batches each.

It also writes the integer encoding of the same twelve settings, the one the
paper's public code (FlexFusion, parallel_driver.cc and get-lower-bound.py) runs:
per-stage forward times as small integers (33B/13B: 5 and 4 at PP 8/4, 5 and 2 at
PP 8/8; 65B/33B: 2 and 2 at PP 16/8, 2 and 1 at PP 16/16), backward = 2 x forward,
activation memory 1.95 / 2 (33B/13B at 8/4), 1.95 / 1, 1.64 / 2, 1.64 / 1 per
micro-batch per stage, as table3int_*.json. Integer costs make most swaps leave
the makespan unchanged: the flat landscape of docs/notes/schedgen-latency-search.md.

  python3 make_specs.py        # rewrites table3_*.json and table3int_*.json next to this script
"""
import json
import os

SHAPES = {"13B": (40, 5120), "33B": (60, 6656), "65B": (80, 8192)}  # layers, hidden
SETTINGS = [("33B", "13B", 8, 4, [8, 16, 32]), ("33B", "13B", 8, 8, [8, 16, 32]),
            ("65B", "33B", 16, 8, [16, 32, 64]), ("65B", "33B", 16, 16, [16, 32, 64])]


def model(name, size, stages, replicas, micro_batches, direction):
    layers, hidden = SHAPES[size]
    per_stage = layers / stages
    fwd = round(per_stage * (hidden / 4096) ** 2, 6)
    return {"name": name, "stages": stages, "replicas": replicas, "micro_batches": micro_batches,
            "fwd": fwd, "bwd": round(2 * fwd, 6), "act_mem": round(per_stage * hidden / 4096, 6),
            "direction": direction}


# The paper's code's experiment configs (exp0..exp11): per-stage forward time and
# activation memory of actor and critic, by (PP0, PP1).
INTEGER = {(8, 4): (5, 4, 1.95, 2), (8, 8): (5, 2, 1.95, 1), (16, 8): (2, 2, 1.64, 2), (16, 16): (2, 1, 1.64, 1)}


def integer_model(name, stages, replicas, micro_batches, fwd, act_mem, direction):
    return {"name": name, "stages": stages, "replicas": replicas, "micro_batches": micro_batches,
            "fwd": fwd, "bwd": 2 * fwd, "act_mem": act_mem, "direction": direction}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    for actor, critic, pp0, pp1, batches in SETTINGS:
        for gbs in batches:
            k = pp0 // pp1
            spec = {"format": "braid.schedspec", "version": 1,
                    "comment": f"RLHFuse Table 3: {actor} actor PP {pp0}, {critic} critic PP {pp1}, GBS {gbs}",
                    "devices": pp0,
                    "models": [model("actor", actor, pp0, 1, gbs, "forward"),
                               model("critic", critic, pp1, k, gbs // k, "reverse")],
                    "mem_capacity": None, "p2p_time": 0}
            path = os.path.join(here, f"table3_{actor}_{critic}_pp{pp0}_{pp1}_gbs{gbs}.json")
            with open(path, "w") as f:
                json.dump(spec, f, indent=1)
                f.write("\n")
            f0, f1, m0, m1 = INTEGER[(pp0, pp1)]
            spec = {"format": "braid.schedspec", "version": 1,
                    "comment": f"RLHFuse Table 3 as the paper's public code encodes it: {actor} actor PP {pp0}, "
                               f"{critic} critic PP {pp1}, GBS {gbs}",
                    "devices": pp0,
                    "models": [integer_model("actor", pp0, 1, gbs, f0, m0, "forward"),
                               integer_model("critic", pp1, k, gbs // k, f1, m1, "reverse")],
                    "mem_capacity": None, "p2p_time": 0}
            path = os.path.join(here, f"table3int_{actor}_{critic}_pp{pp0}_{pp1}_gbs{gbs}.json")
            with open(path, "w") as f:
                json.dump(spec, f, indent=1)
                f.write("\n")


if __name__ == "__main__":
    main()
