// tokenize_cli.h — the gpt2-tokenize command line, as a function (its main is one line).
//
//   gpt2-tokenize encode INPUT.txt -o OUT.bin [--val-fraction F] [--vocab-dir DIR]
//   gpt2-tokenize decode SHARD.bin [-o OUT.txt] [--vocab-dir DIR]
//   gpt2-tokenize --help
//
// encode writes OUT.bin, or with 0 < F < 1 OUT_train.bin and OUT_val.bin (a trailing ".bin" of OUT
// is replaced; the cut is described in validation_split.h), and prints a summary on `out`.
// decode writes the shard's text to `out` (or OUT.txt).
// Returns the process exit status: 0 on success, 2 on any error (bad arguments, a missing file, a
// shard with a bad header, a token outside the vocabulary), with one "gpt2-tokenize: ..." line on
// `err`.
#pragma once

#include <cstdio>
#include <span>
#include <string>
#include <string_view>

namespace gpt2 {

int run_tokenize_cli(std::span<const std::string_view> args, std::FILE* out, std::FILE* err);

// "data/x/name.bin" + "_train" -> "data/x/name_train.bin" (".bin" appended when absent).
std::string shard_path_with_suffix(const std::string& path, std::string_view suffix);

}  // namespace gpt2
