// range_names.cpp — see range_names.h.
#include "rankscope/analyzers/skew/range_names.h"

#include <algorithm>
#include <cctype>

namespace rankscope::analyzers {

std::string_view parent_range(std::string_view name) {
  const size_t slash = name.rfind('/');
  return slash == std::string_view::npos ? std::string_view{} : name.substr(0, slash);
}

int range_depth(std::string_view name) {
  if (name.empty()) return 0;
  return 1 + int(std::count(name.begin(), name.end(), '/'));
}

std::string_view top_level_range(std::string_view name) { return name.substr(0, name.find('/')); }

bool is_same_or_under(std::string_view name, std::string_view ancestor) {
  if (name.size() < ancestor.size() || name.substr(0, ancestor.size()) != ancestor) return false;
  return name.size() == ancestor.size() || name[ancestor.size()] == '/';
}

bool has_component(std::string_view name, std::string_view component) {
  size_t begin = 0;
  while (begin <= name.size()) {
    size_t end = name.find('/', begin);
    if (end == std::string_view::npos) end = name.size();
    if (name.substr(begin, end - begin) == component) return true;
    begin = end + 1;
  }
  return false;
}

std::string block_wildcard(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  size_t begin = 0;
  while (begin <= name.size()) {
    size_t end = name.find('/', begin);
    if (end == std::string_view::npos) end = name.size();
    std::string_view part = name.substr(begin, end - begin);
    const bool numbered_block = part.size() > 5 && part.substr(0, 5) == "block" &&
                                std::all_of(part.begin() + 5, part.end(),
                                            [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    if (!out.empty() || begin > 0) out += '/';
    out += numbered_block ? std::string_view("block*") : part;
    begin = end + 1;
  }
  return out;
}

}  // namespace rankscope::analyzers
