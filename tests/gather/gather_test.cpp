// gather_test.cpp — `rankscope gather` and `hangdoctor --hosts/--slurm` over fake nodes (a launcher
// script per "host" folder; fake squeue/scontrol/srun on PATH): the gathered run gives the verdict
// the local run gives, process states travel exactly, a silent node costs the deadline and is named
// with its ranks, and hostile or failing nodes lose nothing of the others.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gather_test_support.h"
#include "rankscope/analyzers/hang/snapshot_process_table.h"
#include "rankscope/cli/gather_cli.h"
#include "rankscope/format/gathered_run.h"
#include "rankscope/format/run_directory.h"
#include "rankscope/gather/gather.h"
#include "rankscope/gather/node_snapshot.h"

namespace rankscope::gather {
namespace {

using testing::make_split_run;
using testing::rankscope_binary;
using testing::scratch;
using testing::write_fake_node;
using testing::write_file;

struct Ran {
  int rc = -1;
  std::string out, err;
};

std::string slurp(std::FILE* f) {
  std::rewind(f);
  std::string s;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
  std::fclose(f);
  return s;
}

Ran hangdoctor(std::vector<std::string> args) {
  std::vector<std::string_view> views(args.begin(), args.end());
  rankscope::cli::HangdoctorEnv env;
  env.out = std::tmpfile();
  env.err = std::tmpfile();
  Ran r;
  r.rc = cli::hangdoctor_main(views, env);
  r.out = slurp(env.out);
  r.err = slurp(env.err);
  return r;
}

Ran gather_cli(std::vector<std::string> args) {
  std::vector<std::string_view> views(args.begin(), args.end());
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  Ran r;
  r.rc = cli::gather_main(views, out, err);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in, nullptr, false);
}

std::string snapshot_command(bool all_hosts = false, bool full = false) {
  return "'" + rankscope_binary() + "' snapshot run" + (all_hosts ? " --all-hosts" : "") + (full ? " --full" : "");
}

std::vector<GatherTarget> fake_targets(const std::filesystem::path& root, const std::vector<std::string>& hosts,
                                       bool all_hosts = false, bool full = false) {
  auto t = exec_targets(hosts, write_fake_node(root), snapshot_command(all_hosts, full));
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? *t : std::vector<GatherTarget>{};
}

// The same verdict from the nodes' summaries (the default) and from their whole recorders (--full).
class GatheredRun : public ::testing::TestWithParam<bool> {};

TEST_P(GatheredRun, GivesTheLocalVerdict) {
  const bool full = GetParam();
  const auto root = scratch(full ? "verdict_full" : "verdict");
  make_split_run(root, {"n1", "n2"}, 8, "stall:rank=5,step=3,range=forward/block1/mlp");
  GatherOptions o;
  o.out_dir = root / "gathered";
  o.run_dir = "run";
  auto record = gather_nodes(fake_targets(root, {"n1", "n2"}, false, full), o);
  ASSERT_TRUE(record.ok()) << record.status().message();
  EXPECT_EQ(record->answered(), 2);
  EXPECT_TRUE(record->ranks_missing.empty());
  EXPECT_EQ(record->nodes[0].ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(record->nodes[1].ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_GT(record->stream_bytes, 0u);
  // Whole recorders as each node sent them, or every node's summaries in one file; the nodes'
  // manifests in one file; DIR as a plain run directory of every rank.
  EXPECT_EQ(std::filesystem::exists(root / "gathered/hosts/n2/rank00005.flight"), full);
  EXPECT_EQ(std::filesystem::exists(root / "gathered/summaries.ranks"), !full);
  EXPECT_EQ(read_json(root / "gathered/snapshots.json").size(), 2u);
  auto run = format::open_run_directory(root / "gathered");
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->ranks_readable(), 8);

  const Ran local = hangdoctor({(root / "local/run").string(), "--json", (root / "local.json").string()});
  const Ran gathered = hangdoctor({(root / "gathered").string(), "--json", (root / "gathered.json").string()});
  EXPECT_EQ(local.rc, 1);
  EXPECT_EQ(gathered.rc, local.rc) << gathered.out << gathered.err;
  const auto a = read_json(root / "local.json"), b = read_json(root / "gathered.json");
  EXPECT_EQ(a["verdict"], b["verdict"]);
  EXPECT_EQ(a["culprit_ranks"], b["culprit_ranks"]);
  EXPECT_EQ(a["collective"], b["collective"]);
  EXPECT_EQ(a["headline"], b["headline"]);
  // The first line says how many nodes answered and how long the gather took.
  EXPECT_EQ(gathered.out.rfind("gathered: 2 of 2 nodes answered in ", 0), 0u) << gathered.out;
  EXPECT_EQ(b["gather"]["nodes_answered"], 2);
  if (full) return;
  // Summaries move a small share of what whole recorders do (a synthetic recorder here is 65 kB).
  GatherOptions whole = o;
  whole.out_dir = root / "gathered_full";
  auto full_record = gather_nodes(fake_targets(root, {"n1", "n2"}, false, true), whole);
  ASSERT_TRUE(full_record.ok());
  EXPECT_LT(record->stream_bytes * 2, full_record->stream_bytes);
}

INSTANTIATE_TEST_SUITE_P(Summaries, GatheredRun, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? std::string("full") : std::string("summaries"); });

TEST(Gather, HangdoctorHostsGathersThenDiagnoses) {
  const auto root = scratch("hosts");
  make_split_run(root, {"n1", "n2"}, 8, "stall:rank=6,step=2,range=forward/block0/attn");
  write_file(root / "hosts.txt", "# the job's nodes\nn1\n\nn2  # second\n");
  const Ran r = hangdoctor({"run", "--hosts", (root / "hosts.txt").string(), "--exec", write_fake_node(root),
                            "--remote-rankscope", rankscope_binary(), "--gather-dir", (root / "kept").string(),
                            "--json", (root / "d.json").string()});
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("gathered: 2 of 2 nodes answered", 0), 0u) << r.out;
  EXPECT_EQ(read_json(root / "d.json")["culprit_ranks"], nlohmann::json::array({6})) << r.out;
  EXPECT_TRUE(format::is_gathered_run(root / "kept"));
  // Without --gather-dir the gathered copy is temporary.
  const Ran again = hangdoctor({"run", "--hosts", (root / "hosts.txt").string(), "--exec", write_fake_node(root),
                                "--remote-rankscope", rankscope_binary()});
  EXPECT_EQ(again.rc, 1) << again.err;
  EXPECT_EQ(again.out.find("kept in"), std::string::npos);
}

// A child stopped with SIGSTOP; killed and reaped by the destructor.
class StoppedChild {
 public:
  StoppedChild() {
    pid_ = ::fork();
    if (pid_ == 0)
      for (;;) ::pause();
    ::kill(pid_, SIGSTOP);
    int st = 0;
    ::waitpid(pid_, &st, WUNTRACED);
  }
  ~StoppedChild() { kill_now(); }
  void kill_now() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

TEST(Gather, ProcessStatesTravelWithTheSnapshot) {
  const auto root = scratch("frozen");
  StoppedChild child;
  synth::SynthOptions so;
  so.live_pid = child.pid();
  make_split_run(root, {"n1", "n2"}, 4, "stall:rank=3,step=2", so);
  GatherOptions o;
  o.out_dir = root / "gathered";
  auto record = gather_nodes(fake_targets(root, {"n1", "n2"}), o);
  ASSERT_TRUE(record.ok());
  ASSERT_EQ(record->answered(), 2);
  // While the process is still stopped, the local view of the same run is the reference.
  hangdoctor({(root / "local/run").string(), "--json", (root / "local.json").string()});
  const pid_t pid = child.pid();
  child.kill_now();  // the snapshot, not this machine's /proc, must answer from now on
  auto table = analyzers::hang::SnapshotProcessTable::load(root / "gathered");
  ASSERT_TRUE(table.ok());
  const auto host = analyzers::this_host_name();
  const auto s = table->status(host, pid);
  EXPECT_EQ(s.alive, analyzers::Liveness::kAlive);
  EXPECT_EQ(s.state, analyzers::hang::OsRunState::kStopped);
  EXPECT_GE(s.threads, 1);
  EXPECT_EQ(table->local_host(), "");
  EXPECT_EQ(table->status(host, pid + 100000).alive, analyzers::Liveness::kUnknown);  // never seen: unknown, not gone
  EXPECT_TRUE(table->speaks_for_boot("n1", analyzers::this_boot_id()));
  EXPECT_FALSE(table->speaks_for_boot("n1", "another-boot"));
  analyzers::hang::SystemProcessTable here;
  EXPECT_EQ(here.liveness(host, pid), analyzers::Liveness::kGone);

  // The gathered run, read after the process died, says what the local run said before: every
  // rank alive, each rank's state and the verdict the same.
  hangdoctor({(root / "gathered").string(), "--json", (root / "gathered.json").string()});
  const auto local = read_json(root / "local.json"), gathered = read_json(root / "gathered.json");
  ASSERT_TRUE(gathered.contains("ranks") && local.contains("ranks"));
  EXPECT_EQ(local["headline"], gathered["headline"]);
  ASSERT_EQ(local["ranks"].size(), gathered["ranks"].size());
  for (size_t i = 0; i < local["ranks"].size(); ++i) {
    const auto &a = local["ranks"][i], &b = gathered["ranks"][i];
    EXPECT_EQ(b["liveness"], "alive") << b.dump();
    EXPECT_EQ(a["liveness"], b["liveness"]);
    EXPECT_EQ(a["state"], b["state"]);
    EXPECT_EQ(a.value("os_state", ""), b.value("os_state", ""));
  }
  // And the local run, read now, has lost that: its process is gone.
  hangdoctor({(root / "local/run").string(), "--json", (root / "now.json").string()});
  EXPECT_EQ(read_json(root / "now.json")["ranks"][0]["liveness"], "gone");
}

TEST(Gather, SilentNodeIsUnreachableWithItsRanksWithinTheDeadline) {
  const auto root = scratch("silent");
  make_split_run(root, {"n1", "n2", "n3"}, 6, "");
  write_file(root / "n2" / "sleep", "");
  write_file(root / "hosts.txt", "n1\nn2\nn3\n");
  const auto start = std::chrono::steady_clock::now();
  const Ran r = hangdoctor({"run", "--hosts", (root / "hosts.txt").string(), "--exec", write_fake_node(root),
                            "--remote-rankscope", rankscope_binary(), "--deadline", "1.5", "--gather-dir",
                            (root / "g").string()});
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The node sleeps 120 s; only the deadline can have ended the gather this early.
  EXPECT_LT(took, 60.0);
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("gathered: 2 of 3 nodes answered", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("node n2 is unreachable (no answer within the 1.5 s deadline): its ranks 2,3 are unseen"),
            std::string::npos) << r.out;
  auto rec = format::read_gather_record(root / "g");
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->ranks_missing, (std::vector<int>{2, 3}));
  EXPECT_FALSE(rec->nodes[1].answered);
  EXPECT_EQ(rec->nodes[1].missing_ranks, (std::vector<int>{2, 3}));
  EXPECT_TRUE(rec->nodes[0].answered && rec->nodes[2].answered);
}

// Two silent nodes: run.json's hosts (gpt2-train writes every rank's) say whose ranks are whose.
TEST(Gather, SilentNodesGetTheirRanksFromRunJsonHosts) {
  const auto root = scratch("two_silent");
  synth::SynthOptions o;
  o.ranks = 6;
  o.steps = 3;
  o.ranks_per_host = 2;  // run.json: synth-node0 holds ranks 0-1, synth-node1 2-3, synth-node2 4-5
  ASSERT_TRUE(synth::write_synthetic_run(root / "local", o).ok());
  const std::vector<std::string> hosts = {"synth-node0", "synth-node1", "synth-node2"};
  for (int h = 0; h < 3; ++h) {
    const auto dir = root / hosts[size_t(h)] / "run";
    std::filesystem::create_directories(dir);
    if (h == 0) std::filesystem::copy_file(root / "local/run.json", dir / "run.json");
    for (int r = 2 * h; r < 2 * h + 2; ++r)
      std::filesystem::copy_file(format::flight_recorder_path(root / "local", r), format::flight_recorder_path(dir, r));
  }
  write_file(root / "synth-node1" / "fail", "");
  write_file(root / "synth-node2" / "sleep", "");
  GatherOptions go;
  go.out_dir = root / "g";
  go.deadline_s = 1.5;
  auto rec = gather_nodes(fake_targets(root, hosts, /*all_hosts=*/true), go);  // recorders name synth hosts
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->answered(), 1);
  EXPECT_EQ(rec->ranks_missing, (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(rec->nodes[1].missing_ranks, (std::vector<int>{2, 3}));
  EXPECT_EQ(rec->nodes[2].missing_ranks, (std::vector<int>{4, 5}));
  EXPECT_NE(rec->nodes[2].reason.find("deadline"), std::string::npos);
}

TEST(Gather, FailingLauncherIsRecordedWithWhatItSaid) {
  const auto root = scratch("fail");
  make_split_run(root, {"n1", "n2"}, 4, "");
  write_file(root / "n2" / "fail", "");
  write_file(root / "hosts.txt", "n1\nn2\n");
  const Ran r = gather_cli({"run", "--hosts", (root / "hosts.txt").string(), "--exec", write_fake_node(root),
                            "--remote-rankscope", rankscope_binary(), "-o", (root / "g").string()});
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.out.find("node n2 is unreachable (exit 255: ssh: connect to host n2 port 22: Connection refused)"),
            std::string::npos) << r.out;
  auto run = format::open_run_directory(root / "g");  // n1's ranks 0 and 1, summarized
  ASSERT_TRUE(run.ok());
  EXPECT_TRUE(run->ranks[1].flight.has_value());
  EXPECT_FALSE(run->ranks[2].flight.has_value());
}

// A node that sends something other than a good stream; the other node's data must all be kept.
struct Hostile {
  const char* name;
  const char* reason;  // a part of the recorded reason
};

class HostileNode : public ::testing::TestWithParam<Hostile> {};

std::vector<uint8_t> good_stream(const std::filesystem::path& dir) {
  const auto out = dir / "good.snap";
  const std::string cmd = "cd '" + dir.string() + "' && " + snapshot_command() + " > '" + out.string() + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream in(out, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), {});
}

std::vector<uint8_t> hand_made(const std::string& name, uint64_t declared, const std::string& data, uint32_t version = 1) {
  std::vector<uint8_t> body{'F', uint8_t(name.size()), 0};
  body.insert(body.end(), name.begin(), name.end());
  for (int i = 0; i < 8; ++i) body.push_back(uint8_t(declared >> (8 * i)));
  body.insert(body.end(), data.begin(), data.end());
  std::vector<uint8_t> out(format::kSnapshotMagic, format::kSnapshotMagic + 8);
  for (int i = 0; i < 4; ++i) out.push_back(uint8_t(version >> (8 * i)));
  for (int i = 0; i < 4; ++i) out.push_back(0);
  uLongf n = compressBound(uLong(body.size()));
  std::vector<uint8_t> z(n);
  compress2(z.data(), &n, body.data(), uLong(body.size()), 9);
  out.insert(out.end(), z.begin(), z.begin() + long(n));
  return out;
}

TEST_P(HostileNode, IsReportedAndLosesNothingElse) {
  const Hostile h = GetParam();
  const auto root = scratch(std::string("hostile_") + h.name);
  make_split_run(root, {"n1", "n2"}, 4, "");
  std::vector<uint8_t> stream;
  const std::string kind = h.name;
  if (kind == "truncated") {
    stream = good_stream(root / "n2");
    stream.resize(stream.size() * 2 / 3);
  } else if (kind == "bad_magic") {
    const std::string s = "Warning: Permanently added 'n2' to the list of known hosts.\n";
    stream.assign(s.begin(), s.end());
  } else if (kind == "wrong_version") {
    stream = good_stream(root / "n2");
    stream[8] = 9;
  } else if (kind == "traversal") {
    stream = hand_made("../../../n1/run/run.json", 5, "evil!");
  } else if (kind == "bomb") {
    stream = hand_made("rank00002.flight", uint64_t(1) << 40, std::string(1000, '\0'));
  } else if (kind == "length_past_end") {
    stream = hand_made("rank00002.flight", 5000, "short");
  }
  std::ofstream(root / "n2" / "stream", std::ios::binary).write(reinterpret_cast<const char*>(stream.data()), long(stream.size()));
  const std::string n1_run_json = [&] {
    std::ifstream in(root / "n1/run/run.json");
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }();

  GatherOptions o;
  o.out_dir = root / "g";
  auto rec = gather_nodes(fake_targets(root, {"n1", "n2"}), o);
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  EXPECT_TRUE(rec->nodes[0].answered);
  EXPECT_FALSE(rec->nodes[1].answered);
  EXPECT_NE(rec->nodes[1].reason.find(h.reason), std::string::npos) << rec->nodes[1].reason;
  auto run = format::open_run_directory(root / "g");
  ASSERT_TRUE(run.ok());
  EXPECT_TRUE(run->ranks[0].flight && run->ranks[1].flight);  // n1's data is whole
  EXPECT_TRUE(format::read_gather_record(root / "g").ok());
  // Nothing was written where it does not belong.
  std::ifstream in(root / "n1/run/run.json");
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), {}), n1_run_json);
  EXPECT_FALSE(std::filesystem::exists(root / "run.json"));
  EXPECT_FALSE(std::filesystem::exists(root / "g" / "n1"));
}

INSTANTIATE_TEST_SUITE_P(Streams, HostileNode,
                         ::testing::Values(Hostile{"truncated", "truncated"}, Hostile{"bad_magic", "bad magic"},
                                           Hostile{"wrong_version", "version 9"},
                                           Hostile{"traversal", "not a plain relative path"},
                                           Hostile{"bomb", "over the limit"},
                                           Hostile{"length_past_end", "truncated"}),
                         [](const auto& info) { return std::string(info.param.name); });

// A node cut off mid-stream has sent its manifest (first in the stream) but not every recorder: the
// ranks it names without a recorder are its missing ranks, not ranks it sent, and they are not
// handed to another silent node (the Slurm bad_streams test found both).
TEST(Gather, ACutOffNodeKeepsItsOwnMissingRanks) {
  bool saw_a_lost_recorder = false;
  for (int percent : {30, 50, 70, 85}) {
    const auto root = scratch("cut_off_" + std::to_string(percent));
    make_split_run(root, {"n1", "n2", "n3"}, 6, "");
    auto stream = good_stream(root / "n2");
    stream.resize(stream.size() * size_t(percent) / 100);
    std::ofstream(root / "n2" / "stream", std::ios::binary).write(reinterpret_cast<const char*>(stream.data()), long(stream.size()));
    const std::string junk = "not a snapshot\n";
    std::ofstream(root / "n3" / "stream", std::ios::binary) << junk;
    GatherOptions o;
    o.out_dir = root / "g";
    auto rec = gather_nodes(fake_targets(root, {"n1", "n2", "n3"}), o);
    ASSERT_TRUE(rec.ok()) << rec.status().message();
    const auto& n2 = rec->nodes[1];
    const auto& n3 = rec->nodes[2];
    ASSERT_FALSE(n2.answered);
    ASSERT_FALSE(n3.answered);
    std::error_code ec;
    for (int r : n2.ranks) EXPECT_TRUE(std::filesystem::exists(format::flight_recorder_path(o.out_dir, r), ec)) << r;
    for (int r : n2.missing_ranks) EXPECT_FALSE(std::filesystem::exists(format::flight_recorder_path(o.out_dir, r), ec)) << r;
    std::vector<int> n2_all = n2.ranks;
    n2_all.insert(n2_all.end(), n2.missing_ranks.begin(), n2.missing_ranks.end());
    std::sort(n2_all.begin(), n2_all.end());
    if (n2_all.empty()) continue;  // the cut fell before the manifest: nothing to check here
    EXPECT_EQ(n2_all, (std::vector<int>{2, 3})) << percent << "%";
    EXPECT_EQ(n3.missing_ranks, (std::vector<int>{4, 5})) << percent << "%";
    EXPECT_TRUE(n3.ranks.empty());
    saw_a_lost_recorder = saw_a_lost_recorder || !n2.missing_ranks.empty();
  }
  EXPECT_TRUE(saw_a_lost_recorder) << "no cut kept the manifest and lost a recorder: the test checked nothing";
}

TEST(Gather, OutputFolderAndHostNamesAreChecked) {
  const auto root = scratch("checks");
  write_file(root / "precious" / "notes.txt", "mine");
  GatherOptions o;
  o.out_dir = root / "precious";
  auto r = gather_nodes({{"n1", "true"}}, o);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(std::filesystem::exists(root / "precious" / "notes.txt"));
  EXPECT_FALSE(exec_targets({"n1;rm -rf /"}, "ssh {host}", "x").ok());
  EXPECT_FALSE(exec_targets({"n1"}, "ssh", "x").ok());  // no {host}
  EXPECT_FALSE(check_host_name("../n1").ok());
  EXPECT_FALSE(check_host_name("-oProxyCommand=x").ok());
  write_file(root / "dup.txt", "n1\nn1\n");
  EXPECT_FALSE(read_hosts_file(root / "dup.txt").ok());
}

// Slurm's client commands, faked on PATH: squeue knows job 4242 (running on n[1-2]) and job 77
// (pending); srun runs the command "on" the node given with -w (in ROOT/<node>).
class FakeSlurm : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = scratch("slurm");
    make_split_run(root_, {"n1", "n2"}, 4, "stall:rank=2,step=2");
    write_file(root_ / "bin/squeue",
               "#!/bin/sh\ncase \"$3\" in\n 4242) echo 'RUNNING|root|n[1-2]';;\n 77) echo 'PENDING|root|';;\n"
               " *) echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1;;\nesac\n", true);
    write_file(root_ / "bin/scontrol", "#!/bin/sh\n[ \"$3\" = 'n[1-2]' ] && { echo n1; echo n2; exit 0; }\nexit 1\n", true);
    // -w NODE: the command on that node; without it (the one step for every node), on n1 and n2 as
    // tasks 0 and 1, each line labeled as --label does. Every call is one line of srun.calls.
    write_file(root_ / "bin/srun",
               "#!/bin/sh\nroot=$(dirname \"$0\")/..; node=''\necho \"$*\" >> \"$root/srun.calls\"\n"
               "while [ $# -gt 0 ]; do case \"$1\" in -w) node=$2; shift 2;; --quiet) shift; break;; *) shift;; esac; done\n"
               "[ -n \"$node\" ] && { cd \"$root/$node\" && exec \"$@\"; }\n"
               "[ -f \"$root/n2/no-fan-out\" ] && n2=false || n2=true\n"
               "(cd \"$root/n1\" && \"$@\" | sed 's/^/0: /') & ($n2 && cd \"$root/n2\" && \"$@\" | sed 's/^/1: /') & wait\n",
               true);
    old_path_ = std::getenv("PATH") ? std::getenv("PATH") : "";
    ::setenv("PATH", ((root_ / "bin").string() + ":" + old_path_).c_str(), 1);
  }
  void TearDown() override { ::setenv("PATH", old_path_.c_str(), 1); }
  std::filesystem::path root_;
  std::string old_path_;
};

TEST_F(FakeSlurm, GathersEveryNodeOfTheJob) {
  const Ran r = hangdoctor({"run", "--slurm", "4242", "--remote-rankscope", rankscope_binary(), "--gather-dir",
                            (root_ / "g").string(), "--json", (root_ / "d.json").string()});
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("gathered: 2 of 2 nodes of Slurm job 4242 answered", 0), 0u) << r.out;
  EXPECT_EQ(read_json(root_ / "d.json")["culprit_ranks"], nlohmann::json::array({2}));
  auto rec = format::read_gather_record(root_ / "g");
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->launcher, "slurm");
  EXPECT_EQ(rec->job_id, "4242");
}

std::vector<std::string> srun_calls(const std::filesystem::path& root) {
  std::ifstream in(root / "srun.calls");
  std::vector<std::string> calls;
  for (std::string line; std::getline(in, line);) calls.push_back(line);
  return calls;
}

// One srun step for every node (Slurm's fan-out tree), the streams told apart by task label.
TEST_F(FakeSlurm, OneSrunStepServesEveryNode) {
  const Ran r = gather_cli({"run", "--slurm", "4242", "--remote-rankscope", rankscope_binary(), "-o", (root_ / "g").string()});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  const auto calls = srun_calls(root_);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_NE(calls[0].find("-N 2 -n 2 --ntasks-per-node 1 --label"), std::string::npos) << calls[0];
  EXPECT_NE(calls[0].find("snapshot run --text"), std::string::npos) << calls[0];
  auto rec = format::read_gather_record(root_ / "g");
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->answered(), 2);
  EXPECT_EQ(rec->nodes[0].ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(rec->nodes[1].ranks, (std::vector<int>{2, 3}));
  EXPECT_TRUE(rec->problems.empty());
  // --srun-per-node: one step a node, as before.
  std::filesystem::remove(root_ / "srun.calls");
  const Ran per = gather_cli({"run", "--slurm", "4242", "--srun-per-node", "--remote-rankscope", rankscope_binary(), "-o",
                              (root_ / "g2").string()});
  EXPECT_EQ(per.rc, 0) << per.out << per.err;
  EXPECT_EQ(srun_calls(root_).size(), 2u);
}

// A node the one step leaves silent is asked alone within the deadline, and answers for itself.
TEST_F(FakeSlurm, ANodeTheOneStepMissedIsAskedAlone) {
  write_file(root_ / "n2" / "no-fan-out", "");
  const Ran r = gather_cli({"run", "--slurm", "4242", "--remote-rankscope", rankscope_binary(), "-o", (root_ / "g").string()});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  const auto calls = srun_calls(root_);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_NE(calls[1].find("-w n2"), std::string::npos) << calls[1];
  auto rec = format::read_gather_record(root_ / "g");
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->answered(), 2);
  ASSERT_EQ(rec->problems.size(), 1u);
  EXPECT_NE(rec->problems[0].find("sent nothing from n2"), std::string::npos) << rec->problems[0];
}

TEST_F(FakeSlurm, UnknownOrPendingJobIsAClearError) {
  Ran r = gather_cli({"run", "--slurm", "999", "-o", (root_ / "g").string()});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("Invalid job id specified"), std::string::npos) << r.err;
  r = gather_cli({"run", "--slurm", "77", "-o", (root_ / "g").string()});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("is PENDING, not RUNNING"), std::string::npos) << r.err;
  r = gather_cli({"run", "--slurm", "12;reboot", "-o", (root_ / "g").string()});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("a Slurm job id is digits"), std::string::npos) << r.err;
}

TEST_F(FakeSlurm, MissingSrunIsAClearError) {
  std::filesystem::remove(root_ / "bin/srun");
  ::setenv("PATH", (root_ / "bin").string().c_str(), 1);  // nothing else: no real srun either
  const Ran r = gather_cli({"run", "--slurm", "4242", "-o", (root_ / "g").string()});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("srun not found on PATH"), std::string::npos) << r.err;
}

// Stacks of live ranks travel as evidence files (a fake collector: no eu-stack or gdb needed).
class FakeStacks final : public analyzers::hang::StackCollector {
 public:
  Result<std::string> collect(int pid) override {
    ++calls;
    return std::string("#0  0x0000000000401000 fake_frame_of_") + std::to_string(pid) + "\n";
  }
  int calls = 0;
};

TEST(Snapshot, StacksOfLiveRanksTravelAsEvidence) {
  const auto root = scratch("stacks");
  synth::SynthOptions o;
  o.ranks = 2;
  o.steps = 3;
  o.local_host = true;
  o.live_pid = int(::getpid());  // this test process: alive
  ASSERT_TRUE(synth::write_synthetic_run(root / "run", o).ok());
  analyzers::hang::SystemProcessTable processes;
  FakeStacks stacks;
  NodeSnapshotOptions opts;
  opts.stacks = true;
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* out = ::open_memstream(&buf, &len);
  auto summary = write_node_snapshot(root / "run", out, processes, stacks, opts);
  std::fclose(out);
  const std::vector<uint8_t> stream(buf, buf + len);
  std::free(buf);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  EXPECT_EQ(summary->recorders, 2);
  EXPECT_EQ(summary->processes, 1);  // both ranks name one pid: one process, one capture
  EXPECT_EQ(stacks.calls, 1);
  std::string stack_text;
  nlohmann::json manifest;
  auto r = format::decode_snapshot(stream, "s", [&](std::string_view name, std::span<const uint8_t> bytes) {
    const std::string text(bytes.begin(), bytes.end());
    if (name.starts_with("evidence/rank00000-snapshot-")) stack_text = text;
    if (name == "snapshot.json") manifest = nlohmann::json::parse(text);
    return Status{};
  });
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_NE(stack_text.find("fake_frame_of_" + std::to_string(::getpid())), std::string::npos);
  ASSERT_EQ(manifest["processes"].size(), 1u);
  EXPECT_EQ(manifest["processes"][0]["alive"], "alive");
  EXPECT_EQ(manifest["processes"][0]["state"], "runnable");
  EXPECT_EQ(manifest["processes"][0]["ranks"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(manifest["boot_id"], analyzers::this_boot_id());
}

TEST(Snapshot, LeavesOtherHostsRecordersToThem) {
  const auto root = scratch("otherhost");
  synth::SynthOptions o;
  o.ranks = 4;
  o.steps = 3;
  o.ranks_per_host = 2;  // synth-node0, synth-node1: neither is this machine
  ASSERT_TRUE(synth::write_synthetic_run(root / "run", o).ok());
  const auto snap = root / "s.snap";
  ASSERT_EQ(std::system(("cd '" + root.string() + "' && " + snapshot_command() + " > s.snap").c_str()), 0);
  std::ifstream in(snap, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  std::vector<std::string> names;
  auto r = format::decode_snapshot(bytes, "s", [&](std::string_view n, std::span<const uint8_t>) {
    names.emplace_back(n);
    return Status{};
  });
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(names, (std::vector<std::string>{"snapshot.json", "run.json"}));
  ASSERT_EQ(std::system(("cd '" + root.string() + "' && " + snapshot_command(true) + " > all.snap").c_str()), 0);
  EXPECT_GT(std::filesystem::file_size(root / "all.snap"), std::filesystem::file_size(snap));
  // Not a directory: exit 2 and a message on stderr, nothing on stdout.
  EXPECT_NE(std::system(("'" + rankscope_binary() + "' snapshot /nonexistent/run > " + (root / "x.snap").string() + " 2>/dev/null").c_str()), 0);
  EXPECT_EQ(std::filesystem::file_size(root / "x.snap"), 0u);
}

}  // namespace
}  // namespace rankscope::gather
