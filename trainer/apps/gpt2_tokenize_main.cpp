// gpt2_tokenize_main.cpp — `gpt2-tokenize`: text <-> llm.c token shards with GPT-2's BPE.
// Thin: everything is in tokenizer/tokenize_cli.h.
#include <cstdio>
#include <string_view>
#include <vector>

#include "tokenizer/tokenize_cli.h"

int main(int argc, char** argv) {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  return gpt2::run_tokenize_cli(args, stdout, stderr);
}
