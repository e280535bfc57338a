// nccl_message.cpp — what one NCCL INFO/WARN message says (docs/log-formats/nccl.md): init lines
// tying a communicator pointer to a rank, COLL lines (one per call), channel transports, the
// topology search's result, settings echoed from the environment, the version, and errors.
#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "log_job.h"
#include "rankscope/format/run_metadata.h"

namespace rankscope::logs {
namespace {

struct OpName {
  std::string_view name;
  format::CollectiveOp op;
};
// NCCL's own names for its calls, as its COLL lines print them (enqueue.cc's opName).
constexpr OpName kOps[] = {
    {"AllReduce", format::CollectiveOp::kAllReduce},     {"AllGather", format::CollectiveOp::kAllGather},
    {"ReduceScatter", format::CollectiveOp::kReduceScatter}, {"Broadcast", format::CollectiveOp::kBroadcast},
    {"Reduce", format::CollectiveOp::kReduce},           {"Send", format::CollectiveOp::kSend},
    {"Recv", format::CollectiveOp::kRecv},               {"AlltoAll", format::CollectiveOp::kAllToAll},
    {"AllToAll", format::CollectiveOp::kAllToAll},       {"Gather", format::CollectiveOp::kGather},
    {"Scatter", format::CollectiveOp::kScatter},         {"Bcast", format::CollectiveOp::kBroadcast},
};

// ncclDataType_t: stable numbering since NCCL 2.0 (bfloat16 = 9 from 2.10).
format::DataType dtype_of(long long t) {
  switch (t) {
    case 1: return format::DataType::kUInt8;
    case 2: return format::DataType::kInt32;
    case 4: return format::DataType::kInt64;
    case 6: return format::DataType::kFloat16;
    case 7: return format::DataType::kFloat32;
    case 8: return format::DataType::kFloat64;
    case 9: return format::DataType::kBFloat16;
    default: return format::DataType::kUnknown;
  }
}

CommMember& member_of(LogJob& job, const LogLine& l, std::string_view pointer) {
  // Most lines are calls on a communicator seen before: found by a hash of its place and pointer,
  // checked, before the ordered map (whose key would be built from strings).
  const uint64_t h = std::hash<std::string_view>{}(pointer) ^ (std::hash<std::string_view>{}(l.host) * 31) ^
                     (uint64_t(uint32_t(l.pid)) << 20);
  if (auto hit = job.member_index.find(h); hit != job.member_index.end()) {
    CommMember* m = hit->second;
    if (m->pid == l.pid && m->pointer == pointer && m->host == l.host) return *m;
  }
  auto [it, fresh] = job.members.try_emplace({std::string(l.host), l.pid, std::string(pointer)});
  job.member_index[h] = &it->second;
  CommMember& m = it->second;
  if (fresh) {
    m.host = l.host;
    m.pid = l.pid;
    m.device = l.device;
    m.pointer = pointer;
  }
  return m;
}

// "... comm 0x55b6aa64a990 rank 0 nranks 2 cudaDev 0 ... commId 0x54fe282d32a87d85 - Init START"
void read_init(LogJob& job, const LogLine& l, std::string_view msg) {
  const std::string_view pointer = value_after(msg, "comm");
  long long rank = -1, nranks = 0;
  if (pointer.empty() || !number_after(msg, "rank", rank)) return;
  if (!number_after(msg, "nranks", nranks) && !number_after(msg, "nRanks", nranks)) return;
  // The job's world is sized by these: a line claiming more ranks than any job has is not an init.
  if (rank < 0 || nranks <= 0 || rank >= nranks || nranks > format::kMaxWorldSize) return;
  CommMember& m = member_of(job, l, pointer);
  long long dev = -1;
  if (number_after(msg, "cudaDev", dev)) m.device = int(dev);  // the printing thread's [dev] may be another's
  if (m.nranks == 0) {
    // Communicators of one size are matched across processes by the order they were made in, where
    // NCCL prints no commId (before 2.2x).
    m.ordinal = job.made_of_size[{m.host, m.pid, m.device, int(nranks)}]++;
    m.first_line = job.lines;
    job.newest_on_device[{m.host, m.pid, m.device}] = &m;
  }
  m.rank = int(rank);
  m.nranks = int(nranks);
  if (auto id = value_after(msg, "commId"); !id.empty()) m.comm_id = id;
  if (msg.find("Init START") != std::string_view::npos) m.init_started = true;
  if (msg.find("Init COMPLETE") != std::string_view::npos) m.init_started = m.init_completed = true;
}

// "<Op>: opCount 4a8 sendbuff 0x.. recvbuff 0x.. count 1024 datatype 7 op 0 root 0 comm 0x.. [nranks=2] stream 0x..":
// the same words in the same order in every NCCL from 2.10 to 2.30, read in one pass as key/value
// pairs (a log can hold millions of them).
bool read_coll(LogJob& job, const LogLine& l, std::string_view msg) {
  const size_t colon = msg.find(": opCount ");
  if (colon == std::string_view::npos || colon > 24) return false;
  const std::string_view name = msg.substr(0, colon);
  const OpName* op = nullptr;
  for (const auto& o : kOps)
    if (o.name == name) op = &o;
  if (!op) return false;
  NcclCall c;
  c.op_name = op->name;
  c.op = op->op;
  std::string_view pointer;
  long long nranks = 0;
  std::string_view rest = msg.substr(colon + 2);
  // Words are short: a loop finds the next space sooner than a call to memchr.
  auto word_end = [&rest] {
    size_t end = 0;
    while (end < rest.size() && rest[end] != ' ') ++end;
    return end;
  };
  while (!rest.empty()) {
    const size_t key_end = word_end();
    if (key_end == rest.size()) break;  // a last word alone is no key/value pair
    const std::string_view key = rest.substr(0, key_end);
    rest.remove_prefix(key_end + 1);
    if (key.starts_with("[nranks=")) {
      std::string_view v = key.substr(8);
      take_number(v, nranks);
      continue;  // "[nranks=N]" is a word of its own: the next word is a key
    }
    const size_t value_end = word_end();
    std::string_view value = rest.substr(0, value_end);
    rest.remove_prefix(std::min(value_end + 1, rest.size()));
    long long v = 0;
    // Keys told apart by length first: most words are not the ones read.
    switch (key.size()) {
      case 7:
        if (key == "opCount" && take_number(value, v, true)) c.op_count = uint64_t(v);
        break;
      case 5:
        if (key == "count" && take_number(value, v)) c.count = uint64_t(v);
        break;
      case 8:
        if (key == "datatype" && take_number(value, v)) {
          c.datatype = int(v);
          c.dtype = dtype_of(v);
        }
        break;
      case 2:
        if (key == "op" && take_number(value, v)) c.red_op = int(v);
        break;
      case 4:
        if (key == "root") {
          if (take_number(value, v)) c.root = int(v);
        } else if (key == "comm") {
          pointer = value;
        }
        break;
      default: break;
    }
  }
  if (pointer.empty()) return false;
  if (c.op == format::CollectiveOp::kAllReduce && c.red_op == 0) c.op = format::CollectiveOp::kAllReduceSum;
  if (c.op == format::CollectiveOp::kAllReduce && c.red_op == 2) c.op = format::CollectiveOp::kAllReduceMax;
  CommMember& m = member_of(job, l, pointer);
  if (m.nranks == 0 && nranks > 0 && nranks <= format::kMaxWorldSize) m.nranks = int(nranks);
  if (c.op == format::CollectiveOp::kSend || c.op == format::CollectiveOp::kRecv) {
    P2pCalls& p = m.p2p[c.root];
    (c.op == format::CollectiveOp::kSend ? p.sends : p.recvs)++;
    ++p.calls;
    p.last = c;
  } else {
    m.last[m.calls % CommMember::kKeep] = c;
    ++m.calls;
  }
  ++job.coll_lines;
  return true;
}

// "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC" (older: "Channel 00 : 0[17000] -> 1[65000] via P2P/IPC").
void read_channel(ProcessLog& p, std::string_view msg) {
  const size_t via = msg.find(" via ");
  if (via == std::string_view::npos) return;
  std::string_view t = msg.substr(via + 5);
  t = t.substr(0, t.find(' '));
  std::string kind;
  if (t.starts_with("NET/")) {
    const size_t slash = t.find('/', 4);
    kind = std::string(t.substr(0, slash));  // NET/IB, NET/Socket, NET/<plugin>
  } else {
    kind = std::string(t.substr(0, t.find('/')));  // P2P, SHM, NVLS, CollNet
  }
  if (!kind.empty()) ++p.transports[kind];
}

ErrorLine::What classify_error(std::string_view m) {
  static constexpr std::string_view kNet[] = {"NET/IB",          "NET/Socket",    "Connection closed", "Connection reset",
                                              "Connection refused", "socket",     "Socket",            "ibv_",
                                              "completion",      "remote peer",   "Net : ",            "NET/Plugin",
                                              "Call to recv",    "Call to send", "Call to connect",   "bootstrap",
                                              "Bootstrap"};
  static constexpr std::string_view kCuda[] = {"Cuda failure", "CUDA error", "cuda", "Cuda", "illegal memory", "ECC"};
  for (auto k : kCuda)
    if (m.find(k) != std::string_view::npos) return ErrorLine::What::kCuda;
  for (auto k : kNet)
    if (m.find(k) != std::string_view::npos) return ErrorLine::What::kNetwork;
  if (m.find("timeout") != std::string_view::npos || m.find("timed out") != std::string_view::npos)
    return ErrorLine::What::kTimeout;
  return ErrorLine::What::kNccl;
}

// A remote address a network error names: "peer 10.0.0.2<43134>", "remote peer 10.0.0.2<43134>",
// "from 10.0.0.2<43134>".
std::string peer_address(std::string_view m) {
  for (size_t lt = m.find('<'); lt != std::string_view::npos; lt = m.find('<', lt + 1)) {
    size_t begin = lt;
    while (begin > 0 && (std::isalnum(static_cast<unsigned char>(m[begin - 1])) || m[begin - 1] == '.' ||
                         m[begin - 1] == ':' || m[begin - 1] == '[' || m[begin - 1] == ']' || m[begin - 1] == '%'))
      --begin;
    const size_t gt = m.find('>', lt);
    if (begin == lt || gt == std::string_view::npos) continue;
    const std::string_view addr = m.substr(begin, lt - begin);
    if (addr.find('.') == std::string_view::npos && addr.find(':') == std::string_view::npos) continue;
    return std::string(m.substr(begin, gt + 1 - begin));
  }
  return {};
}

}  // namespace

void read_nccl_message(LogJob& job, const LogLine& line, const std::string& file, uint64_t line_no) {
  ++job.nccl_lines;
  // A line glued to output without a newline (nccl-tests' result rows) puts text in front of the
  // host: "-1mew0:64904:64904 [1] NCCL INFO ...". Where a known host of the same pid ends the word,
  // that host it is.
  LogLine l = line;
  ProcessLog* recent = job.recent_process(l.host, l.pid);  // its host is a known one
  if (!recent) {
    auto& hosts = job.hosts_of_pid[l.pid];
    if (std::find(hosts.begin(), hosts.end(), l.host) == hosts.end()) {
      const std::string* known = nullptr;
      for (const auto& h : hosts)
        if (l.host.size() > h.size() && l.host.ends_with(h)) known = &h;
      if (known)
        l.host = *known;
      else
        hosts.emplace_back(l.host);
    }
  }
  ProcessLog& p = recent ? *recent : job.process(l.host, l.pid);
  if (l.tagged_rank >= 0) p.tagged_rank = l.tagged_rank;
  const std::string_view msg = l.message;
  if (l.level == 'W' || l.level == 'A') {
    ++p.error_count;
    if (p.errors.size() < ProcessLog::kKeepErrors) {
      ErrorLine e;
      // RAS (2.24+) fails to listen where another NCCL process of the host holds its port: harmless.
      const bool ras = l.source.starts_with("ras/") || msg.starts_with("RAS ");
      e.what = ras ? ErrorLine::What::kOther : classify_error(msg);
      e.text = std::string(msg.substr(0, 300));
      e.peer = peer_address(msg);
      e.line = line_no;
      e.file = file;
      e.rank = l.tagged_rank;
      e.host = l.host;
      p.errors.push_back(std::move(e));
    }
    return;
  }
  if (msg.size() > 10 && msg[0] >= 'A' && msg[0] <= 'Z' && read_coll(job, l, msg)) return;
  if (msg.starts_with("NCCL version ")) {
    std::string_view v = msg.substr(13);
    p.version = std::string(v.substr(0, v.find(' ')));
    return;
  }
  if (msg.find("Init START") != std::string_view::npos || msg.find("Init COMPLETE") != std::string_view::npos) {
    read_init(job, l, msg);
    return;
  }
  if (msg.starts_with("Channel ") && msg.find(" via ") != std::string_view::npos) {
    read_channel(p, msg);
    return;
  }
  if (const size_t at = msg.find(" set by environment to "); at != std::string_view::npos) {
    std::string_view name = msg.substr(0, at);
    if (const size_t sp = name.rfind(' '); sp != std::string_view::npos) name = name.substr(sp + 1);
    std::string_view value = msg.substr(at + 23);
    while (!value.empty() && (value.back() == '.' || value.back() == ' ')) value.remove_suffix(1);
    p.settings[std::string(name)] = std::string(value);
    return;
  }
  if (msg.find(" coll channels,") != std::string_view::npos) {
    // "24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per
    // peer": for the communicator this device set up last.
    std::string_view s = msg;
    long long n = 0;
    if (!take_number(s, n)) return;
    auto newest_it = job.newest_on_device.find({std::string(l.host), l.pid, l.device});
    CommMember* newest = newest_it == job.newest_on_device.end() ? nullptr : newest_it->second;
    if (newest) newest->coll_channels = int(n);
    return;
  }
  if (msg.starts_with("Pattern ") && msg.find("nChannels") != std::string_view::npos) {
    // The topology search's result for one pattern; the ring (pattern 4) is the one to compare.
    long long n = 0;
    if (!number_after(msg, "nChannels", n)) return;
    std::string_view bw = value_after(msg, "bw");
    double per_channel = std::strtod(std::string(bw.substr(0, bw.find('/'))).c_str(), nullptr);
    if (p.search_channels < 0 || msg.starts_with("Pattern 4,")) {
      p.search_channels = int(n);
      p.search_bw = per_channel;
      p.search_type = std::string(value_after(msg, "type"));
    }
    return;
  }
  if (msg.starts_with("Bootstrap") && msg.find("Using ") != std::string_view::npos) {
    // "Bootstrap : Using eth0:10.0.0.1<0>"
    std::string_view s = msg.substr(msg.find("Using ") + 6);
    s = s.substr(0, s.find('<'));
    if (const size_t c = s.find(':'); c != std::string_view::npos) p.bootstrap_address = std::string(s.substr(c + 1));
    return;
  }
  if (msg.starts_with("Using network ")) {
    p.network = std::string(msg.substr(14, msg.find(' ', 14) == std::string_view::npos ? std::string_view::npos
                                                                                          : msg.find(' ', 14) - 14));
    return;
  }
}

}  // namespace rankscope::logs
