// The default tokenizer: one token per byte, so any text round-trips exactly and
// no vocabulary file is needed.
//
//   ids 0..255   the bytes 0x00..0xFF
//   id  256      BOS  "<|bos|>"
//   id  257      EOS  "<|eos|>"
//   id  258      PAD  "<|pad|>"
//   vocab_size   259 (a model may have more rows; ids above 258 decode as "<|id:N|>")
#pragma once

#include "tokenizer/tokenizer.hpp"

namespace braid::tok {

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr TokenId kBos = 256;
  static constexpr TokenId kEos = 257;
  static constexpr TokenId kPad = 258;
  static constexpr std::int32_t kVocabSize = 259;

  std::vector<TokenId> encode(std::string_view text) const override;
  Encoding encode_with_offsets(std::string_view text) const override;
  std::string decode(std::span<const TokenId> ids, bool skip_special = true) const override;
  std::int32_t vocab_size() const override { return kVocabSize; }
  std::optional<TokenId> bos() const override { return kBos; }
  std::optional<TokenId> eos() const override { return kEos; }
  std::optional<TokenId> pad() const override { return kPad; }
  std::vector<TokenId> specials_before() const override { return {kBos}; }
  std::vector<TokenId> specials_after() const override { return {}; }
  std::string describe() const override { return "byte"; }
};

}  // namespace braid::tok
