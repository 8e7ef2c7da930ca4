#include "tokenizer/utf8.hpp"

namespace braid::tok::utf8 {

namespace {
bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }
}  // namespace

std::size_t char_length(std::string_view text, std::size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  std::size_t want = 1;
  if (lead >= 0xF0 && lead <= 0xF4) want = 4;
  else if (lead >= 0xE0) want = lead < 0xF0 ? 3 : 1;
  else if (lead >= 0xC2) want = 2;
  if (want == 1 || pos + want > text.size()) return 1;
  for (std::size_t k = 1; k < want; ++k) {
    if (!is_continuation(static_cast<unsigned char>(text[pos + k]))) return 1;
  }
  return want;
}

std::vector<std::string_view> chars(std::string_view text) {
  std::vector<std::string_view> out;
  out.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t len = char_length(text, pos);
    out.push_back(text.substr(pos, len));
    pos += len;
  }
  return out;
}

char32_t decode_at(std::string_view text, std::size_t pos, std::size_t& len) {
  len = char_length(text, pos);
  const auto b0 = static_cast<unsigned char>(text[pos]);
  if (len == 1) return b0;
  char32_t cp = b0 & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  for (std::size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[pos + k]) & 0x3F);
  return cp;
}

std::string encode(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

}  // namespace braid::tok::utf8
