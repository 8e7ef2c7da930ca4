#!/usr/bin/env python3
"""Bad input and faults on purpose, as a new user's bad day would bring them, against the readers
of the chat templates (`braid tokenize --chat`, --tools, --chat-template-kwargs), the model
families' configs (Llama, Mistral, Qwen2, Qwen3, Gemma 2, Gemma 3), PEFT adapter folders
(`braid import --base`), the dataset (`braid data`, a run file's `data` block), run files and the
planner's inputs (profiles, clusters, experiments, schedspecs, schedules under
`braid-schedgen --verify`). Every case is one run of a tool under a time bound, judged:

  refused   exit 2, naming the file (its name) and, where one is at fault, the field
  accepted  exit 0 where the case is one braid may take (a documented default, HF's null)
  signal    killed by a signal (a crash)
  hang      still running at the bound (BOUND seconds)
  bad-exit  any other exit (1: an internal error), or exit 2 not naming the file or field
  silent    exit 0 where the input should have been refused (an accepted-bad case)

    bench/reliability/adversarial.py BUILD_BIN [--keep DIR] [--only CLASS[/SUBCLASS]]

prints one line per case that is not clean (refused or rightly accepted) and a table of counts
per class; exits 1 when any case is a signal, a hang, a bad exit or silent. Needs python3 with
numpy; takes a few minutes on 2 cores. docs/reliability.md has the figures.
"""
import argparse
import copy
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

BOUND = 30  # seconds before a case counts as a hang
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KINDS = ["refused", "accepted", "signal", "hang", "bad-exit", "silent"]

# Values put in place of a field: each is refused unless the field takes it (MAY_TAKE below).
ABSURD = [("null", None), ("true", True), ("-1", -1), ("1e300", 1e300), ("2^63", 2**63),
          ("string", "x"), ("object", {})]


def mutations(doc, path=(), depth=3):
    """(label, path, new document) for each field up to depth levels down: deleted, or each of
    ABSURD in its place. Lists: their first element only."""
    if depth == 0:
        return
    items = doc.items() if isinstance(doc, dict) else ([(0, doc[0])] if isinstance(doc, list) and doc else [])
    for key, value in items:
        p = path + (key,)
        if isinstance(doc, dict):
            yield "deleted", p, None
        for label, v in ABSURD:
            if v == value and type(v) is type(value) or label == "true" and isinstance(value, bool) or \
                    label == "string" and isinstance(value, str):
                continue  # the same value, or another value of a flag or a text
            yield label, p, v
        if isinstance(value, (dict, list)):
            yield from mutations(value, p, depth - 1)


def apply(doc, path, label, value):
    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        node = node[key]
    if label == "deleted":
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


def dotted(path):
    return ".".join(str(p) for p in path)


class Round:
    def __init__(self, bin_dir, work, only=()):
        self.bin, self.work = bin_dir, work
        # --only: when it names a subclass (plan/schedule), only its cases and those of the whole
        # classes named run; otherwise every case of the classes run.
        self.subclasses = [o for o in only if "/" in o]
        self.whole = [o for o in only if "/" not in o]
        self.counts = {}
        self.findings = []
        self.runs = 0

    def tool(self, name):
        return os.path.join(self.bin, name)

    def case(self, klass, name, cmd, names, may_accept=False, cwd=None, stdin=None, then=None):
        """Runs cmd; names: the texts a refusal must hold (the file, the field). then: where cmd (a
        dry run) accepts what it should not, the command that does the work, whose refusal counts."""
        if self.subclasses and klass not in self.subclasses and klass.split("/")[0] not in self.whole:
            return None
        self.runs += 1
        start = time.time()

        def run(argv):
            try:
                p = subprocess.run(argv, cwd=cwd or self.work, stdin=stdin or subprocess.DEVNULL, capture_output=True,
                                   timeout=BOUND, start_new_session=True)
                return p.returncode, p.stderr.decode("utf-8", "replace")
            except subprocess.TimeoutExpired as e:
                return None, (e.stderr or b"").decode("utf-8", "replace")

        rc, err = run(cmd)
        if rc == 0 and not may_accept and then:
            rc, err = run(then)
            names = ["error:"]  # the stage that refuses names its own input
        if rc is None:
            kind = "hang"
        elif rc < 0 or rc >= 128:
            kind = "signal"
        elif rc == 0:
            kind = "accepted" if may_accept else "silent"
        elif rc == 2 and all(any(a in err for a in (n if isinstance(n, tuple) else (n,))) for n in names):
            kind = "refused"
        else:
            kind = "bad-exit"
        c = self.counts.setdefault(klass, dict.fromkeys(KINDS, 0))
        c[kind] += 1
        if kind not in ("refused", "accepted"):
            last = err.strip().splitlines()[-1] if err.strip() else ""
            line = f"{kind:8} {klass}/{name}: exit {rc} in {time.time() - start:.1f} s: {last[:200]}"
            self.findings.append(line)
            print(line, flush=True)
        return kind

    def json_cases(self, klass, base, file_name, cmd, may_take=lambda label, path: False, depth=3, dump=json.dumps,
                   then=None):
        """Every mutation of the JSON document base, written to file_name, then cmd run."""
        path_file = os.path.join(self.work, file_name)
        for label, p, value in mutations(base, depth=depth):
            doc = apply(base, p, label, value)
            with open(path_file, "w") as f:
                f.write(dump(doc))
            field = str(p[-1]) if not isinstance(p[-1], int) else str(p[-2])
            field = ("rope_type", "type") if field == "rope_type" else field  # transformers reads either
            if p[0] == "made_from" and len(p) > 1:
                field = (field, "made_from: fingerprint")  # a record changed is refused whole by its fingerprint
            if p == ("algorithm",) and label == "deleted" and klass.startswith("run/"):
                field = "required by ppo"  # a run file's default algorithm's need names what is missing
            self.case(klass, f"{dotted(p)}={label}", cmd, [os.path.basename(file_name), field],
                      may_accept=may_take(label, p), then=then)


def npz_safetensors(path, tensors, header_extra=None):
    """A safetensors file of F32 tensors {name: (shape, flat values)}."""
    header, blob = {}, b""
    for name, (shape, values) in tensors.items():
        data = struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    if header_extra:
        header.update(header_extra)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + blob)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        blob = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = (t["shape"], list(struct.unpack(f"<{(b - a) // 4}f", blob[a:b])))
    return out


# --- The classes ---------------------------------------------------------------------------

FAMILIES = {
    "llama": {"model_type": "llama", "attention_bias": True, "mlp_bias": True, "tie_word_embeddings": False,
              "rope_scaling": {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 64}},
    "mistral": {"model_type": "mistral", "sliding_window": 6, "head_dim": 8,
                "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}},
    "qwen2": {"model_type": "qwen2", "tie_word_embeddings": True, "use_sliding_window": True, "sliding_window": 6,
              "max_window_layers": 1, "rope_scaling": {"type": "yarn", "factor": 4.0,
                                                       "original_max_position_embeddings": 64}},
    "qwen3": {"model_type": "qwen3", "head_dim": 12, "tie_word_embeddings": True},
    "gemma2": {"model_type": "gemma2", "head_dim": 12, "query_pre_attn_scalar": 12, "attn_logit_softcapping": 20.0,
               "final_logit_softcapping": 10.0, "sliding_window": 6},
    "gemma3": {"model_type": "gemma3_text", "head_dim": 12, "query_pre_attn_scalar": 12,
               "final_logit_softcapping": 10.0, "sliding_window": 6, "sliding_window_pattern": 2,
               "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 2.0}},
}
SHAPE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "intermediate_size": 48, "vocab_size": 260, "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
         "rope_theta": 10000.0, "bos_token_id": 256, "eos_token_id": 257, "pad_token_id": 258}

# A config key whose absence or null Hugging Face reads as "none" or as the family's default
# (transformers' PretrainedConfig does the same): taking it is right.
CONFIG_OPTIONAL = {"attention_bias", "mlp_bias", "tie_word_embeddings", "rope_scaling", "sliding_window",
                   "use_sliding_window", "max_window_layers", "head_dim", "query_pre_attn_scalar",
                   "attn_logit_softcapping", "final_logit_softcapping", "sliding_window_pattern",
                   "rope_local_base_freq", "rope_theta", "rms_norm_eps", "bos_token_id", "eos_token_id",
                   "pad_token_id", "max_position_embeddings", "num_key_value_heads"}


def config_class(r):
    for family, extra in FAMILIES.items():
        base = dict(SHAPE, **extra)

        def may_take(label, p):
            key = p[0]
            if len(p) == 1 and label == "deleted":
                # no model_type reads as Llama's config (docs/models.md), as braid's own configs are written
                return key in CONFIG_OPTIONAL or key == "model_type"
            if len(p) == 1 and label == "null":
                return key in CONFIG_OPTIONAL  # null reads as absent, as transformers reads None
            if p == ("rope_scaling", "original_max_position_embeddings") and label in ("deleted", "null"):
                return True  # yarn's: max_position_embeddings then, as transformers reads it
            return p == ("rope_scaling",) and label == "object"  # {}: no scaling, as an absent one

        r.json_cases(f"config/{family}", base, f"{family}.json",
                     [r.tool("braid"), "-q", "init", "-c", f"{family}.json", "-o", f"{family}.h5"], may_take)
        for name, value in [("huge", 2**40), ("past-vocab", 260), ("negative", -5)]:
            for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
                for shape in ("int", "list"):
                    doc = dict(base, **{key: value if shape == "int" else [257, value]})
                    with open(os.path.join(r.work, f"{family}.json"), "w") as f:
                        json.dump(doc, f)
                    r.case(f"config/{family}", f"{key}={name}-{shape}",
                           [r.tool("braid"), "-q", "init", "-c", f"{family}.json", "-o", f"{family}.h5"],
                           [f"{family}.json", key])


def run_class(r):
    with open(os.path.join(ROOT, "examples/ppo-tiny/run.json")) as f:
        ppo = json.load(f)
    os.makedirs(os.path.join(r.work, "run"), exist_ok=True)
    shutil.copy(os.path.join(ROOT, "examples/tiny/config.json"), os.path.join(r.work, "run/config.json"))
    with open(os.path.join(r.work, "run/prompts.jsonl"), "w") as f:
        for i in range(24):
            f.write(json.dumps({"question": f"Count to {i}:", "answer": str(i)}) + "\n")
    ppo["models"]["actor"]["init"]["config"] = "config.json"
    ppo["models"]["critic"]["init"]["config"] = "config.json"
    ppo["data"] = {"batch_prompts": 4, "shuffle": True, "seed": 1, "fields": {"prompt": "question"}, "heldout": 4}
    grpo = copy.deepcopy(ppo)
    grpo["algorithm"] = "grpo"
    del grpo["models"]["critic"]
    del grpo["train"]["critic_lr"]
    # Keys whose absence is the documented default (docs/formats-run.md).
    defaults = {("comment",), ("seed",), ("score",), ("score", "kl_coef"), ("train",), ("train", "lr"),
                ("train", "critic_lr"), ("train", "epochs"), ("generate", "temperature"), ("generate", "shard_size"),
                ("generate", "max_new_tokens"), ("data",), ("data", "batch_prompts"), ("data", "shuffle"),
                ("data", "seed"), ("data", "heldout"), ("models", "actor", "init", "seed"),
                ("models", "critic", "init", "seed"), ("algorithm",)}
    for name, base in (("ppo", ppo), ("grpo", grpo)):
        def may_take(label, p, name=name):
            # generate's samples_per_prompt and the whole block default to 1 sample: a group of one
            # is no group for grpo. An empty block is one deleted; a comment is not read.
            if p == ("comment",):
                return True
            if label == "deleted" or label == "object" and len(p) == 1:
                if name == "ppo" and p in (("generate",), ("generate", "samples_per_prompt")):
                    return True
                # the algorithm's default is ppo, which a grpo file (no critic) is refused under
                return p in defaults and not (name == "grpo" and p == ("algorithm",))
            return False
        # A dry run reads the run file and what it names; the prompt lines themselves (unless
        # data.fields or the math rule reads them) are read by the first iteration's generation.
        shutil.rmtree(os.path.join(r.work, f"run/out-{name}"), ignore_errors=True)
        run = [r.tool("braid"), "-q", "run", f"run/{name}.json", "-o", f"run/out-{name}"]
        r.json_cases(f"run/{name}", base, f"run/{name}.json", run + ["-n"], may_take,
                     then=["sh", "-c", 'rm -rf "$1"; shift; exec "$@" --iterations 1', "-", f"run/out-{name}"] + run)
    text = json.dumps(ppo, indent=1).encode()
    variants = {
        "bom": (b"\xef\xbb\xbf" + text, True),  # RFC 8259: a parser may skip a BOM; the content is the same
        "utf8-in-value": (text.replace(b"PPO on", b"PPO \xc3\x28on"), False),
        "utf8-in-key": (text.replace(b'"iterations"', b'"itera\xfftions"'), False),
        "utf8-overlong": (text.replace(b"PPO on", b"PPO \xc0\xafon"), False),
        "utf8-surrogate": (text.replace(b"PPO on", b"PPO \xed\xa0\x80on"), False),
        "utf16": (text.decode().encode("utf-16"), False),
        "nul": (text.replace(b"PPO on", b"PPO \x00on"), False),
        "trailing": (text + b"\n{}", False),
        "truncated": (text[: len(text) // 2], False),
        "empty": (b"", False),
    }
    for name, (data, ok) in variants.items():
        with open(os.path.join(r.work, "run/v.json"), "wb") as f:
            f.write(data)
        r.case("run/text", name, [r.tool("braid"), "-q", "run", "run/v.json", "-o", "run/out-v", "-n"], ["v.json"],
               may_accept=ok)


def chat_class(r):
    d = os.path.join(r.work, "chat")
    os.makedirs(d, exist_ok=True)
    tok = os.path.join(d, "tok")
    src = os.path.join(ROOT, "tests/fixtures/tokenizer/qwen2_style")
    shutil.copytree(src, tok, dirs_exist_ok=True)
    with open(os.path.join(ROOT, "tests/fixtures/chat/models/qwen2.5-instruct/tokenizer_config.json")) as f:
        qwen_template = json.load(f)["chat_template"]
    with open(os.path.join(tok, "tokenizer_config.json")) as f:
        tconf = json.load(f)
    tconf["chat_template"] = qwen_template
    good_conv = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                              {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Add 2+2"}],
                 "tools": [{"type": "function", "function": {"name": "add", "description": "Add",
                                                             "parameters": {"type": "object", "properties": {
                                                                 "a": {"type": "number"}}}}}],
                 "chat_template_kwargs": {"enable_thinking": False}}

    def write_tconf(doc):
        with open(os.path.join(tok, "tokenizer_config.json"), "w") as f:
            json.dump(doc, f)

    write_tconf(tconf)
    with open(os.path.join(d, "good.jsonl"), "w") as f:
        f.write(json.dumps(good_conv) + "\n")
    tokenize = [r.tool("braid"), "-q", "tokenize", "--tokenizer", tok]

    # The conversation line: every field deleted or replaced. A template may take content null (an
    # assistant turn with tool calls) and a missing or null tools or kwargs.
    def conv_may_take(label, p):
        if p[0] in ("tools", "chat_template_kwargs") and len(p) == 1 and label in ("deleted", "null"):
            return True
        if p[0] == "chat_template_kwargs" and len(p) == 2:
            return True  # a template's variable: any JSON value, the template decides
        if p[0] == "chat_template_kwargs" and label == "object":
            return True
        if p[0] == "tools" and len(p) > 2:
            return True  # a tool's schema is the template's to print
        if p[0] == "tools" and len(p) == 2 and label in ("object",):
            return True
        if p[1:] == (0, "content") and label == "null":
            return True  # an assistant turn with tool calls has none; the template decides
        return False

    r.json_cases("chat/line", good_conv, "chat/conv.jsonl", tokenize + ["--chat", "chat/conv.jsonl"],
                 conv_may_take, depth=3)

    # tokenizer_config.json's chat_template and special tokens.
    def tconf_may_take(label, p):
        return p[0] in ("bos_token", "eos_token") and label in ("deleted", "null")

    r.json_cases("chat/tokenizer_config", tconf, "chat/tok/tokenizer_config.json",
                 tokenize + ["--chat", "chat/good.jsonl"], tconf_may_take, depth=1)
    templates = {
        "unterminated": "{% for m in messages %}{{ m.content }}",
        "unknown-filter": "{{ messages | no_such_filter }}",
        "raise": "{{ raise_exception('refused by the template') }}",
        "recursion": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "range-1e12": "{% for i in range(1000000000000) %}{% endfor %}",
        "nested-loops": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "string-1e12": "{{ 'a' * 1000000000000 }}",
        "string-doubling": "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
                           "{% endfor %}{{ ns.s }}",
        "deep-parens": "{{ " + "(" * 100000 + "1" + ")" * 100000 + " }}",
        "deep-blocks": "{% if true %}" * 20000 + "x" + "{% endif %}" * 20000,
        "list-templates-bad": [{"name": "default", "template": 3}],
        "list-templates-none": [{"name": "tool_use", "template": "x"}],
        "empty": "",
        "no-messages": "{{ nothing_here.content }}",
        "bad-utf8-output": "{{ '\\xff' }}",
    }
    for name, t in templates.items():
        write_tconf(dict(tconf, chat_template=t))
        # raise_exception is the template refusing the conversation: the line is named
        names = ["good.jsonl", "refused by the template"] if name == "raise" else ["tokenizer_config.json"]
        r.case("chat/template", name, tokenize + ["--chat", "chat/good.jsonl"], names,
               may_accept=name in ("empty", "no-messages", "bad-utf8-output"))
    write_tconf(tconf)

    # --tools and --chat-template-kwargs as files and texts.
    no_tools = {"messages": good_conv["messages"]}
    with open(os.path.join(d, "notools.jsonl"), "w") as f:
        f.write(json.dumps(no_tools) + "\n")
    for name, text, ok in [("object", '{"type": "function"}', False), ("number", "3", False),
                           ("null", "null", False), ("not-json", "[{", False), ("empty", "", False),
                           ("deep", "[" * 100000 + "]" * 100000, False), ("utf8", '[{"x": "\xff"}]', False),
                           ("empty-list", "[]", True)]:
        with open(os.path.join(d, "tools.json"), "w", encoding="latin-1") as f:
            f.write(text)
        r.case("chat/--tools", name, tokenize + ["--chat", "chat/notools.jsonl", "--tools", "chat/tools.json"],
               ["tools.json"], may_accept=ok)
    # (an empty text is the option's default: no keyword arguments)
    for name, text in [("array", "[]"), ("number", "3"), ("null", "null"), ("not-json", "{"),
                       ("deep", "[" * 10000 + "]" * 10000), ("string", '"x"'), ("reserved", '{"messages": []}')]:
        r.case("chat/--chat-template-kwargs", name,
               tokenize + ["--chat", "chat/notools.jsonl", "--chat-template-kwargs", text],
               [("--chat-template-kwargs", "chat_template_kwargs")])
    # Text of lines: invalid UTF-8, a BOM, an empty line, a line that is not an object.
    line = json.dumps(good_conv).encode()
    for name, data, ok in [("utf8", line.replace(b"Hello", b"Hel\xfflo"), False), ("bom", b"\xef\xbb\xbf" + line, True),
                           ("array", b"[1]", False), ("nul", line.replace(b"Hello", b"Hel\x00lo"), False),
                           ("deep", b'{"messages": ' + b"[" * 100000 + b"]" * 100000 + b"}", False),
                           ("empty-messages", b'{"messages": []}', False)]:
        with open(os.path.join(d, "v.jsonl"), "wb") as f:
            f.write(data + b"\n")
        r.case("chat/text", name, tokenize + ["--chat", "chat/v.jsonl"], ["v.jsonl"], may_accept=ok)


def peft_class(r):
    d = os.path.join(r.work, "peft")
    os.makedirs(d, exist_ok=True)
    cfg = dict(SHAPE, model_type="llama", vocab_size=259, bos_token_id=256, eos_token_id=257, pad_token_id=258)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    with open(os.path.join(d, "other.json"), "w") as f:
        json.dump(dict(cfg, hidden_size=48, intermediate_size=64), f)
    with open(os.path.join(d, "sft.jsonl"), "w") as f:
        for i in range(4):
            f.write(json.dumps({"prompt": f"Q{i}:", "response": f" {i * 7}"}) + "\n")
    B = r.tool
    subprocess.run([B("braid"), "-q", "init", "-c", "config.json", "--seed", "1", "-o", "base.h5"], cwd=d, check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([B("braid"), "-q", "init", "-c", "other.json", "--seed", "1", "-o", "other.h5"], cwd=d, check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([B("braid-train"), "-q", "sft", "sft.jsonl", "--actor", "base.h5", "--actor-out", "ad.h5",
                    "--lora-rank", "4", "--lora-alpha", "8", "--threads", "1"], cwd=d, check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([B("braid"), "-q", "export", "ad.h5", "-o", "good"], cwd=d, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(d, "good/adapter_config.json")) as f:
        acfg = json.load(f)
    tensors = read_safetensors(os.path.join(d, "good/adapter_model.safetensors"))
    folder = os.path.join(d, "p")

    def fresh():
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(os.path.join(d, "good"), folder)

    imp = [B("braid"), "-q", "import", "peft/p", "--base", "peft/base.h5", "-o", "peft/out.h5"]
    fresh()
    # adapter_config.json: keys peft writes that braid does not act on may go (HF's defaults).
    optional = {"base_model_name_or_path", "task_type", "lora_dropout", "use_rslora", "bias", "inference_mode",
                "revision", "fan_in_fan_out", "modules_to_save", "layers_to_transform", "layers_pattern",
                "rank_pattern", "alpha_pattern", "init_lora_weights", "use_dora", "target_parameters",
                "megatron_config", "megatron_core", "loftq_config", "layer_replication", "exclude_modules",
                "auto_mapping", "peft_version", "lora_bias", "trainable_token_indices", "eva_config",
                "corda_config", "qalora_group_size", "use_qalora", "runtime_config", "lora_alpha"}

    def may_take(label, p):
        key = p[0]
        if label == "deleted" and len(p) == 1:
            return key in optional
        if label == "null" and key in ("base_model_name_or_path", "revision", "task_type", "use_rslora", "bias",
                                       "lora_dropout", "inference_mode", "fan_in_fan_out", "use_dora", "peft_version", "modules_to_save", "layers_to_transform",
                                       "layers_pattern", "megatron_config", "loftq_config", "layer_replication",
                                       "exclude_modules", "auto_mapping", "eva_config", "corda_config",
                                       "trainable_token_indices", "init_lora_weights", "target_parameters"):
            return True
        if key in ("base_model_name_or_path", "revision", "task_type", "peft_version") and label == "string":
            return True
        if key in ("rank_pattern", "alpha_pattern", "loftq_config", "megatron_core", "runtime_config",
                   "auto_mapping") and label == "object":
            return True
        if key == "megatron_core" and label == "string":
            return True
        if key == "init_lora_weights" and label == "true":
            return True
        return False

    r.json_cases("peft/adapter_config", acfg, "peft/p/adapter_config.json", imp, may_take, depth=2)
    fresh()
    name0 = sorted(tensors)[0]
    shape0, values0 = tensors[name0]
    cases = {
        "no-config": lambda: os.remove(os.path.join(folder, "adapter_config.json")),
        "no-weights": lambda: os.remove(os.path.join(folder, "adapter_model.safetensors")),
        "truncated": lambda: os.truncate(os.path.join(folder, "adapter_model.safetensors"),
                                         os.path.getsize(os.path.join(folder, "adapter_model.safetensors")) - 7),
        "empty-weights": lambda: open(os.path.join(folder, "adapter_model.safetensors"), "wb").close(),
        "transposed": lambda: npz_safetensors(os.path.join(folder, "adapter_model.safetensors"),
                                              dict(tensors, **{name0: (shape0[::-1], values0)})),
        "3d": lambda: npz_safetensors(os.path.join(folder, "adapter_model.safetensors"),
                                      dict(tensors, **{name0: ([1] + shape0, values0)})),
        "missing-tensor": lambda: npz_safetensors(os.path.join(folder, "adapter_model.safetensors"),
                                                  {k: v for k, v in tensors.items() if k != name0}),
        "foreign-tensor": lambda: npz_safetensors(os.path.join(folder, "adapter_model.safetensors"),
                                                  dict(tensors, **{"base_model.model.model.layers.9.mlp.up_proj."
                                                                   "lora_A.weight": (shape0, values0)})),
        "nan": lambda: npz_safetensors(os.path.join(folder, "adapter_model.safetensors"),
                                       dict(tensors, **{name0: (shape0, [float("nan")] * len(values0))})),
        "rank-mismatch": lambda: npz_safetensors(os.path.join(folder, "adapter_model.safetensors"),
                                                 dict(tensors, **{name0: ([2, shape0[1]], values0[: 2 * shape0[1]])})),
        "header-huge": lambda: open(os.path.join(folder, "adapter_model.safetensors"), "wb").write(
            struct.pack("<Q", 2**62) + b"{}"),
        "bin-only": lambda: (os.rename(os.path.join(folder, "adapter_model.safetensors"),
                                       os.path.join(folder, "adapter_model.bin"))),
    }
    for name, make in cases.items():
        fresh()
        make()
        r.case("peft/folder", name, imp, ["p/adapter"])
    fresh()
    r.case("peft/folder", "wrong-base", [B("braid"), "-q", "import", "peft/p", "--base", "peft/other.h5", "-o",
                                         "peft/out.h5"], ["other.h5"])
    r.case("peft/folder", "base-is-adapter", [B("braid"), "-q", "import", "peft/p", "--base", "peft/ad.h5", "-o",
                                              "peft/out.h5"], ["ad.h5"])
    r.case("peft/folder", "no-base", [B("braid"), "-q", "import", "peft/p", "-o", "peft/out.h5"], ["--base"])


def data_class(r):
    d = os.path.join(r.work, "data")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "p.jsonl"), "w") as f:
        for i in range(10):
            f.write(json.dumps({"question": f"Q{i}", "solution": str(i)}) + "\n")
    cmd = [r.tool("braid"), "-q", "data", "data/p.jsonl", "-o", "data/out"]
    for name, extra, names in [
            ("field-unknown-name", ["--field", "nosuch=question"], ["--field", "nosuch"]),
            ("field-no-key", ["--field", "prompt=missing"], ["p.jsonl", "missing"]),
            ("field-empty", ["--field", "prompt="], ["--field"]),
            ("field-no-eq", ["--field", "prompt"], ["--field"]),
            ("field-twice", ["--field", "prompt=question", "--field", "prompt=solution"], ["--field", "prompt"]),
            ("field-same-key", ["--field", "prompt=question", "--field", "answer=question"], ["--field", "question"]),
            ("heldout-0", ["--field", "prompt=question", "--heldout", "0"], ["--heldout"]),
            ("heldout-all", ["--field", "prompt=question", "--heldout", "10"], ["--heldout"]),
            ("heldout-neg", ["--field", "prompt=question", "--heldout", "-1"], ["--heldout"]),
            ("heldout-1.0", ["--field", "prompt=question", "--heldout", "1.0"], ["--heldout"]),
            ("heldout-nan", ["--field", "prompt=question", "--heldout", "nan"], ["--heldout"]),
            ("heldout-1e300", ["--field", "prompt=question", "--heldout", "1e300"], ["--heldout"]),
            ("heldout-text", ["--field", "prompt=question", "--heldout", "ten"], ["--heldout"])]:
        shutil.rmtree(os.path.join(d, "out"), ignore_errors=True)
        r.case("data/braid-data", name, cmd + extra, names)
    for name, text in [("utf8", b'{"question": "Q\xff"}\n'), ("array", b"[1, 2]\n"), ("null-key", b'{"question": null}\n'),
                       ("number-key", b'{"question": 3}\n'), ("deep", b'{"question": ' + b"[" * 100000 + b"]" * 100000 +
                                                                b"}\n")]:
        with open(os.path.join(d, "v.jsonl"), "wb") as f:
            f.write(text)
        shutil.rmtree(os.path.join(d, "out"), ignore_errors=True)
        r.case("data/braid-data", f"line-{name}", [r.tool("braid"), "-q", "data", "data/v.jsonl", "-o", "data/out",
                                                   "--field", "prompt=question"], ["v.jsonl"])


def plan_class(r):
    d = os.path.join(r.work, "plan")
    os.makedirs(d, exist_ok=True)
    ex = os.path.join(ROOT, "examples/plan-run")
    shutil.copytree(os.path.join(ROOT, "examples/tiny"), os.path.join(r.work, "tiny"), dirs_exist_ok=True)
    docs = {}
    for name in ("experiment", "cluster-1x2", "profile"):
        with open(os.path.join(ex, name + ".json")) as f:
            docs[name] = json.load(f)
    for name, doc in docs.items():
        with open(os.path.join(d, name + ".json"), "w") as f:
            json.dump(doc, f)
    mesh = [r.tool("braid-meshplan"), "plan/experiment.json", "plan/cluster-1x2.json", "--profile", "plan/profile.json",
            "--time-limit", "0.3", "--iterations", "2000", "-o", "plan/plan.json"]
    descriptive = {"name", "comment", "note", "source"}

    # Keys docs/formats-plan.md documents as optional, with a default or as absent.
    optional = {("ppo_epochs",), ("device_memory_gb",), ("intra_node_gbs",), ("inter_node_gbs",),
                ("memory_reserve",), ("models", 0, "layer_prefill"), ("models", 0, "sample"), ("models", 0, "spread"),
                ("models", 0, "train_extra"), ("host",)}

    def may_take(label, p):
        if p[0] in descriptive:
            return label in ("deleted", "string")
        return label == "deleted" and p in optional

    for name in ("experiment", "cluster-1x2"):
        r.json_cases(f"plan/{name}", docs[name], f"plan/{name}.json", mesh, may_take, depth=3)
        with open(os.path.join(d, name + ".json"), "w") as f:
            json.dump(docs[name], f)
    r.json_cases("plan/profile", docs["profile"], "plan/profile.json", mesh, may_take, depth=3)
    with open(os.path.join(d, "profile.json"), "w") as f:
        json.dump(docs["profile"], f)
    spec = {"format": "braid.schedspec", "version": 1, "devices": 2,
            "models": [{"name": "actor", "stages": 2, "replicas": 1, "micro_batches": 2, "fwd": 1, "bwd": 2,
                        "act_mem": 1},
                       {"name": "critic", "stages": 2, "replicas": 1, "micro_batches": 2, "fwd": 1, "bwd": 2,
                        "act_mem": 1}],
            "mem_capacity": None, "p2p_time": 0}

    def spec_may_take(label, p):
        if p == ("mem_capacity",) and label in ("deleted", "1e300", "2^63"):
            return True  # no limit, or one no schedule reaches
        if p == ("p2p_time",) and label == "deleted":
            return True
        if p in (("models", 0, "replicas"), ("models", 0, "name")) and label == "deleted":
            return True  # documented defaults: 1, model<i>
        return False

    sg = [r.tool("braid-schedgen"), "--time-limit", "0.1", "--iterations", "500"]
    r.json_cases("plan/schedspec", spec, "plan/spec.json", sg + ["plan/spec.json", "-o", "plan/s.json"], spec_may_take)
    with open(os.path.join(d, "spec.json"), "w") as f:
        json.dump(spec, f)
    subprocess.run(sg + ["plan/spec.json", "-o", "plan/schedule.json"], cwd=r.work, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(d, "schedule.json")) as f:
        sched = json.load(f)
    # The search's record (seeds, counts, times) describes how the schedule was found; --verify
    # runs the streams and checks what they give (makespan, peak memory) against the spec.
    record = {"search", "baselines", "speedup_over_serial_1f1b", "memory_over_serial_1f1b", "lower_bound_binding",
              "lower_bound_reached"}

    def sched_may_take(label, p):
        if p[0] in record and label == "deleted":
            return True
        if p == ("made_from",) and label == "deleted":
            return True  # a schedule that records nothing (made before records, or by hand)
        if p in (("made_from", "given"), ("made_from", "output")) and label in ("deleted", "null"):
            return True  # optional in a record, and outside its fingerprint
        if p[:2] == ("search", "t0_cycle") and len(p) == 3 and label in ("1e300", "2^63"):
            return True  # --t0-cycle takes any positive factor (a rank that never cools: cli_schedgen.sh)
        # The spec inside takes what a schedspec takes, but every key: it is written whole.
        return p[0] == "spec" and label != "deleted" and spec_may_take(label, p[1:])

    r.json_cases("plan/schedule", sched, "plan/v-schedule.json",
                 [r.tool("braid-schedgen"), "--verify", "plan/v-schedule.json"], sched_may_take, depth=4)


def faults_class(r):
    """The new readers given special files, and the new writers a file-size limit."""
    fifo = os.path.join(r.work, "fifo")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    tok = os.path.join(r.work, "chat/tok")
    B = r.tool
    for what in ("/dev/zero", "/dev/urandom", fifo):
        w = os.path.basename(what)
        r.case("faults/special", f"chat-{w}", [B("braid"), "-q", "tokenize", "--tokenizer", tok, "--chat", what], [what])
        r.case("faults/special", f"tools-{w}", [B("braid"), "-q", "tokenize", "--tokenizer", tok, "--chat",
                                                "chat/good.jsonl", "--tools", what], [what])
        r.case("faults/special", f"data-{w}", [B("braid"), "-q", "data", what, "-o", "data/out-sp", "--field",
                                               "prompt=question"], [what])
        folder = os.path.join(r.work, "peft/sp")
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(os.path.join(r.work, "peft/good"), folder)
        os.remove(os.path.join(folder, "adapter_config.json"))
        os.symlink(what, os.path.join(folder, "adapter_config.json"))
        r.case("faults/special", f"adapter-config-{w}", [B("braid"), "-q", "import", "peft/sp", "--base",
                                                         "peft/base.h5", "-o", "peft/out.h5"], ["adapter_config.json"])
        os.remove(os.path.join(folder, "adapter_config.json"))
        shutil.copy(os.path.join(r.work, "peft/good/adapter_config.json"), folder)
        os.remove(os.path.join(folder, "adapter_model.safetensors"))
        os.symlink(what, os.path.join(folder, "adapter_model.safetensors"))
        r.case("faults/special", f"adapter-weights-{w}", [B("braid"), "-q", "import", "peft/sp", "--base",
                                                          "peft/base.h5", "-o", "peft/out.h5"],
               ["adapter_model.safetensors"])
        r.case("faults/special", f"profile-{w}", [B("braid-meshplan"), "plan/experiment.json", "plan/cluster-1x2.json",
                                                  "--profile", what, "-o", "plan/p.json"], [what])
        r.case("faults/special", f"verify-{w}", [B("braid-schedgen"), "--verify", what], [what])
    # Writers under a file-size limit: exit 2 naming the file, nothing under the final name.
    limit = lambda: __import__("resource").setrlimit(__import__("resource").RLIMIT_FSIZE, (4096, 4096))
    for name, cmd, out in [
            ("import-peft", [B("braid"), "-q", "import", "peft/good", "--base", "peft/base.h5", "-o", "peft/fs.h5"],
             "peft/fs.h5"),
            ("export-peft", [B("braid"), "-q", "export", "peft/ad.h5", "-o", "peft/fs-dir"], "peft/fs-dir"),
            ("reshard", [B("braid"), "-q", "reshard", "peft/base.h5", "--stages", "2", "-o", "peft/fs-r.h5"],
             "peft/fs-r-stage0.h5"),
            ("schedgen", [B("braid-schedgen"), "plan/spec.json", "--time-limit", "0.1", "-o", "plan/fs.json"],
             "plan/fs.json")]:
        if r.subclasses and "faults/file-size" not in r.subclasses and "faults" not in r.whole:
            break
        r.runs += 1
        p = subprocess.run(cmd, cwd=r.work, preexec_fn=limit, capture_output=True, timeout=BOUND)
        err = p.stderr.decode("utf-8", "replace")
        c = r.counts.setdefault("faults/file-size", dict.fromkeys(KINDS, 0))
        left = os.path.exists(os.path.join(r.work, out))
        temps = [f for f in os.listdir(os.path.dirname(os.path.join(r.work, out))) if ".tmp-" in f]
        if p.returncode == 2 and not left and not temps:
            c["refused"] += 1
        else:
            kind = "signal" if p.returncode < 0 or p.returncode >= 128 else "bad-exit"
            c[kind] += 1
            line = f"{kind:8} faults/file-size/{name}: exit {p.returncode}, final name {'there' if left else 'absent'}," \
                   f" temps {temps}: {err.strip().splitlines()[-1][:200] if err.strip() else ''}"
            r.findings.append(line)
            print(line, flush=True)


CLASSES = {"config": config_class, "run": run_class, "chat": chat_class, "peft": peft_class, "data": data_class,
           "plan": plan_class, "faults": faults_class}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bin", help="the folder of the built tools (build/bin)")
    ap.add_argument("--keep", help="work in this folder and keep it (default: a temporary one, removed)")
    ap.add_argument("--only", action="append", metavar="CLASS[/SUBCLASS]",
                    help=f"run only these classes ({', '.join(sorted(CLASSES))}), or one subclass of a class's table "
                         "(plan/schedule)")
    a = ap.parse_args()
    work = a.keep or tempfile.mkdtemp(prefix="braid-adversarial-")
    os.makedirs(work, exist_ok=True)
    os.environ["BRAID_READ_TIMEOUT"] = "2"
    for o in a.only or []:
        if o.split("/")[0] not in CLASSES:
            ap.error(f"--only {o}: no such class (known: {', '.join(sorted(CLASSES))})")
    r = Round(os.path.abspath(a.bin), work, a.only or [])
    start = time.time()
    only = [o.split("/")[0] for o in a.only] if a.only else list(CLASSES)
    for name in CLASSES:
        if name in only or name == "chat" and "faults" in only or name in ("peft", "plan", "data") and "faults" in only:
            CLASSES[name](r)
    print(f"\n| class | runs | {' | '.join(KINDS)} |\n|---|---:|" + "---:|" * len(KINDS))
    total = dict.fromkeys(KINDS, 0)
    for klass, c in r.counts.items():
        print(f"| {klass} | {sum(c.values())} | " + " | ".join(str(c[k]) for k in KINDS) + " |")
        for k in KINDS:
            total[k] += c[k]
    print(f"| all | {r.runs} | " + " | ".join(str(total[k]) for k in KINDS) + " |")
    print(f"\n{r.runs} runs in {time.time() - start:.0f} s; {len(r.findings)} not clean")
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if r.findings else 0


if __name__ == "__main__":
    sys.exit(main())
