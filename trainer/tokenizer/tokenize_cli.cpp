// tokenize_cli.cpp — gpt2-tokenize: argument parsing, encode to shards, decode a shard.
#include "tokenizer/tokenize_cli.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "tokenizer/gpt2_tokenizer.h"
#include "tokenizer/token_shard.h"
#include "tokenizer/validation_split.h"

namespace gpt2 {
namespace {

constexpr int kExitError = 2;

constexpr const char kUsage[] =
    "usage: gpt2-tokenize encode INPUT.txt -o OUT.bin [--val-fraction F] [--vocab-dir DIR]\n"
    "       gpt2-tokenize decode SHARD.bin [-o OUT.txt] [--vocab-dir DIR]\n"
    "       gpt2-tokenize --help\n"
    "\n"
    "GPT-2 byte-level BPE (encoder.json + vocab.bpe) to and from llm.c token shards\n"
    "(1024-byte header: int32 magic 20240520, version 1, token count; then uint16 tokens).\n"
    "\n"
    "encode  tokenizes INPUT.txt (any bytes; non-UTF-8 is encoded byte-level) into OUT.bin.\n"
    "        --val-fraction F (0 < F < 1) writes OUT_train.bin and OUT_val.bin instead: the text\n"
    "        is encoded whole and its tokens cut once, the last ~F of the bytes going to val,\n"
    "        at the paragraph start (after a blank line) nearest that point, else at a line\n"
    "        start, else at any token boundary; train + val == the tokens of the whole text.\n"
    "decode  prints the text of SHARD.bin (or writes it to OUT.txt with -o).\n"
    "\n"
    "--vocab-dir DIR  folder with encoder.json and vocab.bpe (default: %s;\n"
    "                 $RANKSCOPE_DATA_DIR/gpt2 when that variable is set)\n"
    "\n"
    "exit status: 0 on success, 2 on any error.\n"
    "example: gpt2-tokenize encode data/tinyshakespeare/tinyshakespeare.txt \\\n"
    "           -o data/tinyshakespeare/tiny_shakespeare.bin --val-fraction 0.1\n";

struct Options {
  std::string command;
  std::string input;
  std::string output;
  std::optional<double> val_fraction;
  std::string vocab_dir;
  bool help = false;
};

// Parses args into `o`; returns an error message, or "" when the arguments are fine.
std::string parse(std::span<const std::string_view> args, Options& o) {
  std::vector<std::string_view> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    std::string_view value;
    bool has_inline = false;
    if (a.starts_with("--") && a.find('=') != std::string_view::npos) {
      value = a.substr(a.find('=') + 1);
      a = a.substr(0, a.find('='));
      has_inline = true;
    }
    auto take_value = [&]() -> std::optional<std::string_view> {
      if (has_inline) return value;
      if (i + 1 >= args.size()) return std::nullopt;
      return args[++i];
    };
    if (a == "--help" || a == "-h") {
      o.help = true;
    } else if (a == "-o" || a == "--output") {
      auto v = take_value();
      if (!v || v->empty()) return std::string(a) + " needs a file name";
      o.output = std::string(*v);
    } else if (a == "--vocab-dir") {
      auto v = take_value();
      if (!v || v->empty()) return "--vocab-dir needs a folder";
      o.vocab_dir = std::string(*v);
    } else if (a == "--val-fraction") {
      auto v = take_value();
      if (!v) return "--val-fraction needs a number in [0, 1)";
      const std::string s(*v);
      char* end = nullptr;
      errno = 0;
      const double f = std::strtod(s.c_str(), &end);
      if (s.empty() || end != s.c_str() + s.size() || errno != 0 || !(f >= 0.0 && f < 1.0)) {
        return "--val-fraction must be a number in [0, 1), got '" + s + "'";
      }
      o.val_fraction = f;
    } else if (a.size() > 1 && a[0] == '-') {
      return "unknown option '" + std::string(args[i]) + "'";
    } else {
      positional.push_back(a);
    }
  }
  if (o.help) return "";
  if (positional.empty()) return "no command (expected encode or decode)";
  o.command = std::string(positional[0]);
  if (o.command != "encode" && o.command != "decode") return "unknown command '" + o.command + "' (expected encode or decode)";
  if (positional.size() < 2) return o.command + " needs an input file";
  if (positional.size() > 2) return "unexpected argument '" + std::string(positional[2]) + "'";
  o.input = std::string(positional[1]);
  if (o.command == "encode" && o.output.empty()) return "encode needs -o OUT.bin";
  if (o.command == "decode" && o.val_fraction) return "--val-fraction is an encode option";
  return "";
}

rankscope::Status read_text(const std::string& path, std::string& out) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return rankscope::not_found(path + ": no such file");
  if (std::filesystem::is_directory(path, ec)) return rankscope::invalid_argument(path + ": is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) return rankscope::io_error(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  out = std::move(ss).str();
  return rankscope::Status::ok_status();
}

int fail(std::FILE* err, const std::string& message) {
  std::fprintf(err, "gpt2-tokenize: %s\n", message.c_str());
  return kExitError;
}

int fail(std::FILE* err, const rankscope::Status& status) { return fail(err, status.to_string()); }

size_t distinct(std::span<const TokenId> tokens) {
  std::vector<bool> seen(65536, false);
  size_t n = 0;
  for (TokenId t : tokens) {
    if (t >= 0 && t < 65536 && !seen[t]) seen[t] = true, ++n;
  }
  return n;
}

int encode_command(const Options& o, const std::string& vocab_dir, std::FILE* out, std::FILE* err) {
  std::string text;
  if (auto s = read_text(o.input, text); !s.ok()) return fail(err, s);
  auto loaded = Gpt2Tokenizer::load_dir(vocab_dir);
  if (!loaded.ok()) return fail(err, loaded.status());
  Gpt2Tokenizer& tok = *loaded;
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<TokenId> tokens = tok.encode(text);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(out, "%s: %zu bytes -> %zu tokens (%zu distinct) in %.3f s\n", o.input.c_str(), text.size(),
               tokens.size(), distinct(tokens), seconds);
  const std::span<const TokenId> all(tokens);
  if (!o.val_fraction || *o.val_fraction == 0.0) {
    if (auto s = write_token_shard(o.output, all); !s.ok()) return fail(err, s);
    std::fprintf(out, "wrote %s: %zu tokens\n", o.output.c_str(), tokens.size());
    return 0;
  }
  const ValidationSplit split = choose_validation_split(text, all, tok, *o.val_fraction);
  const std::string train_path = shard_path_with_suffix(o.output, "_train");
  const std::string val_path = shard_path_with_suffix(o.output, "_val");
  if (auto s = write_token_shard(train_path, all.first(split.token_index)); !s.ok()) return fail(err, s);
  if (auto s = write_token_shard(val_path, all.subspan(split.token_index)); !s.ok()) return fail(err, s);
  std::fprintf(out, "split at byte %zu of %zu (a %s boundary): val holds %.2f%% of the bytes\n",
               split.byte_offset, text.size(), split_boundary_name(split.boundary),
               text.empty() ? 0.0 : 100.0 * double(text.size() - split.byte_offset) / double(text.size()));
  std::fprintf(out, "wrote %s: %zu tokens\n", train_path.c_str(), split.token_index);
  std::fprintf(out, "wrote %s: %zu tokens\n", val_path.c_str(), tokens.size() - split.token_index);
  return 0;
}

int decode_command(const Options& o, const std::string& vocab_dir, std::FILE* out, std::FILE* err) {
  auto tokens = read_token_shard(o.input);
  if (!tokens.ok()) return fail(err, tokens.status());
  auto tok = Gpt2Tokenizer::load_dir(vocab_dir);
  if (!tok.ok()) return fail(err, tok.status());
  auto text = tok->decode(*tokens);
  if (!text.ok()) return fail(err, o.input + ": " + text.status().to_string());
  if (o.output.empty()) {
    if (std::fwrite(text->data(), 1, text->size(), out) != text->size()) return fail(err, "write to stdout failed");
    std::fflush(out);
    return 0;
  }
  std::ofstream f(o.output, std::ios::binary | std::ios::trunc);
  f.write(text->data(), static_cast<std::streamsize>(text->size()));
  f.flush();
  if (!f) return fail(err, o.output + ": cannot write: " + std::strerror(errno));
  return 0;
}

}  // namespace

std::string shard_path_with_suffix(const std::string& path, std::string_view suffix) {
  std::string stem = path;
  if (stem.size() >= 4 && stem.compare(stem.size() - 4, 4, ".bin") == 0) stem.resize(stem.size() - 4);
  return stem + std::string(suffix) + ".bin";
}

int run_tokenize_cli(std::span<const std::string_view> args, std::FILE* out, std::FILE* err) {
  Options o;
  const std::string problem = parse(args, o);
  if (o.help) {
    std::fprintf(out, kUsage, default_vocab_dir().c_str());
    return 0;
  }
  if (!problem.empty()) {
    std::fprintf(err, "gpt2-tokenize: %s (see gpt2-tokenize --help)\n", problem.c_str());
    return kExitError;
  }
  const std::string vocab_dir = o.vocab_dir.empty() ? default_vocab_dir() : o.vocab_dir;
  return o.command == "encode" ? encode_command(o, vocab_dir, out, err) : decode_command(o, vocab_dir, out, err);
}

}  // namespace gpt2
