// The text <-> token id interface every braid tool uses, and the one place that
// picks an implementation: "byte" (the default, byte_tokenizer.hpp) or a Hugging
// Face tokenizer.json (hf_tokenizer.hpp).
//
// encode() never adds special tokens; encode_text() adds those transformers'
// tokenizer(text) adds (specials_before() and specials_after()).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace braid::tok {

using TokenId = std::int32_t;
// The largest id a tokenizer file may give a token: one below the largest vocab_size a model
// config may have (2^24, lib/model). A tokenizer keeps a table indexed by id, so an id of 1e9
// would ask for tens of GB before anything could check it against a model.
inline constexpr TokenId kMaxTokenId = (TokenId{1} << 24) - 1;

// The bytes [begin, end) of the encoded text a token stands for (Hugging Face's
// offsets): characters a normalizer adds (a SentencePiece "▁" in front) count as the
// character they were added to.
struct TokenSpan {
  std::size_t begin = 0, end = 0;
};

struct Encoding {
  std::vector<TokenId> ids;
  std::vector<TokenSpan> spans;  // one per id
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual std::vector<TokenId> encode(std::string_view text) const = 0;
  // The same ids, with the text each covers.
  virtual Encoding encode_with_offsets(std::string_view text) const = 0;
  // skip_special drops BOS/EOS/PAD and other special tokens from the text.
  virtual std::string decode(std::span<const TokenId> ids, bool skip_special = true) const = 0;

  // One more than the largest id this tokenizer can produce (a model's
  // vocab_size must be at least this).
  virtual std::int32_t vocab_size() const = 0;
  // The tokenizer's BOS, EOS (the end of a generation and of an SFT example) and PAD.
  virtual std::optional<TokenId> bos() const = 0;
  virtual std::optional<TokenId> eos() const = 0;
  virtual std::optional<TokenId> pad() const = 0;
  // The special tokens put before and after a text's ids by transformers'
  // tokenizer(text) (add_special_tokens=True): [BOS] and [] for most models, [] and []
  // for Qwen's.
  virtual std::vector<TokenId> specials_before() const = 0;
  virtual std::vector<TokenId> specials_after() const = 0;
  // A short description for logs ("byte", "hf-bpe(byte-level) 50257 tokens").
  virtual std::string describe() const = 0;
};

// A text's ids with the special tokens transformers' tokenizer(text) adds around them.
std::vector<TokenId> encode_text(const Tokenizer& tok, std::string_view text);

// prompt + response encoded as one text, so that the tokens at the boundary are those
// Hugging Face makes of the whole (no SentencePiece "▁" of a response encoded on its
// own). prompt_tokens counts the leading tokens that cover prompt text only: the
// response starts at the first token that covers any of its text.
struct JoinedEncoding {
  std::vector<TokenId> ids;
  std::size_t prompt_tokens = 0;
};
JoinedEncoding encode_joined(const Tokenizer& tok, std::string_view prompt, std::string_view response);

// "byte" -> the byte tokenizer; anything else is read as a tokenizer.json path
// (a folder is taken to hold one). Bad files throw InputError naming the field.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec);

}  // namespace braid::tok
