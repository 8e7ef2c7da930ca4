// braid export's and braid import's options, declared once (core/option_schema.hpp):
// tools/braid/cmd_export.cpp and cmd_import.cpp add them and `braid options braid-export` /
// `braid-import` print them.
#pragma once

#include "core/option_schema.hpp"
#include "hf/export_tokenizer.hpp"

namespace braid::hf {

struct ExportCommand {
  std::vector<std::string> shards;   // a checkpoint's name, or its files
  std::string out;
  std::string dtype = "f32";         // f32 | bf16
  std::string tokenizer;
  std::string value_head = "auto";   // auto | sequence | token
  bool merge = false;                // a LoRA adapter file: its base with the adapters merged
  GenerationDefaults generation;
};

struct ImportCommand {
  std::string dir;
  std::string out;
  std::string base;                  // a PEFT adapter folder's base checkpoint
  int stages = 1;
};

const cli::OptionSchema<ExportCommand>& export_schema();
const cli::OptionSchema<ImportCommand>& import_schema();

}  // namespace braid::hf
