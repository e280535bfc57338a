// fr_discovery.h — which files of a directory (or a prefix) are one job's Flight Recorder dumps, and
// each one's rank. Private to the importer.
//
// Is: PyTorch names a dump <prefix><global rank> (TORCH_FR_DUMP_TEMP_FILE, formerly
// TORCH_NCCL_DEBUG_INFO_TEMP_FILE; default ~/.cache/torch/comm_lib_trace_rank_, older /tmp/nccl_trace_rank_;
// nvidia-resiliency-ext's tests use _dump_), so the rank is the name's trailing number. Users also set
// the prefix per host (nccl_trace_rank_container-node02_5, pytorch/pytorch#140879): prefixes that
// differ only after a common stem are one job when no rank repeats among them. Otherwise, with several
// prefixes in one directory, the one with the most files wins (files of two jobs are never merged).
// A file counts only if its first byte is a pickle's (0x80) or JSON's ('{').
// Is not: reading the files.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace rankscope::torch_fr {

struct DumpFile {
  int rank = -1;
  std::filesystem::path file;
};

struct DiscoveredDumps {
  std::vector<DumpFile> files;  // by rank
  std::string pattern;          // for messages: "DIR/_dump_*", "DIR/nccl_trace_rank_container-node0*_*"
};

DiscoveredDumps discover_dumps(const std::filesystem::path& path);

// Whether discover_dumps(path) finds any: a directory's first dump answers (a look, not a listing
// of 16,384 files each opened).
bool has_dumps(const std::filesystem::path& path);

}  // namespace rankscope::torch_fr
