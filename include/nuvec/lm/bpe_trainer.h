// Training a byte-level BPE tokenizer on a corpus, written as a Hugging Face tokenizer.json
// that nuvec::lm::Tokenizer (nuvec/lm/tokenizer.h) reads.
//
// The rules are those of Hugging Face `tokenizers` (Rust crate): trainers.BpeTrainer
// (tokenizers/src/models/bpe/trainer.rs, word.rs) behind Tokenizer::train / train_from_files
// (tokenizers/src/tokenizer/mod.rs), set up as GPT-2 / Llama-3 style tokenizers are:
//   tok = Tokenizer(models.BPE())
//   tok.pre_tokenizer = pre_tokenizers.Sequence([
//       pre_tokenizers.Split(Regex(<Llama-3 pattern>), behavior="isolated"),
//       pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
//   tok.decoder = decoders.ByteLevel()
//   trainer = trainers.BpeTrainer(vocab_size=..., min_frequency=..., special_tokens=[...],
//                                 initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
// scripts/check_bpe_trainer.py compares the output with that library's.
#pragma once

#include <string>
#include <vector>

namespace nuvec::lm {

// Settings of train_bpe_tokenizer_json (the fields of tokenizers' trainers.BpeTrainer that
// this trainer supports; limit_alphabet, continuing_subword_prefix, end_of_word_suffix and
// max_token_length are left at their defaults: unset).
struct BpeTrainerOptions {
  // Size of the whole vocabulary: special tokens, the 256 byte symbols and the merged
  // tokens. Training stops once the vocabulary has this many entries.
  int vocab_size = 4096;
  // A pair is merged only while its count (occurrences weighted by word counts) is at
  // least this (0 and 1 both mean "any pair that occurs").
  int min_frequency = 2;
  // Added tokens with special=true, at ids 0..n-1 in this order (repeats are dropped).
  std::vector<std::string> special_tokens = {"<|endoftext|>"};
};

// Trains a byte-level BPE tokenizer on `texts` and returns the text of its tokenizer.json
// (tokenizers >= 0.20's layout, merges as ["a", "b"] pairs, vocab ordered by id).
//
// Each element of `texts` is one sequence, as an item of tokenizers' train_from_iterator:
// it is pre-tokenized on its own by the GPT-4 / Llama-3 split pattern
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*
//   |\s*[\r\n]+|\s+(?!\S)|\s+
// (Isolated) and mapped to GPT-2's byte characters ("Ġ" for a space); special tokens in
// the text are not split out (tokenizers does not either when training).
// Ids: special tokens 0..n-1, then the 256 byte symbols sorted by the code point of their
// character ('!' first, "Ġ" at n + 220), then one id per new merged token in the order it is
// learned. The merge rule (trainer.rs BpeTrainer::do_train): repeatedly take the adjacent
// pair of symbols with the highest count over all pre-tokens (a pre-token's pairs weighted
// by how often it occurs), ties broken by the smallest (left id, right id) (ids as above,
// not the strings), and replace it in every pre-token left to right without overlap. It
// stops when the vocabulary reaches vocab_size, when no pair is left, or when the best
// count is below min_frequency. As in tokenizers, counts are kept incrementally (a
// priority queue with lazy re-counting and, per pair, the words holding it), and a pair
// learned twice (possible when two merges make the same string) is listed once, at its
// last rank. The result is deterministic.
//
// Throws std::invalid_argument ("[lm.train_bpe_tokenizer_json] ...") when vocab_size is
// smaller than 256 plus the number of distinct special tokens, min_frequency is negative, a
// special token is empty or not valid UTF-8, a text is not valid UTF-8, or the corpus has
// no pre-token at all (no text, or only empty texts).
std::string train_bpe_tokenizer_json(const std::vector<std::string>& texts,
                                     const BpeTrainerOptions& options = {});

// As train_bpe_tokenizer_json on the lines of the files at `paths`, each line with its
// "\n" (and any "\r" before it) kept, as tokenizers' Tokenizer::train_from_files reads them
// (the Python `tokenizer.train(files, trainer)`).
// Throws std::runtime_error when a file cannot be read, and std::invalid_argument as
// train_bpe_tokenizer_json (naming the file for invalid UTF-8).
std::string train_bpe_tokenizer_json_from_files(const std::vector<std::string>& paths,
                                                const BpeTrainerOptions& options = {});

} // namespace nuvec::lm
