// The JSON Lines of text that SFT and reward-model training (braid-train) and the
// evaluation of a reward model (braid eval) read: SFT examples and preference pairs,
// each made a sequence of tokens with the part to learn marked.
#pragma once

#include "io/sample_batch.hpp"
#include "tokenizer/chat_template.hpp"

#include <cstdint>
#include <string>

namespace braid::tok {
class Tokenizer;
}

namespace braid::data {

// SFT examples, one JSON object a line: {"prompt": "...", "response": "..."}. Each
// becomes BOS + (prompt + response encoded as one text) + EOS (the tokenizer's, where
// it has them), with prompt_len covering BOS and the tokens that cover prompt text
// only: only the response (and EOS) is learnt, and the tokens at the boundary are
// those Hugging Face makes of the whole (tok::encode_joined). A line may instead be a
// conversation {"messages": [...], "tools": [...], "chat_template_kwargs": {...}} (tools
// and keyword arguments: the line's, else chat_defaults', keyword arguments merged key
// by key): rendered whole by the chat template of chat_template_from's
// tokenizer_config.json (the template writes BOS and the ends of turns; none is added),
// every assistant turn learnt and nothing else (tok::ChatTemplate::assistant_spans):
// prompt_len covers the tokens before the first assistant turn, and the batch's
// loss_mask marks the learnt tokens (1 on every response token of the other lines).
io::SampleBatch read_sft_jsonl(const std::string& path, const tok::Tokenizer& tok, std::int32_t vocab_size,
                               std::int64_t max_len, const std::string& chat_template_from = "",
                               const tok::ChatDefaults& chat_defaults = {});

// Preference pairs, one a line: {"prompt": "...", "chosen": "...", "rejected": "..."}.
// Each completion is encoded with its prompt as one text, as read_sft_jsonl does. The
// prompt may be a conversation (an array of messages, TRL's conversational form), each
// completion then the assistant's answer as a string or an array of messages: rendered
// by the chat template as read_sft_jsonl renders a conversation, the completion's
// assistant turns learnt (not its tool results).
// Pair i becomes sequences 2i (prompt + chosen + EOS) and 2i + 1 (prompt + rejected +
// EOS), sample_id 2i and 2i + 1: the layout PairwiseRewardObjective and DpoObjective
// read. An empty chosen or rejected completion is refused (naming the line and field).
io::SampleBatch read_preference_jsonl(const std::string& path, const tok::Tokenizer& tok, std::int32_t vocab_size,
                                      std::int64_t max_len, const std::string& chat_template_from = "",
                                      const tok::ChatDefaults& chat_defaults = {});

}  // namespace braid::data
