#include "tokenizer/tokenizer.hpp"

#include "tokenizer/byte_tokenizer.hpp"
#include "tokenizer/hf_tokenizer.hpp"

#include <filesystem>

namespace braid::tok {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec) {
  if (spec.empty() || spec == "byte") return std::make_unique<ByteTokenizer>();
  std::filesystem::path p(spec);
  if (std::filesystem::is_directory(p)) p /= "tokenizer.json";
  return HfTokenizer::load(p.string());
}

}  // namespace braid::tok
