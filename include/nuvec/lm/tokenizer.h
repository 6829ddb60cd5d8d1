// Byte-level BPE tokenizer read from a Hugging Face `tokenizer.json` (the tokenizer of GPT-2,
// Llama-3, Qwen2/Qwen3 and similar models).
//
// The rules follow Hugging Face `tokenizers` (Rust crate, tokenizers/src/): the model "BPE"
// (models/bpe/), the pre-tokenizers "Split", "ByteLevel" and "Sequence" (pre_tokenizers/),
// the normalizers "NFC"/"NFD"/"NFKC"/"NFKD"/"Sequence" (normalizers/), the post-processors
// "TemplateProcessing", "ByteLevel", "BertProcessing", "RobertaProcessing" and "Sequence"
// (processors/), the decoder "ByteLevel" (decoders/) and the added-token vocabulary
// (tokenizer/added_vocabulary.rs). Byte-to-character mapping is GPT-2's `bytes_to_unicode`
// (openai/gpt-2, src/encoder.py). Any other component type is rejected when the file is read.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace nuvec::lm {

class StreamingDecoder;

// A tokenizer read from a Hugging Face tokenizer.json. Immutable after construction; copies
// share the parsed tables, and all const methods may be called from several threads at once.
class Tokenizer {
 public:
  // Reads and parses the tokenizer.json at `tokenizer_json`.
  // Throws std::runtime_error when the file cannot be read, and whatever from_json_string
  // throws for its contents.
  static Tokenizer from_file(const std::string& tokenizer_json);

  // Parses the text of a tokenizer.json. Merges may be "a b" strings (tokenizers < 0.20) or
  // ["a", "b"] pairs (later versions, and train_bpe_tokenizer_json in bpe_trainer.h).
  // Throws std::invalid_argument ("[lm.Tokenizer] ...") when the text is not JSON, lacks
  // "model", has a malformed field (e.g. a merge whose parts are not in the vocab, as
  // tokenizers' BPE builder rejects), or names a component type this implementation does not
  // support (the message names the type, e.g. "unsupported pre_tokenizer type 'Metaspace'").
  static Tokenizer from_json_string(const std::string& json_text);

  // Token ids of `text` (UTF-8), as tokenizers' Tokenizer::encode: added tokens are found
  // first in the raw text (leftmost, longest match) and split it; every other part is
  // normalized, pre-tokenized and run through BPE (merges applied lowest rank first, leftmost
  // first among equal ranks; with ignore_merges a pre-token that is itself in the vocab is
  // one token). With add_special_tokens the post-processor adds its special tokens (e.g. a
  // TemplateProcessing's BOS).
  // Throws std::invalid_argument when `text` is not valid UTF-8 (tokenizers takes Rust
  // strings, which are always valid).
  std::vector<int> encode(const std::string& text, bool add_special_tokens = true) const;

  // The text of `ids`, as tokenizers' Tokenizer::decode with the ByteLevel decoder: each
  // token's characters map back to bytes (a token with a character outside GPT-2's byte
  // table, e.g. an added token with a space, contributes its own UTF-8), and invalid UTF-8 in
  // the result becomes U+FFFD (Rust's String::from_utf8_lossy). Special added tokens give
  // their content unless skip_special_tokens. Without a decoder the tokens are joined by " ".
  // Throws std::out_of_range for an id that is neither in the vocab nor an added token.
  std::string decode(const std::vector<int>& ids, bool skip_special_tokens = false) const;

  // One more than the largest id of the vocab and the added tokens (the size an embedding
  // table needs; ids in [0, vocab_size()) may have gaps, which decode rejects).
  int vocab_size() const;

  // The id of a token string (added tokens first, then the model vocab; for the model the
  // string is in byte-level form, e.g. "Ġworld"), or nullopt.
  std::optional<int> token_to_id(const std::string& token) const;

  // The token string of `id` (added token content, or the byte-level vocab string).
  // Throws std::out_of_range for an unknown id.
  std::string id_to_token(int id) const;

  // The first special token of the post-processor's single-sequence template when the
  // template starts with one (Llama-3's "<|begin_of_text|>"), or BertProcessing's/
  // RobertaProcessing's cls; nullopt otherwise (GPT-2, Qwen). tokenizer.json itself does not
  // name BOS/EOS (tokenizer_config.json does), so there is no eos_token_id here.
  std::optional<int> bos_token_id() const;

  // The pre-tokens of `text` (no added-token splitting): the normalizer, then the
  // pre-tokenizer, each piece in byte-level form (tokenizers' pre_tokenize_str after
  // ByteLevel, e.g. " here" -> "Ġhere"). For inspection and tests.
  // Throws std::invalid_argument when `text` is not valid UTF-8.
  std::vector<std::string> pre_tokenize(const std::string& text) const;

  struct Impl;

 private:
  friend class StreamingDecoder;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Incremental decoding for generation: feed ids one at a time and get the text that has
// become complete UTF-8. Bytes of a multi-byte character split across tokens are held back
// until the character is complete (an emoji's 4 bytes give no output until the last one
// arrives); bytes that can never start or continue a valid character are emitted as U+FFFD
// at once. The concatenation of push() results and finish() equals tokenizer.decode(ids).
// Holds a copy of the tokenizer (cheap: shared tables).
class StreamingDecoder {
 public:
  // A decoder for `tokenizer`; skip_special_tokens as in Tokenizer::decode.
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);

  // Appends one token and returns the newly complete text (possibly empty).
  // Throws std::out_of_range for an unknown id (nothing is appended then).
  std::string push(int id);

  // Returns what is held back (an incomplete character becomes U+FFFD, as
  // String::from_utf8_lossy does) and resets the decoder for a new sequence.
  std::string finish();

 private:
  Tokenizer tokenizer_;
  bool skip_special_;
  bool first_ = true;
  std::string pending_;
};

} // namespace nuvec::lm
