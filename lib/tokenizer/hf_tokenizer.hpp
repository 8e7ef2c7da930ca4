// A Hugging Face tokenizer.json with a BPE model, in its two common shapes:
//
//  * byte-level BPE (GPT-2, Llama-3): pre_tokenizer ByteLevel, or a Split regex
//    followed by ByteLevel; decoder ByteLevel.
//  * sentencepiece-style BPE (Llama-2): normalizer Prepend("▁") + Replace(" ", "▁")
//    or a Metaspace pre_tokenizer; byte_fallback to <0xNN>; decoder Replace /
//    ByteFallback / Fuse / Strip or Metaspace.
//
// Added tokens (<|begin_of_text|>, <s>, ...) are matched literally in the text
// before anything else, longest first. Their lstrip/rstrip/single_word flags are
// ignored. encode() adds no special tokens (tokenizer.hpp); specials_before() and
// specials_after() say which transformers' tokenizer(text) adds, decided as
// transformers decides them: the post_processor of tokenizer.json (TemplateProcessing,
// also inside a Sequence; Bert/RobertaProcessing), except for the tokenizer classes
// whose fast tokenizer rebuilds it (Llama, Gemma, CodeLlama): there add_bos_token
// (default true) and add_eos_token (default false) of tokenizer_config.json with its
// bos_token and eos_token. bos(), eos() and pad() are the tokens tokenizer_config.json
// names (null or absent: none); no token is ever found by its name in the vocabulary.
// Unicode normalizers (NFC, NFKC, NFD, NFKD) run on ICU; there invalid UTF-8 in the
// text becomes U+FFFD, as it would on its way into HF's Rust strings.
// Unsupported components (Lowercase, WordPiece, ...) are refused with an
// InputError naming the field, rather than tokenizing differently from HF.
#pragma once

#include "core/json.hpp"
#include "tokenizer/bpe_model.hpp"
#include "tokenizer/regex.hpp"
#include "tokenizer/tokenizer.hpp"

#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

namespace braid::tok {

class HfTokenizer final : public Tokenizer {
 public:
  // Reads tokenizer.json at path, and the special tokens of the tokenizer_config.json
  // beside it when there is one.
  static std::unique_ptr<HfTokenizer> load(const std::string& path);
  // origin names the document in error messages.
  HfTokenizer(const json& doc, const std::string& origin);

  std::vector<TokenId> encode(std::string_view text) const override;
  Encoding encode_with_offsets(std::string_view text) const override;
  std::string decode(std::span<const TokenId> ids, bool skip_special = true) const override;
  std::int32_t vocab_size() const override { return model_.max_id() + 1; }
  std::optional<TokenId> bos() const override { return bos_; }
  std::optional<TokenId> eos() const override { return eos_; }
  std::optional<TokenId> pad() const override { return pad_; }
  std::vector<TokenId> specials_before() const override { return before_; }
  std::vector<TokenId> specials_after() const override { return after_; }
  std::string describe() const override;

  // The special tokens of a tokenizer_config.json (cfg) read from `origin`: bos_token,
  // eos_token, pad_token, and for the classes that rebuild the post-processor,
  // add_bos_token and add_eos_token. InputError naming the field when it names a token
  // the tokenizer does not have.
  void read_config(const json& cfg, const std::string& origin);

 private:
  struct NormStep {
    enum Kind { prepend, replace, unicode } kind;
    std::string pattern, content;   // unicode: pattern is the form, "NFC", "NFKC", "NFD" or "NFKD"
  };
  struct PreStep {
    enum Kind { byte_level, split, metaspace } kind;
    bool add_prefix_space = false;
    std::optional<Regex> regex;      // byte_level with use_regex, or split by Regex
    std::string literal;             // split by String
    SplitBehavior behavior = SplitBehavior::isolated;
    bool invert = false;
    std::string replacement;         // metaspace
    std::string prepend_scheme;      // metaspace: always, first, never
    bool split_on_replacement = true;
  };
  struct DecStep {
    enum Kind { byte_level, replace, byte_fallback, fuse, strip, metaspace } kind;
    std::string pattern, content;
    int start = 0, stop = 0;
    bool strip_first = false;        // metaspace: drop the space it prepended
  };

  void read_normalizer(const json& n, const std::string& where, Checker& c);
  void read_pre_tokenizer(const json& p, const std::string& where, Checker& c);
  void read_decoder(const json& d, const std::string& where, Checker& c);
  void read_added_tokens(const json& doc, Checker& c);
  void read_post_processor(const json& p, const std::string& where, Checker& c);

  // Text on its way through the steps, with the [begin, end) bytes of the original
  // text each of its bytes came from (for offsets).
 public:
  struct Aligned {
    std::string s;
    std::vector<TokenSpan> from;
  };

 private:
  void normalize(Aligned& text) const;
  std::vector<Aligned> pre_tokenize(Aligned text, bool first_segment) const;
  void encode_segment(std::string_view text, std::size_t offset, bool first_segment, Encoding& out) const;

  BpeModel model_;
  std::vector<NormStep> normalizer_;
  std::vector<PreStep> pre_tokenizer_;
  std::vector<DecStep> decoder_;
  std::vector<std::pair<std::string, TokenId>> added_;  // longest content first
  std::unordered_set<TokenId> special_;
  bool byte_level_ = false;
  std::optional<TokenId> bos_, eos_, pad_;
  std::vector<TokenId> before_, after_;
};

}  // namespace braid::tok
