// Sample shards: a SampleBatch in one HDF5 file (format "braid.samples",
// version 1), written atomically with a completeness sentinel, and read back
// with every invariant checked. Stages never modify a shard in place: score
// reads one, adds arrays and writes a new one.
//
//   write_sample_shard("gen-0003.h5", batch, {.policy_step = 12, .created_by = cmdline});
//   SampleShard s = read_sample_shard("gen-0003.h5");
//   s.batch.values = critic_values(s.batch);  ...
//   s.meta.created_by = cmdline;
//   write_sample_shard("scored-0003.h5", s.batch, s.meta);
//
// Every array carries a checksum (h5.hpp), written with it and verified by
// every read; a damaged array is an InputError naming the file and the array.
// Shards written before checksums read unverified.
// The layout on disk is documented in docs/formats.md. HDF5 (Debian's build)
// is not thread-safe: read and write shards from one thread at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "io/sample_batch.hpp"

namespace braid::io {

inline constexpr const char* kSamplesFormat = "braid.samples";
inline constexpr int kSamplesVersion = 1;

struct SampleShardMeta {
  std::int64_t policy_step = 0;  // the actor weights' training step that generated the samples
  std::string created_by;        // command line of the writer
  std::string config;            // the run's configuration as JSON text ("" = none)
  std::string made_from;         // what made it (io/fingerprint.hpp), JSON text ("" = not recorded)
};

struct SampleShard {
  SampleShardMeta meta;
  SampleBatch batch;
};

// Validates the batch (std::invalid_argument listing the problems: a bug in the
// caller), then writes it under a temporary name and renames it onto `path`.
void write_sample_shard(const std::filesystem::path& path, const SampleBatch& batch, const SampleShardMeta& meta);

// Reads a whole shard. InputError naming the file and listing every problem for
// a file that is missing, not HDF5, truncated, of another format or a newer
// version, unfinished, whose arrays break the layout, or whose checksums do
// not match.
SampleShard read_sample_shard(const std::filesystem::path& path);

// What a shard holds, learned by checking its header and layout without reading
// the token data (offsets and prompt lengths are read, and their checksums
// verified). Same errors as reading.
struct SampleShardInfo {
  SampleShardMeta meta;
  int version = 0;
  std::int64_t sequences = 0;
  std::int64_t tokens = 0;
  std::int64_t longest = 0;               // tokens of the longest sequence
  bool has_reward = false;
  std::vector<std::string> token_arrays;  // present per-token datasets ("logprobs/actor", ...)
  std::vector<std::string> other_datasets;  // datasets braid does not know (kept by nobody)
};
SampleShardInfo probe_sample_shard(const std::filesystem::path& path);

}  // namespace braid::io
