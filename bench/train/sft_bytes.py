#!/usr/bin/env python3
"""N SFT examples of 128 byte tokens each (BOS, an 8-byte prompt, a 118-byte response, EOS),
the same for a given N on every machine: the training benchmarks' data.

    bench/train/sft_bytes.py N > d.jsonl
"""
import json
import random
import sys

rng = random.Random(1)
for _ in range(int(sys.argv[1])):
    prompt = "".join(rng.choice("abcdefgh") for _ in range(8))
    response = "".join(rng.choice("abcdefgh ") for _ in range(118))
    print(json.dumps({"prompt": prompt, "response": response}))
