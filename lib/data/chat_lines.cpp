#include "data/chat_lines.hpp"

namespace braid::data {

const tok::ChatTemplate& LazyChatTemplate::get() {
  if (from_.empty() || from_ == "byte") {
    throw tok::ChatError("messages", what_ + " need a Hugging Face tokenizer whose tokenizer_config.json has a "
                                             "chat_template (--tokenizer); the byte tokenizer has none");
  }
  if (!template_) template_ = tok::ChatTemplate::load(from_);  // an InputError naming tokenizer_config.json
  return *template_;
}

}  // namespace braid::data
