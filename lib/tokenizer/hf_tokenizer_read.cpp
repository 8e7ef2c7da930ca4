// Reading a tokenizer.json into the steps HfTokenizer runs (hf_tokenizer.cpp).
#include "tokenizer/hf_tokenizer.hpp"

#include "core/error.hpp"
#include "core/files.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

namespace braid::tok {

namespace {

// GPT-2's pre-tokenizer regex, used by ByteLevel when use_regex is true.
const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* kMetaspace = "\xE2\x96\x81";  // "▁"

// A pattern object {"String": "x"} or {"Regex": "x"}; returns (text, is_regex).
std::optional<std::pair<std::string, bool>> read_pattern(const json& obj, const std::string& where, Checker& c) {
  auto it = obj.find("pattern");
  if (it != obj.end() && it->is_object()) {
    if (it->contains("String") && (*it)["String"].is_string()) return std::pair{(*it)["String"].get<std::string>(), false};
    if (it->contains("Regex") && (*it)["Regex"].is_string()) return std::pair{(*it)["Regex"].get<std::string>(), true};
  }
  c.fail(Checker::path(where, "pattern"), "must be {\"String\": ...} or {\"Regex\": ...}");
  return std::nullopt;
}

// A special token of tokenizer_config.json: a string, {"content": ...}, or null.
std::optional<std::string> special_name(const json& cfg, const char* key, const std::string& origin) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  throw InputError(origin, key, "must be a string, {\"content\": \"...\"} or null");
}

// The tokenizer classes whose fast tokenizer rebuilds the post-processor from
// add_bos_token and add_eos_token (transformers' update_post_processor).
bool rebuilds_post_processor(const std::string& cls) {
  for (const char* c : {"LlamaTokenizer", "LlamaTokenizerFast", "GemmaTokenizer", "GemmaTokenizerFast",
                        "CodeLlamaTokenizer", "CodeLlamaTokenizerFast"}) {
    if (cls == c) return true;
  }
  return false;
}

}  // namespace

std::unique_ptr<HfTokenizer> HfTokenizer::load(const std::string& path) {
  auto tk = std::make_unique<HfTokenizer>(load_json_file(path), path);
  const auto cfg_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(cfg_path)) tk->read_config(load_json_file(cfg_path.string()), cfg_path.string());
  return tk;
}

HfTokenizer::HfTokenizer(const json& doc, const std::string& origin) {
  Checker c(origin);
  if (!doc.is_object()) throw InputError(origin, "", "a tokenizer.json must be a JSON object");
  model_ = BpeModel(doc.value("model", json()), c);
  if (doc.contains("normalizer")) read_normalizer(doc["normalizer"], "normalizer", c);
  if (doc.contains("pre_tokenizer")) read_pre_tokenizer(doc["pre_tokenizer"], "pre_tokenizer", c);
  if (doc.contains("decoder")) read_decoder(doc["decoder"], "decoder", c);
  read_added_tokens(doc, c);
  if (doc.contains("post_processor")) read_post_processor(doc["post_processor"], "post_processor", c);
  c.check();
  byte_level_ = std::any_of(pre_tokenizer_.begin(), pre_tokenizer_.end(),
                            [](const PreStep& s) { return s.kind == PreStep::byte_level; });
}

void HfTokenizer::read_config(const json& cfg, const std::string& origin) {
  if (!cfg.is_object()) throw InputError(origin, "", "must be a JSON object");
  auto token = [&](const char* key) -> std::optional<TokenId> {
    const auto name = special_name(cfg, key, origin);
    if (!name) return std::nullopt;
    const TokenId* id = model_.id_of(*name);
    if (id == nullptr) throw InputError(origin, key, fmt::format("names \"{}\", a token tokenizer.json does not have", *name));
    return *id;
  };
  bos_ = token("bos_token");
  eos_ = token("eos_token");
  pad_ = token("pad_token");
  const std::string cls = cfg.value("tokenizer_class", json("")).is_string() ? cfg.value("tokenizer_class", "") : "";
  if (!rebuilds_post_processor(cls)) return;
  auto flag = [&](const char* key, bool def) {
    auto it = cfg.find(key);
    if (it == cfg.end() || it->is_null()) return def;
    if (!it->is_boolean()) throw InputError(origin, key, "must be true or false");
    return it->get<bool>();
  };
  const bool add_bos = flag("add_bos_token", true), add_eos = flag("add_eos_token", false);
  if (add_bos && !bos_) throw InputError(origin, "bos_token", fmt::format("is null while add_bos_token is true ({} adds a BOS)", cls));
  if (add_eos && !eos_) throw InputError(origin, "eos_token", fmt::format("is null while add_eos_token is true ({} adds an EOS)", cls));
  before_.clear();
  after_.clear();
  if (add_bos) before_.push_back(*bos_);
  if (add_eos) after_.push_back(*eos_);
}

void HfTokenizer::read_post_processor(const json& p, const std::string& where, Checker& c) {
  if (p.is_null()) return;
  const std::string type = p.is_object() ? c.string(p, where, "type", {}, "").value_or("") : "";
  if (type == "Sequence" && p.contains("processors") && p["processors"].is_array()) {
    for (std::size_t i = 0; i < p["processors"].size(); ++i) {
      read_post_processor(p["processors"][i], fmt::format("{}.processors[{}]", where, i), c);
    }
  } else if (type == "ByteLevel") {
    // Offsets only.
  } else if (type == "TemplateProcessing") {
    // The special tokens of "single" before and after the sequence $A.
    const json& single = p.value("single", json());
    const json& specials = p.value("special_tokens", json::object());
    if (!single.is_array()) {
      c.fail(where + ".single", "must be an array");
      return;
    }
    bool seen_sequence = false;
    for (std::size_t i = 0; i < single.size(); ++i) {
      const json& piece = single[i];
      const std::string at = fmt::format("{}.single[{}]", where, i);
      if (piece.is_object() && piece.contains("Sequence")) {
        seen_sequence = true;
        continue;
      }
      if (!piece.is_object() || !piece.contains("SpecialToken") || !piece["SpecialToken"].contains("id") ||
          !piece["SpecialToken"]["id"].is_string()) {
        c.fail(at, "must be {\"Sequence\": ...} or {\"SpecialToken\": {\"id\": ...}}");
        continue;
      }
      const std::string name = piece["SpecialToken"]["id"].get<std::string>();
      const json& entry = specials.is_object() ? specials.value(name, json()) : json();
      if (!entry.is_object() || !entry.contains("ids") || !entry["ids"].is_array()) {
        c.fail(fmt::format("{}.special_tokens", where), fmt::format("has no ids for \"{}\"", name));
        continue;
      }
      for (const json& id : entry["ids"]) {
        if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() > INT32_MAX) {
          c.fail(fmt::format("{}.special_tokens", where), fmt::format("\"{}\" has an id that is not a token id", name));
          break;
        }
        (seen_sequence ? after_ : before_).push_back(id.get<TokenId>());
      }
    }
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    auto pair = [&](const char* key) -> std::optional<TokenId> {
      const json& v = p.value(key, json());
      if (v.is_array() && v.size() == 2 && v[1].is_number_integer()) return v[1].get<TokenId>();
      c.fail(where + "." + key, "must be [token, id]");
      return std::nullopt;
    };
    if (auto cls = pair("cls")) before_.push_back(*cls);
    if (auto sep = pair("sep")) after_.push_back(*sep);
  } else {
    c.fail(where, fmt::format("post_processor type \"{}\" is not supported (braid reads Sequence, ByteLevel, "
                              "TemplateProcessing, BertProcessing, RobertaProcessing)", type));
  }
}

void HfTokenizer::read_normalizer(const json& n, const std::string& where, Checker& c) {
  if (n.is_null()) return;
  const std::string type = n.is_object() ? c.string(n, where, "type", {}, "").value_or("") : "";
  if (type == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
    for (std::size_t i = 0; i < n["normalizers"].size(); ++i) {
      read_normalizer(n["normalizers"][i], fmt::format("{}.normalizers[{}]", where, i), c);
    }
  } else if (type == "NFC" || type == "NFKC" || type == "NFD" || type == "NFKD") {
    normalizer_.push_back({NormStep::unicode, type, ""});
  } else if (type == "Prepend" && n.contains("prepend") && n["prepend"].is_string()) {
    normalizer_.push_back({NormStep::prepend, "", n["prepend"].get<std::string>()});
  } else if (type == "Replace") {
    auto pat = read_pattern(n, where, c);
    if (pat && pat->second) c.fail(where + ".pattern", "a Regex in a Replace normalizer is not supported");
    if (pat && !pat->second) normalizer_.push_back({NormStep::replace, pat->first, c.string(n, where, "content", {}, "").value_or("")});
  } else {
    c.fail(where, fmt::format("normalizer type \"{}\" is not supported (braid reads Sequence, Prepend, Replace, NFC, NFKC, NFD, NFKD)", type));
  }
}

void HfTokenizer::read_pre_tokenizer(const json& p, const std::string& where, Checker& c) {
  if (p.is_null()) return;
  const std::string type = p.is_object() ? c.string(p, where, "type", {}, "").value_or("") : "";
  if (type == "Sequence" && p.contains("pretokenizers") && p["pretokenizers"].is_array()) {
    for (std::size_t i = 0; i < p["pretokenizers"].size(); ++i) {
      read_pre_tokenizer(p["pretokenizers"][i], fmt::format("{}.pretokenizers[{}]", where, i), c);
    }
  } else if (type == "ByteLevel") {
    PreStep s{PreStep::byte_level};
    s.add_prefix_space = c.boolean(p, where, "add_prefix_space", true).value_or(true);  // HF's default when the key is absent
    if (c.boolean(p, where, "use_regex", true).value_or(true)) s.regex.emplace(kGpt2Pattern, "", where);
    pre_tokenizer_.push_back(std::move(s));
  } else if (type == "Split") {
    PreStep s{PreStep::split};
    auto pat = read_pattern(p, where, c);
    if (!pat) return;
    try {
      if (pat->second) s.regex.emplace(pat->first, "", where + ".pattern.Regex");
      else s.literal = pat->first;
    } catch (const InputError& e) {
      c.fail(where + ".pattern", e.what());
      return;
    }
    const std::string b = c.string(p, where, "behavior", {}, "Isolated").value_or("Isolated");
    if (b == "Removed") s.behavior = SplitBehavior::removed;
    else if (b == "Isolated") s.behavior = SplitBehavior::isolated;
    else if (b == "MergedWithPrevious") s.behavior = SplitBehavior::merged_with_previous;
    else if (b == "MergedWithNext") s.behavior = SplitBehavior::merged_with_next;
    else if (b == "Contiguous") s.behavior = SplitBehavior::contiguous;
    else c.fail(where + ".behavior", fmt::format("unknown split behavior \"{}\"", b));
    s.invert = c.boolean(p, where, "invert", false).value_or(false);
    pre_tokenizer_.push_back(std::move(s));
  } else if (type == "Metaspace") {
    PreStep s{PreStep::metaspace};
    s.replacement = c.string(p, where, "replacement", {}, kMetaspace).value_or(kMetaspace);
    // Older files say add_prefix_space, newer ones prepend_scheme.
    s.prepend_scheme = c.string(p, where, "prepend_scheme", {}, c.boolean(p, where, "add_prefix_space", true).value_or(true) ? "always" : "never").value_or("always");
    s.split_on_replacement = c.boolean(p, where, "split", true).value_or(true);
    pre_tokenizer_.push_back(std::move(s));
  } else {
    c.fail(where, fmt::format("pre_tokenizer type \"{}\" is not supported (braid reads Sequence, ByteLevel, "
                              "Split, Metaspace)", type));
  }
}

void HfTokenizer::read_decoder(const json& d, const std::string& where, Checker& c) {
  if (d.is_null()) return;
  const std::string type = d.is_object() ? c.string(d, where, "type", {}, "").value_or("") : "";
  if (type == "Sequence" && d.contains("decoders") && d["decoders"].is_array()) {
    for (std::size_t i = 0; i < d["decoders"].size(); ++i) {
      read_decoder(d["decoders"][i], fmt::format("{}.decoders[{}]", where, i), c);
    }
  } else if (type == "ByteLevel") {
    decoder_.push_back({DecStep::byte_level});
  } else if (type == "Replace") {
    auto pat = read_pattern(d, where, c);
    if (pat && pat->second) c.fail(where + ".pattern", "a Regex in a Replace decoder is not supported");
    if (pat && !pat->second) decoder_.push_back({DecStep::replace, pat->first, c.string(d, where, "content", {}, "").value_or("")});
  } else if (type == "ByteFallback") {
    decoder_.push_back({DecStep::byte_fallback});
  } else if (type == "Fuse") {
    decoder_.push_back({DecStep::fuse});
  } else if (type == "Strip") {
    DecStep s{DecStep::strip, "", c.string(d, where, "content", {}, " ").value_or(" ")};
    s.start = static_cast<int>(c.integer(d, where, "start", {}, 0).value_or(0));
    s.stop = static_cast<int>(c.integer(d, where, "stop", {}, 0).value_or(0));
    decoder_.push_back(s);
  } else if (type == "Metaspace") {
    DecStep s{DecStep::metaspace, c.string(d, where, "replacement", {}, kMetaspace).value_or(kMetaspace), " "};
    s.strip_first = c.string(d, where, "prepend_scheme", {}, c.boolean(d, where, "add_prefix_space", true).value_or(true) ? "always" : "never").value_or("always") != "never";
    decoder_.push_back(s);
  } else {
    c.fail(where, fmt::format("decoder type \"{}\" is not supported", type));
  }
}

void HfTokenizer::read_added_tokens(const json& doc, Checker& c) {
  auto it = doc.find("added_tokens");
  if (it == doc.end() || it->is_null()) return;
  if (!it->is_array()) {
    c.fail("added_tokens", "must be an array");
    return;
  }
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    const std::string where = fmt::format("added_tokens[{}]", i);
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
        !t["content"].is_string() || t["id"].get<std::int64_t>() < 0 || t["id"].get<std::int64_t>() > kMaxTokenId) {
      c.fail(where, fmt::format("must have an integer \"id\" in [0, {}] and a string \"content\"", kMaxTokenId));
      continue;
    }
    if (t["content"].get<std::string>().empty()) {  // it would match everywhere and consume nothing
      c.fail(where + ".content", "is empty: an added token must have some text");
      continue;
    }
    const auto id = t["id"].get<TokenId>();
    const auto content = t["content"].get<std::string>();
    model_.add_token(content, id);
    added_.emplace_back(content, id);
    if (c.boolean(t, where, "special", false).value_or(false)) special_.insert(id);
  }
  std::stable_sort(added_.begin(), added_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

}  // namespace braid::tok
