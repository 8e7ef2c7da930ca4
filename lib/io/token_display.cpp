#include "io/token_display.hpp"

#include <fmt/format.h>

namespace braid::io {
namespace {
// The byte tokenizer's special ids (tokenizer/byte_tokenizer.hpp).
constexpr std::int32_t kBos = 256;
constexpr std::int32_t kEos = 257;
constexpr std::int32_t kPad = 258;
}  // namespace

std::string display_tokens(std::span<const std::int32_t> tokens) {
  std::string out;
  out.reserve(tokens.size());
  for (auto t : tokens) {
    if (t == kBos) {
      out += "<|bos|>";
    } else if (t == kEos) {
      out += "<|eos|>";
    } else if (t == kPad) {
      out += "<|pad|>";
    } else if (t < 0 || t >= 256) {
      out += fmt::format("<|id:{}|>", t);
    } else if (t == '\n') {
      out += "\\n";
    } else if (t == '\t') {
      out += "\\t";
    } else if (t == '\\') {
      out += "\\\\";
    } else if (t >= 0x20 && t < 0x7f) {
      out.push_back(static_cast<char>(t));
    } else {
      out += fmt::format("\\x{:02x}", t);
    }
  }
  return out;
}

}  // namespace braid::io
