// What is in a braid file, for people and for scripts: `braid inspect` prints
// the JSON summary made here (--json) or its text rendering; `braid check`
// uses check_file. The kind of file is found from its content: an HDF5 file's
// "format" attribute (braid.samples, braid.weights, braid.deferred) or a JSON file's "format"
// key (braid.schedule, braid.plan, ...).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/json.hpp"

namespace braid::io {

struct InspectOptions {
  std::size_t samples_shown = 3;  // sample shards: how many sequences to decode
  // Sample shards: decode with this tokenizer ("byte", a tokenizer.json or its folder;
  // a bad one is an InputError). "": the one the shard's meta.config records
  // ("tokenizer", as braid-generate was given it) when it can be loaded, else the
  // byte display (token_display.hpp), saying why in "decoded_with".
  std::string tokenizer;
};

// The summary of one file ("-": JSON on stdin). InputError naming the file when
// it is not a valid braid file. What is wrong with a file that can still be summarised
// (a weight shard's NaN tensors) is listed under "problems".
ordered_json inspect_file(const std::string& path, const InspectOptions& options = {});

// The summary as text lines for a terminal.
std::string render_inspect_text(const ordered_json& summary);

// nullopt when `path` is a good, complete braid file; otherwise why not (a
// message naming the file). An HDF5 file's datasets are all read and compared
// with their checksums; every mismatch is listed in the one message. Notes that
// are no failure (datasets without a checksum: an older file) go to `notes`.
std::optional<std::string> check_file(const std::string& path, std::vector<std::string>* notes = nullptr);

// Whether `path` is an HDF5 file of format braid.weights (weights or optimizer state).
bool is_weight_shard(const std::string& path);

}  // namespace braid::io
