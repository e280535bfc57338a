// name_pool.h — one copy of each name read from flight recorders, shared by every snapshot.
//
// Is: a process-wide set of the names the reader decodes per collective record (the call site,
// "backward/block3/mlp"). A 16K-rank run holds two million records naming a few dozen call sites;
// one heap string each cost a fifth of hangdoctor's time (malloc, free, page faults). The pool
// hands out views that stay valid for the life of the process, so a snapshot, or a copy of one of
// its records in a report, never dangles. Is not: freed. It grows by the distinct names read, each
// at most kNameBytes; a hostile file can add at most one name per record it holds.
#pragma once

#include <string_view>

namespace rankscope::format {

// The pooled copy of `name` (equal content, process lifetime). Thread-safe; a thread that has seen
// the name before finds it without taking the pool's lock.
std::string_view intern_name(std::string_view name);

}  // namespace rankscope::format
