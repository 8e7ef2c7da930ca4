// braid-generate: actor rollouts for a prompt file, written as sample shards that
// stream out as they complete (each path on stdout at once). lib/generate/stage.hpp.
// With `-- SCORE-OPTIONS` the ranks score the shards themselves (lib/fuse).
#include "backend/device_option.hpp"
#include "backend/dtype_option.hpp"
#include "core/cli.hpp"
#include "fuse/fused_rollout.hpp"
#include "generate/migrate.hpp"
#include "generate/stage.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  braid::gen::RankGroup ranks(&argc, &argv);
  braid::gen::StageOptions o;
  std::string cmdline = "braid-generate";
  for (int i = 1; i < argc; ++i) cmdline += std::string(" ") + argv[i];
  o.created_by = cmdline;
  auto split = braid::fuse::split_at_double_dash(argc, argv);

  CLI::App app{
      "Generate actor rollouts for every prompt x --samples-per-prompt and write them as sample shards "
      "(DIR/PREFIX-00000.h5, ...). Shard k holds the samples with ids [k*shard_size, (k+1)*shard_size) "
      "(sample_id = prompt_index * samples_per_prompt + k) and is written the moment its last sample finishes; "
      "its path is then printed on stdout, one line, so that `braid-generate ... | braid-score - ...` scores "
      "while generation goes on. A rerun skips complete shards. Under mpirun the shards are dealt to the ranks "
      "and --migrate-threshold moves the long tail to a few of them (RLHFuse section 4.2). "
      "Fused: `braid-generate OPTIONS -- SCORE-OPTIONS` (SCORE-OPTIONS: braid-score's, without the shard list) "
      "scores every shard in these processes as generation frees each rank, and prints the scored shards' paths "
      "instead (docs/fusion.md).",
      "braid-generate"};
  app.add_option("--actor", o.actor, "Policy checkpoint (a .h5 file or the stem of its stage files); needs an LM head")
      ->required();
  app.add_option("--prompts", o.prompts,
                 "JSON Lines, one prompt a line: {\"text\": \"...\"} (with the special tokens the tokenizer puts "
                 "around a text), {\"tokens\": [ids]} or {\"messages\": [...]} (rendered by the chat template), "
                 "optional \"id\"; '-' for stdin")
      ->required();
  app.add_option("-o,--output", o.out_dir, "Folder for the shards (created if missing)")->required();
  app.add_option("--tokenizer", o.tokenizer, "'byte' or a tokenizer.json (or its folder)")->capture_default_str();
  app.add_option("--tools", o.tools, "A JSON file of tool schemas for the conversations (\"messages\" lines) without \"tools\"");
  app.add_option("--chat-template-kwargs", o.chat_template_kwargs,
                 "A JSON object of chat-template keyword arguments, e.g. '{\"enable_thinking\": false}' (a line's own "
                 "\"chat_template_kwargs\" win)");
  app.add_option("--samples-per-prompt", o.samples_per_prompt, "Samples of each prompt (a GRPO group)")
      ->capture_default_str();
  app.add_option("--max-new-tokens", o.max_new_tokens, "Response tokens at most (EOS ends a sample earlier)")
      ->capture_default_str();
  app.add_option("--temperature", o.sampling.temperature, "Sampling temperature (0: greedy)")->capture_default_str();
  app.add_option("--top-p", o.sampling.top_p, "Nucleus sampling mass (1: off)")->capture_default_str();
  app.add_option("--top-k", o.sampling.top_k, "Keep the k most likely tokens (0: off)")->capture_default_str();
  app.add_option("--seed", o.sampling.seed, "Sampling seed; sample i draws from stream (seed, i)")->capture_default_str();
  app.add_option("--max-batch", o.max_batch, "Sequences decoding together (KV-cache slots) per process")
      ->capture_default_str();
  app.add_option("--kv-cache-mb", o.kv_cache_mb,
                 "KV-cache pool in MiB (0: the device's free memory after the weights less a reserve; on the CPU "
                 "4096). Sequences that do not fit wait, or are preempted and resumed, with the same samples")
      ->capture_default_str();
  app.add_flag("!--no-cuda-graphs", o.cuda_graphs,
               "Run decode steps without CUDA graphs (also BRAID_CUDA_GRAPHS=0); the samples are the same");
  app.add_option("--shard-size", o.shard_size, "Samples per output shard")->capture_default_str();
  app.add_option("--prefix", o.prefix, "Shard file name prefix")->capture_default_str();
  app.add_option("--limit", o.limit, "Use only the first N prompts (0: all)")->capture_default_str();
  app.add_option("--first-prompt", o.first_prompt,
                 "The prompt stream's position this call's batch starts at: position p is epoch p / N's line p mod N "
                 "(N the prompts read), in file order or, with --prompt-seed, each epoch's shuffle")
      ->capture_default_str();
  app.add_option("--batch-prompts", o.batch_prompts,
                 "Prompts in this call's batch (with --overcommit: groups; 0: every prompt read)")
      ->capture_default_str();
  app.add_option("--prompt-seed", o.prompt_seed, "Shuffle each epoch of the prompt stream with this seed (default: "
                                                 "file order)");
  app.add_option("--threads", o.threads, "CPU threads per process (0: all cores of this process)")
      ->capture_default_str();
  braid::backend::add_device_option(app, o.device);
  braid::backend::add_dtype_option(app, o.dtype);
  app.add_option("--stats", o.stats, "Write braid.stagestats JSON here (call actor_gen: times, tokens, steps)");
  app.add_option("--tp", o.tp,
                 "Under mpirun: tensor-parallel ranks per device (the model split N ways); the ranks form -np / N "
                 "devices, which take the shards as ranks do at --tp 1")
      ->capture_default_str();
  app.add_option("--migrate-threshold", o.migrate_threshold,
                 "Under mpirun: when fewer than this many samples are unfinished over all ranks (a count, or a "
                 "fraction of the run's samples like 0.2), move them to --migrate-to ranks and free the others "
                 "(default: off)");
  app.add_option("--migrate-to", o.migrate_to, "Ranks that take the long tail over (the ones with the most left)")
      ->capture_default_str();

  app.add_option("--overcommit", o.overcommit,
                 "Overcommit and defer (OPPO): start this many groups (prompts x --samples-per-prompt) beyond the batch "
                 "of one group per prompt read; stop when the batch is whole and write the rest, unfinished, to "
                 "--deferred-out for the next iteration (prompts then run as a stream across iterations; -1: off)")
      ->capture_default_str();
  app.add_option("--resume-deferred", o.resume_deferred,
                 "With --overcommit: the previous iteration's deferred file; its samples are resumed first");
  app.add_option("--deferred-out", o.deferred_out, "With --overcommit: where the samples left out of the batch go");
  const int rc = braid::cli::run(app, static_cast<int>(split.before.size()), split.before.data(), [&] {
    ranks.split_tp(o.tp, o.device);
    if (!split.fused) return braid::gen::run_generate_stage(o, ranks);
    return braid::fuse::run_fused_rollout(o, braid::fuse::parse_score_options(split.after, cmdline), ranks);
  });
  if (rc != 0 && ranks.world_size() > 1) {
    // Leave without finalising MPI: the other ranks may be waiting in a collective for
    // this one, and mpirun ends the whole job when a rank exits without finalizing.
    std::fflush(nullptr);
    std::_Exit(rc);
  }
  return rc;
}
