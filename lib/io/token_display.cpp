#include "io/byte_tokenizer.hpp"

#include <fmt/format.h>

namespace braid::io::byte_tokenizer {

std::vector<std::int32_t> encode(std::string_view text, bool add_bos) {
  std::vector<std::int32_t> out;
  out.reserve(text.size() + (add_bos ? 1 : 0));
  if (add_bos) out.push_back(kBos);
  for (unsigned char c : text) out.push_back(c);
  return out;
}

std::string decode(std::span<const std::int32_t> tokens) {
  std::string out;
  out.reserve(tokens.size());
  for (auto t : tokens) {
    if (t >= 0 && t < 256) out.push_back(static_cast<char>(t));
  }
  return out;
}

std::string decode_for_display(std::span<const std::int32_t> tokens) {
  std::string out;
  out.reserve(tokens.size());
  for (auto t : tokens) {
    if (t == kBos) {
      out += "<bos>";
    } else if (t == kEos) {
      out += "<eos>";
    } else if (t == kPad) {
      out += "<pad>";
    } else if (t < 0 || t >= 256) {
      out += fmt::format("<id:{}>", t);
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

}  // namespace braid::io::byte_tokenizer
