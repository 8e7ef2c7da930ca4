#include "tokenizer/tokenizer.hpp"

#include "tokenizer/byte_tokenizer.hpp"
#include "tokenizer/hf_tokenizer.hpp"

#include <filesystem>

namespace braid::tok {

std::vector<TokenId> encode_text(const Tokenizer& tok, std::string_view text) {
  std::vector<TokenId> ids = tok.specials_before();
  const auto body = tok.encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  const auto after = tok.specials_after();
  ids.insert(ids.end(), after.begin(), after.end());
  return ids;
}

JoinedEncoding encode_joined(const Tokenizer& tok, std::string_view prompt, std::string_view response) {
  std::string text;
  text.reserve(prompt.size() + response.size());
  text.append(prompt).append(response);
  Encoding e = tok.encode_with_offsets(text);
  JoinedEncoding out{std::move(e.ids), 0};
  while (out.prompt_tokens < e.spans.size() && e.spans[out.prompt_tokens].end <= prompt.size()) ++out.prompt_tokens;
  return out;
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec) {
  if (spec.empty() || spec == "byte") return std::make_unique<ByteTokenizer>();
  std::filesystem::path p(spec);
  if (std::filesystem::is_directory(p)) p /= "tokenizer.json";
  return HfTokenizer::load(p.string());
}

}  // namespace braid::tok
