// GPT-2's byte <-> printable character table, which byte-level BPE vocabularies
// (GPT-2, Llama-3, Qwen) are written in: each of the 256 bytes is one visible
// Unicode character ("Ġ" for the space, "Ċ" for newline).
#pragma once

#include <string>
#include <string_view>

namespace braid::tok::byte_level {

// Every byte of raw mapped to its character (UTF-8).
std::string encode(std::string_view raw);
// The inverse; characters outside the table pass through unchanged.
std::string decode(std::string_view mapped);

}  // namespace braid::tok::byte_level
