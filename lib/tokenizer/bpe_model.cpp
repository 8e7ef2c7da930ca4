#include "tokenizer/bpe_model.hpp"

#include "tokenizer/utf8.hpp"

#include <fmt/format.h>

#include <climits>
#include <stdexcept>

namespace braid::tok {

namespace {
// Never inside a token: JSON strings are valid UTF-8 and 0xFF never is.
constexpr char kSep = '\xff';
std::string merge_key(std::string_view a, std::string_view b) {
  std::string k;
  k.reserve(a.size() + b.size() + 1);
  k.append(a).push_back(kSep);
  k.append(b);
  return k;
}
}  // namespace

BpeModel::BpeModel(const json& model, Checker& checker) {
  if (!model.is_object()) {
    checker.fail("model", "must be an object");
    return;
  }
  checker.string(model, "model", "type", {"BPE"}, "BPE");
  byte_fallback_ = checker.boolean(model, "model", "byte_fallback", false).value_or(false);
  ignore_merges_ = checker.boolean(model, "model", "ignore_merges", false).value_or(false);
  fuse_unk_ = checker.boolean(model, "model", "fuse_unk", false).value_or(false);
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model[key].is_null() && model[key] != "") {
      checker.fail(Checker::path("model", key), "is not supported by braid (only plain and byte-level BPE)");
    }
  }

  auto vocab_it = model.find("vocab");
  if (vocab_it == model.end() || !vocab_it->is_object()) {
    checker.fail("model.vocab", "must be an object of token -> id");
    return;
  }
  for (auto& [token, id] : vocab_it->items()) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() > INT32_MAX) {
      checker.fail(fmt::format("model.vocab[\"{}\"]", token), "id must be a non-negative 32-bit integer");
      continue;
    }
    add_token(token, id.get<TokenId>());
  }

  auto merges_it = model.find("merges");
  if (merges_it != model.end() && !merges_it->is_array()) checker.fail("model.merges", "must be an array");
  if (merges_it != model.end() && merges_it->is_array()) {
    int rank = 0;
    for (const json& m : *merges_it) {
      std::string left, right;
      // Two spellings exist: "a b" (older files) and ["a", "b"] (newer ones).
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const auto space = s.find(' ', 1);
        if (space != std::string::npos) { left = s.substr(0, space); right = s.substr(space + 1); }
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        left = m[0].get<std::string>();
        right = m[1].get<std::string>();
      }
      const std::string field = fmt::format("model.merges[{}]", rank);
      if (left.empty() || right.empty()) {
        checker.fail(field, "must be \"left right\" or [\"left\", \"right\"]");
      } else if (!vocab_.contains(left + right)) {
        checker.fail(field, fmt::format("merged token \"{}\" is not in model.vocab", left + right));
      } else {
        merge_rank_.emplace(merge_key(left, right), rank);
      }
      ++rank;
    }
  }

  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    const auto* id = id_of(model["unk_token"].get<std::string>());
    if (id == nullptr) checker.fail("model.unk_token", "is not in model.vocab");
    else unk_ = *id;
  }
  if (byte_fallback_) {
    for (int b = 0; b < 256; ++b) {
      const auto* id = id_of(fmt::format("<0x{:02X}>", b));
      if (id == nullptr) {
        checker.fail("model.byte_fallback", fmt::format("is true but token <0x{:02X}> is not in model.vocab", b));
        break;
      }
      byte_ids_[b] = *id;
    }
  }
}

void BpeModel::add_token(const std::string& content, TokenId id) {
  vocab_[content] = id;
  if (static_cast<std::size_t>(id) >= id_to_token_.size()) id_to_token_.resize(static_cast<std::size_t>(id) + 1);
  id_to_token_[static_cast<std::size_t>(id)] = content;
}

const std::string* BpeModel::token_of(TokenId id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= id_to_token_.size()) return nullptr;
  return &id_to_token_[static_cast<std::size_t>(id)];
}

const TokenId* BpeModel::id_of(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  return it == vocab_.end() ? nullptr : &it->second;
}

int BpeModel::rank(std::string_view left, std::string_view right) const {
  auto it = merge_rank_.find(merge_key(left, right));
  return it == merge_rank_.end() ? INT_MAX : it->second;
}

std::vector<std::string> BpeModel::merge_word(std::string_view piece) const {
  std::vector<std::string> symbols;
  for (std::string_view c : utf8::chars(piece)) symbols.emplace_back(c);
  // Always apply the lowest-ranked pair present, leftmost first: the order HF's
  // BPE applies merges in, so results agree token for token.
  while (symbols.size() > 1) {
    int best = INT_MAX;
    std::size_t at = 0;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      const int r = rank(symbols[i], symbols[i + 1]);
      if (r < best) { best = r; at = i; }
    }
    if (best == INT_MAX) break;
    symbols[at] += symbols[at + 1];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  return symbols;
}

void BpeModel::tokenize(std::string_view piece, std::vector<TokenId>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    if (const auto* id = id_of(piece)) { out.push_back(*id); return; }
  }
  bool last_was_unk = false;
  for (const std::string& sym : merge_word(piece)) {
    if (const auto* id = id_of(sym)) {
      out.push_back(*id);
      last_was_unk = false;
    } else if (byte_fallback_) {
      for (unsigned char b : sym) out.push_back(byte_ids_[b]);
      last_was_unk = false;
    } else if (unk_ >= 0) {
      if (!(fuse_unk_ && last_was_unk)) out.push_back(unk_);
      last_was_unk = true;
    } else {
      throw std::runtime_error(fmt::format("tokenizer: \"{}\" is not in the vocabulary and there is no "
                                           "unk_token or byte fallback", sym));
    }
  }
}

}  // namespace braid::tok
