#include "tokenizer/byte_level.hpp"

#include "tokenizer/utf8.hpp"

#include <array>
#include <unordered_map>

namespace braid::tok::byte_level {

namespace {

struct Table {
  std::array<std::string, 256> to_char;
  std::unordered_map<char32_t, unsigned char> to_byte;

  Table() {
    // Printable Latin-1 bytes stand for themselves; the rest are shifted to
    // U+0100 and up in byte order (the table of GPT-2's bytes_to_unicode()).
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t cp = printable ? static_cast<char32_t>(b) : next++;
      to_char[b] = utf8::encode(cp);
      to_byte[cp] = static_cast<unsigned char>(b);
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

std::string encode(std::string_view raw) {
  const Table& t = table();
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char c : raw) out += t.to_char[c];
  return out;
}

std::string decode(std::string_view mapped) {
  const Table& t = table();
  std::string out;
  out.reserve(mapped.size());
  for (std::size_t pos = 0; pos < mapped.size();) {
    std::size_t len = 0;
    const char32_t cp = utf8::decode_at(mapped, pos, len);
    auto it = t.to_byte.find(cp);
    if (len > 1 || cp < 0x80) {
      if (it != t.to_byte.end()) out.push_back(static_cast<char>(it->second));
      else out.append(mapped.substr(pos, len));
    } else {
      out.append(mapped.substr(pos, len));  // a stray invalid byte
    }
    pos += len;
  }
  return out;
}

}  // namespace braid::tok::byte_level
