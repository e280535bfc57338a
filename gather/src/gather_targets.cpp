// gather_targets.cpp — which nodes to ask and with what command: a hosts file + --exec, or Slurm.
//
// Slurm facts (22.05; research/multi-host.md): `squeue -h -j J -o '%T|%u|%N'` gives the state, the
// owner and the compressed node list ("n[1-4]"); `scontrol show hostnames LIST` expands it, one per
// line; `srun --jobid J --overlap` starts a step inside the running job, sharing its resources, and
// only the owner or root may; with -N N --ntasks-per-node 1 it starts one task a node, numbered in
// the order of the node list, and --label prefixes each line of a task's output with "ID: ". squeue exits 1 with
// "Invalid job id specified" for an unknown job.
#include <unistd.h>

#include <fstream>
#include <set>

#include <fmt/format.h>

#include "rankscope/gather/gather.h"
#include "rankscope/gather/node_launch.h"

namespace rankscope::gather {
namespace {

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::string_view rest(path);
  while (!rest.empty()) {
    const size_t colon = std::min(rest.find(':'), rest.size());
    const std::string dir(rest.substr(0, colon));
    if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return true;
    rest = colon < rest.size() ? rest.substr(colon + 1) : std::string_view();
  }
  return false;
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// One local command (squeue, scontrol) with a time limit; its stdout, or why not.
Result<std::string> run_local(const std::string& command, double deadline_s) {
  std::vector<LaunchedCommand> one(1);
  one[0].command = command;
  run_commands(one, deadline_s, 16u << 20, 1);
  const auto& c = one[0];
  const std::string err = trim(c.err_tail);
  if (c.timed_out) return io_error(fmt::format("`{}` gave no answer within {:.0f} s", command, deadline_s));
  if (c.exit_code != 0)
    return invalid_argument(
        fmt::format("`{}` failed (exit {}){}{}", command, c.exit_code, err.empty() ? "" : ": ", err));
  return std::string(c.out.begin(), c.out.end());
}

}  // namespace

Status check_host_name(std::string_view host) {
  if (host.empty() || host.size() > 253 || host[0] == '-' || host[0] == '.')
    return invalid_argument(fmt::format("host name '{:.80}' is empty, too long or starts with '-' or '.'", host));
  for (char c : host)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return invalid_argument(fmt::format("host name '{:.80}' holds a character outside [A-Za-z0-9._-]", host));
  return {};
}

Result<std::vector<std::string>> read_hosts_file(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return not_found(fmt::format("{}: cannot open the hosts file", file.string()));
  std::vector<std::string> hosts;
  std::set<std::string> seen;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    line = trim(line);
    if (line.empty()) continue;
    if (Status s = check_host_name(line); !s.ok())
      return invalid_argument(fmt::format("{}:{}: {}", file.string(), n, s.message()));
    if (!seen.insert(line).second)
      return invalid_argument(fmt::format("{}:{}: host {} listed twice", file.string(), n, line));
    hosts.push_back(line);
  }
  if (hosts.empty()) return invalid_argument(fmt::format("{}: no host in the hosts file", file.string()));
  return hosts;
}

Result<std::vector<GatherTarget>> exec_targets(const std::vector<std::string>& hosts, const std::string& exec_template,
                                               const std::string& snapshot_command) {
  if (exec_template.find("{host}") == std::string::npos)
    return invalid_argument(fmt::format("--exec '{}' has no {{host}} (e.g. 'ssh {{host}}')", exec_template));
  std::vector<GatherTarget> targets;
  for (const auto& host : hosts) {
    RS_RETURN_IF_ERROR(check_host_name(host));
    std::string cmd = exec_template;
    for (size_t at = cmd.find("{host}"); at != std::string::npos; at = cmd.find("{host}", at + host.size()))
      cmd.replace(at, 6, host);
    targets.push_back({host, cmd + " " + snapshot_command});
  }
  return targets;
}

namespace {

// The nodes of a running Slurm job, in the order of its node list (the order srun gives its tasks).
Result<std::vector<std::string>> slurm_job_nodes(const std::string& job_id, double deadline_s) {
  if (job_id.empty() || job_id.find_first_not_of("0123456789_+") != std::string::npos)
    return invalid_argument(
        fmt::format("--slurm '{}': a Slurm job id is digits (e.g. 4242, or 4242_3 for an array task)", job_id));
  for (const char* tool : {"squeue", "scontrol", "srun"})
    if (!on_path(tool))
      return not_found(
          fmt::format("{} not found on PATH: --slurm needs Slurm's client commands on this machine "
                      "(Debian: apt install slurm-client), or use --hosts FILE --exec 'ssh {{host}}'",
                      tool));
  RS_ASSIGN_OR_RETURN(std::string line,
                      run_local(fmt::format("squeue -h -j {} -o '%T|%u|%N'", shell_quote(job_id)), deadline_s));
  line = trim(line);
  if (line.empty())
    return not_found(fmt::format("Slurm job {} is not in the queue (finished, or never existed)", job_id));
  if (line.find('\n') != std::string::npos) line.resize(line.find('\n'));  // an array: its first task
  const size_t bar1 = line.find('|'), bar2 = line.find('|', bar1 == std::string::npos ? 0 : bar1 + 1);
  if (bar1 == std::string::npos || bar2 == std::string::npos)
    return invalid_argument(fmt::format("squeue said '{:.200}' for job {}: not 'STATE|USER|NODES'", line, job_id));
  const std::string state = line.substr(0, bar1), user = line.substr(bar1 + 1, bar2 - bar1 - 1),
                    nodelist = line.substr(bar2 + 1);
  if (state != "RUNNING")
    return invalid_argument(fmt::format("Slurm job {} is {}, not RUNNING: no node runs it to ask", job_id, state));
  const char* me = std::getenv("USER");
  if (::geteuid() != 0 && me && !user.empty() && user != me)
    return invalid_argument(
        fmt::format("Slurm job {} belongs to {}: only its owner or root may srun --overlap into it", job_id, user));
  RS_ASSIGN_OR_RETURN(const std::string names,
                      run_local(fmt::format("scontrol show hostnames {}", shell_quote(nodelist)), deadline_s));
  std::vector<std::string> hosts;
  size_t start = 0;
  while (start < names.size()) {
    const size_t nl = std::min(names.find('\n', start), names.size());
    std::string h = trim(names.substr(start, nl - start));
    if (!h.empty()) hosts.push_back(std::move(h));
    start = nl + 1;
  }
  if (hosts.empty()) return invalid_argument(fmt::format("Slurm job {}: no node in '{}'", job_id, nodelist));
  for (const auto& host : hosts) RS_RETURN_IF_ERROR(check_host_name(host));
  return hosts;
}

std::vector<GatherTarget> one_srun_each(const std::string& job_id, const std::vector<std::string>& hosts,
                                        const std::string& snapshot_command) {
  std::vector<GatherTarget> targets;
  for (const auto& host : hosts)
    targets.push_back({host, fmt::format("srun --jobid {} --overlap --ntasks-per-node 1 -N 1 -n 1 -w {} --quiet {}",
                                         shell_quote(job_id), host, snapshot_command)});
  return targets;
}

}  // namespace

Result<std::vector<GatherTarget>> slurm_targets(const std::string& job_id, const std::string& snapshot_command,
                                                double deadline_s) {
  RS_ASSIGN_OR_RETURN(const auto hosts, slurm_job_nodes(job_id, deadline_s));
  return one_srun_each(job_id, hosts, snapshot_command);
}

Result<FanOutLaunch> slurm_fan_out(const std::string& job_id, const std::string& text_snapshot_command,
                                   const std::string& snapshot_command, double deadline_s) {
  FanOutLaunch l;
  l.job_id = job_id;
  RS_ASSIGN_OR_RETURN(l.hosts, slurm_job_nodes(job_id, deadline_s));
  const size_t n = l.hosts.size();
  // -N and -n as many as the job's nodes, one task each: Slurm numbers the tasks in the order of
  // the job's node list. --label prefixes every line with its task id; --quiet keeps srun's own
  // progress lines off stderr.
  l.command = fmt::format("srun --jobid {} --overlap -N {} -n {} --ntasks-per-node 1 --label --quiet {}",
                          shell_quote(job_id), n, n, text_snapshot_command);
  l.one_each = one_srun_each(job_id, l.hosts, snapshot_command);
  return l;
}

}  // namespace rankscope::gather
