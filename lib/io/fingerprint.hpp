// What made a file: the tool, the options that shape the result and the files it read,
// each input by the digest of its content. Every file braid writes records it (HDF5: the
// root attribute `made_from`, JSON text; a JSON output: its "made_from" key), and a tool
// that would reuse or skip an existing output compares the record with what it would make
// now: equal fingerprints, the output is kept; otherwise it is refused naming what differs
// (or made again where the user asked for that). docs/formats.md, "What made a file".
//
//   io::MadeFrom m("braid-train ppo");
//   m.set_options(cli::option_values(*sub, {...}));       // {"--lr": "1e-05", ...}
//   m.add_input("actor", checkpoint_files);                 // each file's digest taken now
//   m.set_output("actor");
//   meta.made_from = m.to_json().dump();                    // stored with the output
//   ...
//   for (auto& line : made_from_differences(recorded, m.to_json())) ...   // "option --lr: 1e-05 there, 2e-05 now"
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "core/made_from.hpp"

namespace braid::io {

// The digest of a file's content, "xxh3-64:<16 hex digits>": for a sealed braid HDF5 file
// its seal's hash of the bytes after the seal block (read from the seal, without a pass
// over the file: every reader verifies the seal anyway); for any other file the XXH3-64 of
// its bytes. A folder (a tokenizer's): the digest of its files' names and digests, weight
// files (.safetensors, .bin, .pt, .h5, .gguf) left out. InputError naming the path when
// it cannot be read.
std::string content_digest(const std::filesystem::path& path);

class MadeFrom {
 public:
  // tool: the program and its mode ("braid-train ppo", "braid-score").
  explicit MadeFrom(std::string tool);

  // The options that shape the result, name -> value as text (cli::option_values), and
  // which of them were given (the rest held their defaults; cli::options_given), so that a
  // driver can compare them with a command line it would run.
  void set_options(ordered_json options, std::vector<std::string> given = {});
  void set_option(const std::string& name, const std::string& value);
  // An input read from files (a checkpoint's stage files, shards): their digests now.
  void add_input(const std::string& role, const std::vector<std::filesystem::path>& files);
  // An input given by name, not as a file ("byte" for the byte tokenizer).
  void add_input_value(const std::string& role, const std::string& value);
  // An input read from standard input: its content cannot be read again to compare, so a
  // record holding one never equals another (made_from_differences says so).
  void add_input_stdin(const std::string& role);
  // A file named on a command line: "-" is standard input (add_input_stdin), else the file.
  void add_input_path(const std::string& role, const std::string& path);
  // A tokenizer as the tools take it: "byte" (braid's byte tokenizer, a value), else its
  // tokenizer.json or folder by content.
  void add_tokenizer(const std::string& tokenizer);
  // Which of the tool's outputs this record is for ("actor", "critic").
  void set_output(const std::string& role);

  // {"tool", "output", "options": {...}, "given": [...], "inputs": {role: [{"file", "digest"}...]
  //  | "value"}, "fingerprint": "xxh3-64:..."}
  ordered_json to_json() const;
  std::string fingerprint() const;

 private:
  ordered_json doc_;
};

// The record's fingerprint and its reading back (core/made_from.hpp), under their io names.
using braid::fingerprint_of;
using braid::parse_made_from;

// What differs between the record of an existing output (`there`) and the one it would get
// now: one line per difference ("option --lr: 1e-05 there, 2e-05 now", "input data:
// data.jsonl differs (xxh3-64:... there, xxh3-64:... now)"); empty when the fingerprints are
// equal.
std::vector<std::string> made_from_differences(const ordered_json& there, const ordered_json& now);

}  // namespace braid::io
