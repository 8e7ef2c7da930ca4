#include "tokenizer/bpe_model.hpp"

#include "core/error.hpp"
#include "tokenizer/utf8.hpp"

#include <fmt/format.h>

#include <climits>
#include <functional>
#include <queue>
#include <stdexcept>

namespace braid::tok {


BpeModel::BpeModel(const json& model, Checker& checker) : file_(checker.file()) {
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
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() > kMaxTokenId) {
      checker.fail(fmt::format("model.vocab[\"{}\"]", token), fmt::format("id must be an integer in [0, {}]", kMaxTokenId));
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
      } else if (!vocab_.contains(left) || !vocab_.contains(right) || !vocab_.contains(left + right)) {
        checker.fail(field, fmt::format("\"{}\", \"{}\" or \"{}\" is not in model.vocab", left, right, left + right));
      } else {
        // The first of two equal merges wins, as HF keeps the lowest rank.
        merges_.emplace(pair_key(vocab_[left], vocab_[right]), Merge{rank, vocab_[left + right]});
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

void BpeModel::tokenize(std::string_view piece, std::vector<TokenId>& out,
                        std::vector<std::pair<std::size_t, std::size_t>>* spans) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    if (const auto* id = id_of(piece)) {
      out.push_back(*id);
      if (spans) spans->emplace_back(0, piece.size());
      return;
    }
  }
  // Symbols as a linked list over the piece's characters (or their fallback bytes),
  // each with the bytes of the piece it stands for.
  struct Sym { TokenId id; int prev, next; bool unk; std::size_t begin, end; };
  std::vector<Sym> syms;
  syms.reserve(piece.size());
  auto append = [&](TokenId id, bool unk, std::size_t begin, std::size_t end) {
    const int i = static_cast<int>(syms.size());
    syms.push_back({id, i - 1, -1, unk, begin, end});
    if (i > 0) syms[static_cast<std::size_t>(i - 1)].next = i;
  };
  for (std::string_view c : utf8::chars(piece)) {
    const std::size_t at = static_cast<std::size_t>(c.data() - piece.data());
    if (const auto* id = id_of(c)) append(*id, false, at, at + c.size());
    else if (byte_fallback_) for (std::size_t k = 0; k < c.size(); ++k) append(byte_ids_[static_cast<unsigned char>(c[k])], false, at + k, at + k + 1);
    else if (unk_ >= 0) append(unk_, true, at, at + c.size());
    else {
      // The text cannot be encoded by this tokenizer: bad input (exit 2), named by the tokenizer file.
      throw InputError(file_, "model.vocab",
                       fmt::format("has no token for \"{}\" in the text to encode, and the tokenizer has no "
                                   "unk_token or byte_fallback to stand in for it",
                                   c));
    }
  }

  // Lowest rank first, leftmost first among equal ranks: the order HF's BPE merges
  // in, so results agree token for token. Entries made stale by an earlier merge are
  // recognised by their ids no longer matching and skipped.
  struct Cand {
    int rank, left;
    TokenId left_id, right_id, merged;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<>> queue;
  auto consider = [&](int i) {
    if (i < 0) return;
    const Sym& l = syms[static_cast<std::size_t>(i)];
    if (l.next < 0 || l.unk) return;
    const Sym& r = syms[static_cast<std::size_t>(l.next)];
    if (r.unk) return;
    auto it = merges_.find(pair_key(l.id, r.id));
    if (it != merges_.end()) queue.push({it->second.rank, i, l.id, r.id, it->second.merged});
  };
  for (int i = 0; i + 1 < static_cast<int>(syms.size()); ++i) consider(i);
  while (!queue.empty()) {
    const Cand c = queue.top();
    queue.pop();
    Sym& l = syms[static_cast<std::size_t>(c.left)];
    if (l.id != c.left_id || l.next < 0) continue;
    Sym& r = syms[static_cast<std::size_t>(l.next)];
    if (r.id != c.right_id) continue;
    l.id = c.merged;
    l.end = r.end;
    l.next = r.next;
    if (r.next >= 0) syms[static_cast<std::size_t>(r.next)].prev = c.left;
    r.id = -1;  // gone
    consider(l.prev);
    consider(c.left);
  }
  bool last_unk = false;
  for (int i = 0; i >= 0 && !syms.empty(); i = syms[static_cast<std::size_t>(i)].next) {
    const Sym& s = syms[static_cast<std::size_t>(i)];
    if (!(s.unk && last_unk && fuse_unk_)) {
      out.push_back(s.id);
      if (spans) spans->emplace_back(s.begin, s.end);
    } else if (spans) {
      spans->back().second = s.end;  // fused into the unk before it
    }
    last_unk = s.unk;
  }
}

}  // namespace braid::tok
