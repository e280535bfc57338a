// text_stream.cpp — base64 lines, and their split by srun's task labels.
#include "rankscope/gather/text_stream.h"

#include <array>

#include <fmt/format.h>

namespace rankscope::gather {
namespace {

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int8_t, 256> base64_values() {
  std::array<int8_t, 256> v{};
  for (auto& x : v) x = -1;
  for (int i = 0; i < 64; ++i) v[uint8_t(kBase64[i])] = int8_t(i);
  return v;
}
constexpr auto kBase64Values = base64_values();

// One task's text so far, and what it decoded to.
struct TaskText {
  uint32_t bits = 0;
  int nbits = 0;
  bool broken = false;  // a character outside base64, or text after padding: nothing more is taken
  bool padded = false;
};

void decode_into(std::string_view text, TaskText& t, std::vector<uint8_t>& out) {
  for (char c : text) {
    if (t.broken) return;
    if (c == '=') {
      t.padded = true;
      continue;
    }
    const int v = kBase64Values[uint8_t(c)];
    if (v < 0 || t.padded) {
      t.broken = true;
      return;
    }
    t.bits = (t.bits << 6) | uint32_t(v);
    t.nbits += 6;
    if (t.nbits >= 8) {
      t.nbits -= 8;
      out.push_back(uint8_t(t.bits >> t.nbits));
    }
  }
}

}  // namespace

std::string base64_lines(std::span<const uint8_t> bytes) {
  std::string out;
  out.reserve(bytes.size() / 3 * 4 + bytes.size() / 57 + 8);
  size_t line = 0;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t a = bytes[i], b = i + 1 < bytes.size() ? bytes[i + 1] : 0,
                   c = i + 2 < bytes.size() ? bytes[i + 2] : 0;
    const uint32_t x = (a << 16) | (b << 8) | c;
    out += kBase64[(x >> 18) & 63];
    out += kBase64[(x >> 12) & 63];
    out += i + 1 < bytes.size() ? kBase64[(x >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kBase64[x & 63] : '=';
    if ((line += 4) == 76) out += '\n', line = 0;
  }
  if (line) out += '\n';
  return out;
}

LabeledStreams split_labeled_base64(std::string_view out, size_t tasks) {
  LabeledStreams r;
  r.by_task.resize(tasks);
  std::vector<TaskText> text(tasks);
  size_t foreign = 0;
  while (!out.empty()) {
    const size_t nl = out.find('\n');
    std::string_view line = out.substr(0, nl);
    out = nl == std::string_view::npos ? std::string_view() : out.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    size_t at = 0;
    while (at < line.size() && line[at] == ' ') ++at;
    size_t task = 0, digits = 0;
    while (at < line.size() && line[at] >= '0' && line[at] <= '9' && digits < 9)
      task = task * 10 + size_t(line[at++] - '0'), ++digits;
    if (digits == 0 || line.substr(at, 2) != ": " || task >= tasks) {
      if (!line.empty()) ++foreign;
      continue;
    }
    decode_into(line.substr(at + 2), text[task], r.by_task[task]);
  }
  if (foreign) r.problems.push_back(fmt::format("{} line(s) of srun's output carried no task's stream", foreign));
  return r;
}

}  // namespace rankscope::gather
