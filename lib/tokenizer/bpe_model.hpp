// The "model" part of a Hugging Face BPE tokenizer.json: vocabulary, ranked
// merges, and what to do with characters the vocabulary lacks (byte fallback
// to "<0xNN>" tokens as in Llama-2, or an unknown token).
#pragma once

#include "core/json.hpp"
#include "tokenizer/tokenizer.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace braid::tok {

class BpeModel {
 public:
  BpeModel() = default;
  // Reads doc["model"]; problems are recorded in checker (field names "model.*").
  BpeModel(const json& model, Checker& checker);

  // Ids of one pre-tokenized piece (already in the vocabulary's alphabet); with
  // spans, each id's [begin, end) bytes of the piece too.
  void tokenize(std::string_view piece, std::vector<TokenId>& out,
                std::vector<std::pair<std::size_t, std::size_t>>* spans = nullptr) const;

  // Adds a token that is not in the model's vocabulary (an added token).
  void add_token(const std::string& content, TokenId id);

  const std::string* token_of(TokenId id) const;
  const TokenId* id_of(std::string_view token) const;
  TokenId max_id() const noexcept { return static_cast<TokenId>(id_to_token_.size()) - 1; }
  bool byte_fallback() const noexcept { return byte_fallback_; }
  // The tokenizer file this model was read from, for errors at encode and decode time.
  const std::string& file() const noexcept { return file_; }

 private:
  struct Merge {
    int rank;
    TokenId merged;
  };
  static std::uint64_t pair_key(TokenId left, TokenId right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
  }

  std::unordered_map<std::string, TokenId> vocab_;
  std::vector<std::string> id_to_token_;
  std::unordered_map<std::uint64_t, Merge> merges_;  // (left id, right id) -> rank, merged id
  TokenId byte_ids_[256] = {};
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  bool fuse_unk_ = false;
  TokenId unk_ = -1;
  std::string file_;
};

}  // namespace braid::tok
