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

namespace {

// Length of the valid UTF-8 character at text[i], 0 if none starts there.
std::size_t utf8_char(std::string_view text, std::size_t i) {
  const auto b = static_cast<unsigned char>(text[i]);
  const std::size_t n = b >= 0xF0 && b <= 0xF4 ? 4 : b >= 0xE0 ? (b < 0xF0 ? 3 : 0) : b >= 0xC2 && b < 0xE0 ? 2 : 0;
  if (n == 0 || i + n > text.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return 0;
  }
  const auto b1 = static_cast<unsigned char>(text[i + 1]);
  if ((b == 0xE0 && b1 < 0xA0) || (b == 0xED && b1 >= 0xA0) || (b == 0xF0 && b1 < 0x90) || (b == 0xF4 && b1 >= 0x90)) {
    return 0;  // overlong, surrogate or beyond U+10FFFF
  }
  return n;
}

}  // namespace

std::string display_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else if (const std::size_t n = c >= 0x80 ? utf8_char(text, i) : 0; n > 0) {
      out.append(text.substr(i, n));
      i += n;
      continue;
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
    ++i;
  }
  return out;
}

}  // namespace braid::io
