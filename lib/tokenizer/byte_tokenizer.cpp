#include "tokenizer/byte_tokenizer.hpp"

#include <fmt/format.h>

namespace braid::tok {

std::vector<TokenId> ByteTokenizer::encode(std::string_view text) const {
  std::vector<TokenId> ids;
  ids.reserve(text.size());
  for (unsigned char c : text) ids.push_back(static_cast<TokenId>(c));
  return ids;
}

Encoding ByteTokenizer::encode_with_offsets(std::string_view text) const {
  Encoding e{encode(text), {}};
  e.spans.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) e.spans.push_back({i, i + 1});
  return e;
}

std::string ByteTokenizer::decode(std::span<const TokenId> ids, bool skip_special) const {
  std::string text;
  text.reserve(ids.size());
  for (TokenId id : ids) {
    if (id >= 0 && id < 256) {
      text.push_back(static_cast<char>(id));
    } else if (!skip_special) {
      if (id == kBos) text += "<|bos|>";
      else if (id == kEos) text += "<|eos|>";
      else if (id == kPad) text += "<|pad|>";
      else text += fmt::format("<|id:{}|>", id);
    }
  }
  return text;
}

}  // namespace braid::tok
