// gather_cli.h — the command lines of `rankscope snapshot`, `rankscope gather` and hangdoctor's
// gathering flags (--slurm, --hosts/--exec), as functions the thin mains call.
//
// Is: flag parsing, the default remote binary (this rankscope's absolute path, or the rankscope
// beside hangdoctor), the temporary gather folder of `hangdoctor --slurm`, and the printed
// summaries. Exit codes: 0 all well, 1 a problem found (a node unreachable), 2 bad input. Is not:
// the work (node_snapshot.h, gather.h) or the diagnosis (hangdoctor_app.h).
#pragma once

#include <cstdio>
#include <span>
#include <string_view>
#include <vector>

#include "rankscope/cli/hangdoctor_app.h"
#include "rankscope/format/option_table.h"
#include "rankscope/gather/kineto_gather.h"

namespace rankscope::cli {

using Args = std::span<const std::string_view>;

// `rankscope snapshot RUN_DIR [--stacks] [--all-hosts]`: the stream goes to `out` (stdout).
int snapshot_main(Args args, std::FILE* out = stdout, std::FILE* err = stderr);
// `rankscope gather RUN_DIR (--slurm JOBID | --hosts FILE --exec CMD) -o DIR [--deadline S] ...`
int gather_main(Args args, std::FILE* out = stdout, std::FILE* err = stderr);
// hangdoctor: with --slurm or --hosts, gathers first (into --gather-dir or a temporary folder) and
// diagnoses what was gathered; otherwise run_hangdoctor unchanged.
int hangdoctor_main(Args args, const HangdoctorEnv& env = {});
// Every flag of hangdoctor that takes a value, its own and the gathering ones: what the exception
// boundary of its main skips when it names the input.
std::vector<std::string_view> hangdoctor_value_flags();

// `rankscope kineto-pack TRACE|DIR... [--threads N]` (run on a node by `import-kineto --slurm`): this
// node's traces, read here, as a stream on `out` (kineto_import.h pack_traces).
int kineto_pack_main(Args args, std::FILE* out = stdout, std::FILE* err = stderr);

// The option tables of `rankscope snapshot`, `gather` and `kineto-pack` (format/option_table.h): the
// rankscope exception boundary skips the values of their value flags when it names the input.
std::span<const format::Option> snapshot_options();
std::span<const format::Option> gather_options();
std::span<const format::Option> kineto_pack_options();

// The gathering flags `import-kineto` shares with `gather` (--slurm, --hosts, --exec, --deadline,
// --remote-rankscope, --max-parallel): whether `flag` is one, and whether it takes a value.
bool is_gather_flag(std::string_view flag, bool* takes_value = nullptr);

// `import-kineto TRACE|DIR... --slurm JOBID|--hosts FILE --exec T -o RUN_DIR`: `gather_args` holds the
// gathering flags (with their values), `inputs` the traces as the nodes see them. Bad flags are an
// error result, as are the import's own.
Result<gather::KinetoGatherResult> import_kineto_on_nodes(Args gather_args, const std::vector<std::string>& inputs,
                                                          const std::filesystem::path& run_dir,
                                                          const kineto::ImportOptions& options);

}  // namespace rankscope::cli
