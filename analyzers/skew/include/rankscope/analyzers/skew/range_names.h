// range_names.h — facts about hierarchical range names ("forward/block3/mlp/fc").
//
// Is: the parent of a name, its depth, the top-level component, descendant tests, and the
// block-wildcard form that aggregates a range over transformer blocks ("forward/block*/attn").
// Is not: a registry of which names exist; the trainer owns the names (design §2).
#pragma once

#include <string>
#include <string_view>

namespace rankscope::analyzers {

// "forward/block0/mlp" -> "forward/block0"; "step" -> "".
std::string_view parent_range(std::string_view name);
// Number of '/'-separated components: "forward/embed" -> 2.
int range_depth(std::string_view name);
// "forward/block0/mlp" -> "forward".
std::string_view top_level_range(std::string_view name);
// True when `name` equals `ancestor` or lies below it ("a/b" is under "a", "ab" is not under "a").
bool is_same_or_under(std::string_view name, std::string_view ancestor);
// True when one component of `name` equals `component` ("backward/embed" has "embed").
bool has_component(std::string_view name, std::string_view component);
// Replaces every component "block<digits>" with "block*": "forward/block11/attn" ->
// "forward/block*/attn". Returns the name unchanged when it has no block component.
std::string block_wildcard(std::string_view name);

}  // namespace rankscope::analyzers
