#include "generate/option_schema.hpp"

#include "backend/device_option.hpp"
#include "backend/dtype_option.hpp"

namespace braid::gen {
namespace {

using cli::custom;
using cli::field;
using cli::kMaxCount;
using cli::OptionSpec;
using O = StageOptions;
using namespace cli::option_types;

}  // namespace

const cli::OptionSchema<StageOptions>& generate_schema() {
  static const cli::OptionSchema<O> s = {
      field<O>(&O::actor, {.flag = "--actor", .type = path,
                           .help = "Policy checkpoint (a .h5 file or the stem of its stage files); needs an LM head",
                           .required = true, .show_default = false,
                           .doc = "the policy: a `.h5` checkpoint or the stem of its stage files; needs an LM head"}),
      field<O>(&O::prompts, {.flag = "--prompts", .type = path,
                             .help = "JSON Lines, one prompt a line: {\"text\": \"...\"} (with the special tokens the "
                                     "tokenizer puts around a text), {\"tokens\": [ids]} or {\"messages\": [...]} "
                                     "(rendered by the chat template), optional \"id\"; '-' for stdin",
                             .required = true, .show_default = false,
                             .doc = "JSON Lines (below); `-` reads stdin"}),
      field<O>(&O::out_dir, {.flag = "-o,--output", .type = path, .help = "Folder for the shards (created if missing)",
                             .required = true, .show_default = false}),
      field<O>(&O::tokenizer, {.flag = "--tokenizer", .type = path,
                               .help = "'byte' or a tokenizer.json (or its folder)",
                               .doc = "encodes text prompts; its EOS stops a sample"}),
      field<O>(&O::tools, {.flag = "--tools", .type = path,
                           .help = "A JSON file of tool schemas for the conversations (\"messages\" lines) without "
                                   "\"tools\"",
                           .show_default = false}),
      field<O>(&O::chat_template_kwargs,
               {.flag = "--chat-template-kwargs", .type = text,
                .help = "A JSON object of chat-template keyword arguments, e.g. '{\"enable_thinking\": false}' (a "
                        "line's own \"chat_template_kwargs\" win)",
                .show_default = false}),
      field<O>(&O::samples_per_prompt, {.flag = "--samples-per-prompt", .type = integer,
                                        .help = "Samples of each prompt (a GRPO group)", .key = "samples_per_prompt",
                                        .bounds = {.min = 1, .max = kMaxCount},
                                        .doc = "samples of each prompt (a GRPO group)"}),
      field<O>(&O::max_new_tokens, {.flag = "--max-new-tokens", .type = integer,
                                    .help = "Response tokens at most (EOS ends a sample earlier)",
                                    .key = "max_new_tokens", .bounds = {.min = 1, .max = kMaxCount},
                                    .doc = "response tokens at most; EOS (kept as the last token) ends a sample earlier"}),
      field<O>([](O& o) -> double& { return o.sampling.temperature; },
               {.flag = "--temperature", .type = number, .help = "Sampling temperature (0: greedy)",
                .key = "temperature", .bounds = {.min = 0, .max = 100},
                .doc = "0 is greedy"}),
      field<O>([](O& o) -> double& { return o.sampling.top_p; },
               {.flag = "--top-p", .type = number, .help = "Nucleus sampling mass (1: off)", .key = "top_p",
                .bounds = {.min = 0, .max = 1, .exclusive_min = true},
                .doc = "nucleus sampling mass (1: off); refused at `--temperature 0` (greedy: nothing drawn)"}),
      field<O>([](O& o) -> int& { return o.sampling.top_k; },
               {.flag = "--top-k", .type = integer, .help = "Keep the k most likely tokens (0: off)", .key = "top_k",
                .bounds = {.min = 0, .max = kMaxCount},
                .doc = "keep the k most likely tokens (0: off); refused at `--temperature 0` (greedy: nothing drawn)"}),
      field<O>([](O& o) -> std::uint64_t& { return o.sampling.seed; },
               {.flag = "--seed", .type = integer, .help = "Sampling seed; sample i draws from stream (seed, i)",
                .doc = "sample *i* draws from the random stream (S, *i*)"}),
      field<O>(&O::max_batch, {.flag = "--max-batch", .type = integer,
                               .help = "Sequences decoding together (KV-cache slots) per process", .key = "max_batch",
                               .bounds = {.min = 1, .max = kMaxCount},
                               .doc = "sequences decoding together (KV-cache slots), per process"}),
      field<O>(&O::kv_cache_mb,
               {.flag = "--kv-cache-mb", .type = number,
                .help = "KV-cache pool in MiB (0: the device's free memory after the weights less a reserve; on the "
                        "CPU 4096). Sequences that do not fit wait, or are preempted and resumed, with the same samples",
                .doc = "the paged KV cache's pool in MiB. 0: on a GPU, the device's free memory after the weights and "
                       "activations less a reserve (the larger of 1 GiB and 5% of the device); on the CPU, 4096. The pool "
                       "is never larger than `--max-batch` sequences at their longest (longest prompt + "
                       "`--max-new-tokens`). A pool that cannot hold one sequence at its longest exits 2 before any work, "
                       "with the figures. A smaller pool than the batch needs runs more sequences while they are short and "
                       "preempts when it fills (below); the samples are the same"}),
      custom<O>([](CLI::App& app, O& o, const OptionSpec& spec) { return app.add_flag("!" + spec.flag, o.cuda_graphs, spec.help); },
                {.flag = "--no-cuda-graphs", .type = boolean,
                 .help = "Run decode steps without CUDA graphs (also BRAID_CUDA_GRAPHS=0); the samples are the same",
                 .show_default = false,
                 .doc = "on a GPU, run decode steps without CUDA graphs (also `BRAID_CUDA_GRAPHS=0` in the environment); the "
                        "samples are the same"}),
      field<O>(&O::shard_size, {.flag = "--shard-size", .type = integer, .help = "Samples per output shard",
                                .key = "shard_size", .bounds = {.min = 1, .max = kMaxCount},
                                .doc = "samples per shard"}),
      field<O>(&O::prefix, {.flag = "--prefix", .type = text, .help = "Shard file name prefix",
                            .doc = "shard names `P-00000.h5`, `P-00001.h5`, ..."}),
      field<O>(&O::limit, {.flag = "--limit", .type = integer, .help = "Use only the first N prompts (0: all)",
                           .key = "limit", .bounds = {.min = 0, .max = kMaxCount},
                           .doc = "only the first N prompts of the file"}),
      field<O>(&O::first_prompt,
               {.flag = "--first-prompt", .type = integer,
                .help = "The prompt stream's position this call's batch starts at: position p is epoch p / N's line p "
                        "mod N (N the prompts read), in file order or, with --prompt-seed, each epoch's shuffle",
                .doc = "the stream position the batch starts at"}),
      field<O>(&O::batch_prompts, {.flag = "--batch-prompts", .type = integer,
                                   .help = "Prompts in this call's batch (with --overcommit: groups; 0: every prompt "
                                           "read)",
                                   .doc = "this call's prompts: B of them from the prompt stream (below); with `--overcommit` the batch's "
                                          "groups"}),
      field<O>(&O::prompt_seed, {.flag = "--prompt-seed", .type = integer,
                                 .help = "Shuffle each epoch of the prompt stream with this seed (default: file order)",
                                 .show_default = false,
                                 .doc = "each epoch of the stream in its own order, a shuffle seeded by (S, epoch)"}),
      field<O>(&O::threads, {.flag = "--threads", .type = integer,
                             .help = "CPU threads per process (0: all cores of this process)",
                             .bounds = {.min = 0, .max = kMaxCount},
                             .doc = "CPU backend threads per process (by default the process's CPU affinity: under mpirun, the cores the "
                                    "rank is bound to)"}),
      backend::device_entry<O>(&O::device, "where the model runs: `cpu`, or `cuda` / `cuda:N` (GPU N). Where braid was built without CUDA, no "
                        "GPU or driver is present, `--device cuda` exits 2 saying which; any other value exits 2 naming "
                        "`--device`"),
      backend::dtype_entry<O>(&O::dtype, "storage of the actor's weights: bf16 halves weight memory (the checkpoint's f32 values rounded to "
                        "nearest even; no f32 copy is kept); activations and sampling stay f32"),
      field<O>(&O::stats, {.flag = "--stats", .type = path,
                           .help = "Write braid.stagestats JSON here (call actor_gen: times, tokens, steps)",
                           .show_default = false,
                           .doc = "`braid.stagestats` JSON (below)"}),
      field<O>(&O::tp, {.flag = "--tp", .type = integer,
                        .help = "Under mpirun: tensor-parallel ranks per device (the model split N ways); the ranks "
                                "form -np / N devices, which take the shards as ranks do at --tp 1",
                        .doc = "under mpirun: tensor-parallel ranks per device, the actor split N ways (below); `-np` must be a "
                               "multiple of N"}),
      field<O>(&O::migrate_threshold,
               {.flag = "--migrate-threshold", .type = text,
                .help = "Under mpirun: when fewer than this many samples are unfinished over all ranks (a count, or a "
                        "fraction of the run's samples like 0.2), move them to --migrate-to ranks and free the others "
                        "(default: off)",
                .show_default = false,
                .doc = "under mpirun: a count (`12`) or a fraction of the run's samples (`0.2`)"}),
      field<O>(&O::migrate_to, {.flag = "--migrate-to", .type = integer,
                                .help = "Ranks that take the long tail over (the ones with the most left)",
                                .doc = "ranks (devices with `--tp`) that take the long tail over; only with "
                                       "`--migrate-threshold`"}),
      field<O>(&O::overcommit,
               {.flag = "--overcommit", .type = integer,
                .help = "Overcommit and defer (OPPO): start this many groups (prompts x --samples-per-prompt) beyond "
                        "the batch of one group per prompt read; stop when the batch is whole and write the rest, "
                        "unfinished, to --deferred-out for the next iteration (prompts then run as a stream across "
                        "iterations; -1: off)",
                .doc = "OPPO's overcommit and defer (docs/overlap.md): the prompts become a stream across iterations, D "
                       "groups (prompts × `--samples-per-prompt`) start beyond the batch of one group per prompt read, "
                       "generation stops when the batch is whole, and what is left goes to `--deferred-out`; one process "
                       "only (not under mpirun, not with `--migrate-threshold`)"}),
      field<O>(&O::resume_deferred, {.flag = "--resume-deferred", .type = path,
                                     .help = "With --overcommit: the previous iteration's deferred file; its samples "
                                             "are resumed first",
                                     .show_default = false,
                                     .doc = "with `--overcommit`: the previous iteration's `braid.deferred` file, resumed first (docs/formats.md)"}),
      field<O>(&O::deferred_out, {.flag = "--deferred-out", .type = path,
                                  .help = "With --overcommit: where the samples left out of the batch go",
                                  .show_default = false,
                                  .doc = "with `--overcommit` (required there): where the samples left out of the batch go, written "
                                         "atomically after the last shard"}),
  };
  return s;
}

const cli::OptionSchema<TokenizeOptions>& tokenize_schema() {
  using T = TokenizeOptions;
  // A switch that turns a field off.
  const auto off = [](bool T::*member, OptionSpec spec) {
    return custom<T>([member](CLI::App& app, T& o, const OptionSpec& s) { return app.add_flag("!" + s.flag, o.*member, s.help); },
                     std::move(spec), [](T&) { return std::string("off"); });
  };
  static const cli::OptionSchema<T> s = {
      custom<T>([](CLI::App& app, T& o, const OptionSpec& spec) {
                  return app.add_option_function<std::string>(spec.flag, [&o](const std::string& v) { o.text = v; }, spec.help);
                },
                {.flag = "text", .type = text, .help = "A text, encoded with the special tokens transformers' tokenizer(text) adds",
                 .show_default = false}),
      field<T>(&T::tokenizer, {.flag = "--tokenizer", .type = path, .help = "byte, a tokenizer.json or a Hugging Face folder"}),
      field<T>(&T::prompts, {.flag = "--prompts", .type = path,
                             .help = "A prompt file (JSON Lines: prompt, text, tokens or messages)", .show_default = false}),
      field<T>(&T::chat, {.flag = "--chat", .type = path,
                          .help = "JSON Lines of conversations, rendered by tokenizer_config.json's chat template",
                          .show_default = false}),
      custom<T>([](CLI::App& app, T& o, const OptionSpec& spec) { return app.add_option(spec.flag, o.ids, spec.help)->delimiter(','); },
                {.flag = "--decode", .type = integers, .help = "Token ids to decode (comma-separated)", .show_default = false}),
      off(&T::specials, {.flag = "--no-specials", .type = boolean, .help = "TEXT: no BOS or other special tokens around it",
                         .show_default = false}),
      off(&T::generation_prompt,
          {.flag = "--no-generation-prompt", .type = boolean,
           .help = "--chat: render without the generation prompt, and show what training learns (\"learnt\" byte ranges, "
                   "\"loss_mask\" per token)",
           .show_default = false}),
      field<T>(&T::tools, {.flag = "--tools", .type = path,
                           .help = "--chat, --prompts: a JSON file of tool schemas for lines without \"tools\"",
                           .show_default = false}),
      field<T>(&T::chat_template_kwargs,
               {.flag = "--chat-template-kwargs", .type = text,
                .help = "--chat, --prompts: template keyword arguments as a JSON object, e.g. '{\"enable_thinking\": false}' "
                        "(a line's own \"chat_template_kwargs\" win)",
                .show_default = false}),
  };
  return s;
}

}  // namespace braid::gen
