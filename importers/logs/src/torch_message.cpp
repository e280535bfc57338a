// torch_message.cpp — what PyTorch's process-group watchdog and its errors say (docs/log-formats/
// pytorch.md): the timed-out work with its SeqNum, what each rank last enqueued and completed, and
// the errors that name a peer. The same sentences reach a log three ways (c10's logger, the
// exception's text in a Python traceback, torchrun's error file), so they are looked for in every
// line, whatever printed it, and each (rank, group) is counted once.
#include <algorithm>
#include <cctype>

#include "log_job.h"
#include "rankscope/format/run_metadata.h"

namespace rankscope::logs {
namespace {

constexpr std::string_view kTimeout = "Watchdog caught collective operation timeout: ";

// The log prefix of a process group in front of a message: "[Rank 1] ", "[PG 0 Rank 1] ",
// "[PG 0 (default_pg) Rank 1] ", "[PG ID 0 PG GUID 0(default_pg) Rank 1] ". Finds the last one
// that ends before `before`.
struct PgPrefix {
  int rank = -1;
  std::string pg;  // "" where the prefix names no group
  std::string desc;
};
bool find_pg_prefix(std::string_view text, size_t before, PgPrefix& out) {
  size_t close = text.rfind("] ", before);
  while (close != std::string_view::npos) {
    const size_t open = text.rfind('[', close);
    if (open == std::string_view::npos) return false;
    const std::string_view inside = text.substr(open + 1, close - open - 1);
    const size_t rank_at = inside.rfind("Rank ");
    if (rank_at != std::string_view::npos) {
      std::string_view r = inside.substr(rank_at + 5);
      long long rank = -1;
      if (take_number(r, rank) && r.empty() && rank >= 0 && rank < format::kMaxWorldSize) {
        out.rank = int(rank);
        const std::string_view pg_part = inside.substr(0, rank_at);
        // "PG ID 0 PG GUID 0(default_pg) " | "PG 0 (default_pg) " | "PG 0 " | ""
        std::string_view id;
        if (size_t guid = pg_part.find("PG GUID "); guid != std::string_view::npos) id = pg_part.substr(guid + 8);
        else if (pg_part.starts_with("PG ID ")) id = pg_part.substr(6);
        else if (pg_part.starts_with("PG ")) id = pg_part.substr(3);
        if (!id.empty()) {
          const size_t paren = id.find('(');
          std::string_view num = id.substr(0, std::min(paren, id.find(' ')));
          if (!num.empty()) out.pg = std::string(num);
          if (paren != std::string_view::npos) {
            const size_t end = id.find(')', paren);
            if (end != std::string_view::npos) out.desc = std::string(id.substr(paren + 1, end - paren - 1));
          }
        }
        // "[PG 3 Rank 5] ... thread terminated with exception: [Rank 5] Watchdog caught ...": a
        // prefix naming no group takes the group an earlier prefix of the same rank names.
        if (out.pg.empty() && open > 0) {
          PgPrefix outer;
          if (find_pg_prefix(text, open - 1, outer) && outer.rank == out.rank && !outer.pg.empty()) {
            out.pg = outer.pg;
            out.desc = outer.desc;
          }
        }
        return true;
      }
    }
    if (open == 0) return false;
    close = text.rfind("] ", open - 1);
  }
  return false;
}

TorchPgLog& pg_log(LogJob& job, const PgPrefix& p, int tagged_rank, const std::string& file, uint64_t line_no) {
  // Keyed by the global rank where the launcher tagged the line (a subgroup's "Rank N" is its rank
  // in the group), else by the rank as printed.
  auto [it, fresh] = job.torch.try_emplace({tagged_rank >= 0 ? tagged_rank : p.rank, p.pg});
  TorchPgLog& g = it->second;
  if (fresh) {
    g.pg = p.pg;
    g.rank = p.rank;
    g.global_rank = tagged_rank;
    g.file = file;
    g.line = line_no;
  }
  if (!p.desc.empty()) g.pg_desc = p.desc;
  return g;
}

// "WorkNCCL(SeqNum=41, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for
// 600081 milliseconds before timing out."
TorchWork parse_work(std::string_view s) {
  TorchWork w;
  long long v = 0;
  if (number_after(s, "SeqNum=", v)) w.seq = v;
  w.op_type = std::string(value_after(s, "OpType="));
  if (number_after(s, "NumelIn=", v)) w.numel_in = uint64_t(std::max(0LL, v));
  if (number_after(s, "NumelOut=", v)) w.numel_out = uint64_t(std::max(0LL, v));
  if (number_after(s, "Timeout(ms)=", v)) w.timeout_ms = v;
  if (number_after(s, "ran for", v)) w.ran_ms = v;
  return w;
}

ErrorLine::What torch_error(std::string_view m) {
  if (m.find("Detected mismatch between collectives") != std::string_view::npos) return ErrorLine::What::kMismatch;
  // Gloo's receiver checks the size a peer sent against the size it expects (gloo/transport/tcp/
  // pair.cc, enforce "op.preamble.length <= op.nbytes") and aborts the process that RECEIVED it.
  if (m.find("Received data size doesn't match expected size") != std::string_view::npos)
    return ErrorLine::What::kMismatch;
  if (m.find("ncclRemoteError") != std::string_view::npos || m.find("Connection closed by") != std::string_view::npos ||
      m.find("Connection reset by") != std::string_view::npos || m.find("remote process exited") != std::string_view::npos)
    return ErrorLine::What::kNetwork;
  if (m.find("CUDA error") != std::string_view::npos || m.find("illegal memory access") != std::string_view::npos)
    return ErrorLine::What::kCuda;
  if (m.find("Timed out waiting") != std::string_view::npos) return ErrorLine::What::kTimeout;
  if (m.find("NCCL error") != std::string_view::npos || m.find("ncclSystemError") != std::string_view::npos ||
      m.find("ncclInternalError") != std::string_view::npos || m.find("ncclUnhandledCudaError") != std::string_view::npos)
    return ErrorLine::What::kNccl;
  return ErrorLine::What::kOther;
}

// "RuntimeError: ...", "torch.distributed.DistBackendError: ...": a Python exception's last line.
bool is_exception_line(std::string_view m) {
  while (!m.empty() && m.front() == ' ') m.remove_prefix(1);
  const size_t colon = m.find(": ");
  if (colon == std::string_view::npos || colon == 0 || colon > 80) return false;
  const std::string_view name = m.substr(0, colon);
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') return false;
  return name.ends_with("Error") || name.ends_with("Exception") || name.ends_with("Interrupt");
}

// Tracebacks and torchrun's failure table (elastic/multiprocessing/errors): how each rank ended.
void read_failure(LogJob& job, const LogLine& l, std::string_view msg, const std::string& file, uint64_t line_no) {
  const int rank = l.tagged_rank;
  if (rank >= 0) {
    // '  File ".../torch/distributed/distributed_c10d.py", line 4181, in all_reduce'
    if (const size_t at = msg.find("distributed_c10d.py\", line "); at != std::string_view::npos) {
      const size_t in = msg.find(", in ", at);
      if (in != std::string_view::npos) {
        std::string_view call = msg.substr(in + 5);
        call = call.substr(0, call.find(' '));
        if (call != "wrapper") job.traceback_call[rank] = std::string(call);
      }
      return;
    }
    if (const size_t at = msg.find("Detected mismatch between collectives on ranks. Rank "); at != std::string_view::npos) {
      // The wrapper's check: the message names this rank's fingerprint, then the odd rank's.
      long long self = -1, odd = -1;
      std::string_view a = msg.substr(at + 53);
      const size_t but = msg.find("but Rank ", at);
      std::string_view b = but == std::string_view::npos ? std::string_view() : msg.substr(but + 9);
      if (take_number(a, self) && take_number(b, odd) && odd != self) job.named_odd[int(odd)].insert(rank);
    }
    if (const size_t at = msg.find(" failed to pass monitoredBarrier in "); at != std::string_view::npos) {
      // "[Rank 0]: Rank 2 failed ..." or "[Rank 0]: Ranks 1, 2 failed ...": the numbers between
      // "Rank(s) " and " failed" are ranks of the barrier's group, counted from its rank 0.
      const size_t head = msg.rfind("[Rank 0]: Rank", at);
      if (head != std::string_view::npos) {
        std::string_view list = msg.substr(head + 14, at - head - 14);
        if (!list.empty() && list.front() == 's') list.remove_prefix(1);
        std::set<int> named;
        long long n = 0;
        while (!list.empty()) {
          while (!list.empty() && (list.front() == ' ' || list.front() == ',')) list.remove_prefix(1);
          if (list.empty() || !take_number(list, n) || n < 0 || n >= (1 << 20)) break;
          named.insert(int(n));
        }
        if (!named.empty()) job.barrier_absent[rank].insert(named.begin(), named.end());
      }
    }
    if (is_exception_line(msg)) {
      RankFailure& f = job.failures[rank];
      if (!f.error.empty()) return;  // the first exception is the one that ended it
      std::string_view m = msg;
      while (!m.empty() && m.front() == ' ') m.remove_prefix(1);
      f.error = std::string(m.substr(0, 300));
      f.what = torch_error(m);
      if (m.find("Watchdog caught collective operation timeout") != std::string_view::npos) f.what = ErrorLine::What::kTimeout;
      if (auto c = job.traceback_call.find(rank); c != job.traceback_call.end()) f.call = c->second;
      f.file = file;
      f.line = line_no;
    }
    return;
  }
  // The table: "Root Cause (first observed failure):", then "  host      : node1",
  // "  rank      : 3 (local_rank: 3)", "  exitcode  : -9 (pid: 10031)".
  std::string_view m = msg;
  // torchrun's agent: "failed (exitcode: -9) local_rank: 3 (pid: 812917) of binary: ..."
  if (const size_t at = m.find("failed (exitcode: "); at != std::string_view::npos) {
    std::string_view code = m.substr(at + 18);
    long long c = 0, local = -1;
    if (take_number(code, c) && number_after(m, "local_rank:", local) && local >= 0)
      job.local_exits.try_emplace(int(local), int(c), line_no);
    return;
  }
  if (m.starts_with("Root Cause")) {
    job.table_root = true;
    return;
  }
  if (!m.starts_with("  ")) return;
  while (!m.empty() && m.front() == ' ') m.remove_prefix(1);
  auto field = [&](std::string_view name, std::string_view& value) {
    if (!m.starts_with(name)) return false;
    std::string_view rest = m.substr(name.size());
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (!rest.starts_with(": ")) return false;
    value = rest.substr(2);
    return true;
  };
  std::string_view v;
  long long n = 0;
  if (field("host", v)) {
    job.table_host = std::string(v.substr(0, v.find(' ')));
  } else if (field("rank", v) && take_number(v, n)) {
    job.table_rank = int(n);
    RankFailure& f = job.failures[job.table_rank];
    f.exited = true;
    f.host = job.table_host;
    f.root_cause = f.root_cause || job.table_root;
    if (f.file.empty()) {
      f.file = file;
      f.line = line_no;
    }
  } else if (field("exitcode", v) && job.table_rank >= 0 && take_number(v, n)) {
    job.failures[job.table_rank].exitcode = int(n);
    job.table_rank = -1;
  }
}

}  // namespace

bool read_torch_message(LogJob& job, const LogLine& l, const std::string& file, uint64_t line_no) {
  const std::string_view msg = l.message;
  read_failure(job, l, msg, file, line_no);
  bool read = false;
  if (const size_t at = msg.find(kTimeout); at != std::string_view::npos) {
    PgPrefix p;
    if (!find_pg_prefix(msg, at, p)) p.rank = l.tagged_rank;
    if (p.rank < 0) return false;
    TorchPgLog& g = pg_log(job, p, l.tagged_rank, file, line_no);
    TorchWork w = parse_work(msg.substr(at + kTimeout.size()));
    if (!g.timed_out || (w.seq >= 0 && g.timed_out->seq < 0)) g.timed_out = std::move(w);
    read = true;
  }
  // "Timeout at NCCL work: 41, last enqueued NCCL work: 41, last completed NCCL work: 40."
  // "... PG status: last enqueued work: 41, last completed work: 40"
  long long enq = -1, done = -1;
  const bool status = (number_after(msg, "last enqueued NCCL work:", enq) && number_after(msg, "last completed NCCL work:", done)) ||
                      (number_after(msg, "last enqueued work:", enq) && number_after(msg, "last completed work:", done));
  if (status) {
    PgPrefix p;
    const size_t at = msg.find("last enqueued");
    if (!find_pg_prefix(msg, at, p)) p.rank = l.tagged_rank;
    if (p.rank >= 0) {
      TorchPgLog& g = pg_log(job, p, l.tagged_rank, file, line_no);
      g.last_enqueued = std::max<int64_t>(g.last_enqueued, enq);
      g.last_completed = std::max<int64_t>(g.last_completed, done);
      long long failing = -1;
      if (number_after(msg, "at work:", failing) || number_after(msg, "Timeout at NCCL work:", failing) ||
          number_after(msg, "work sequence id:", failing))
        g.failing_seq = failing;
      read = true;
    }
  }
  // The watchdog itself blocked: this rank's own position is unknown (it has work, or it would not
  // be watched).
  if (msg.find("watchdog got stuck") != std::string_view::npos || msg.find("Heartbeat monitor timed out") != std::string_view::npos) {
    PgPrefix p;
    if (!find_pg_prefix(msg, msg.size(), p)) p.rank = l.tagged_rank;
    if (p.rank >= 0) {
      TorchPgLog& g = pg_log(job, p, l.tagged_rank, file, line_no);
      g.watchdog_stuck = true;
      long long n = -1;
      if (number_after(msg, "workMetaList_.size()=", n)) g.outstanding = n;
    }
    read = true;
  }
  if (!read && (l.producer == Producer::kTorch ? l.level == 'E' || l.level == 'F' : true)) {
    const ErrorLine::What what = torch_error(msg);
    if (what != ErrorLine::What::kOther) {
      ErrorLine e;
      e.what = what;
      e.text = std::string(msg.substr(0, 300));
      e.line = line_no;
      e.file = file;
      e.rank = l.tagged_rank;
      e.local_rank = l.tagged_local_rank;
      if (PgPrefix p; e.rank < 0 && find_pg_prefix(msg, msg.size(), p) && p.pg == "0") e.rank = p.rank;
      if (job.other_errors.size() < 64) job.other_errors.push_back(std::move(e));
      read = true;
    }
  }
  return read;
}

void read_line(LogJob& job, const LogLine& l, const std::string& file, uint64_t line_no) {
  ++job.lines;
  if (l.tagged_rank >= 0) ++job.tagged_ranks[l.tagged_rank];
  else if (l.tagged_local_rank >= 0) ++job.tagged_local_ranks[l.tagged_local_rank];
  if (l.producer == Producer::kNccl) {
    read_nccl_message(job, l, file, line_no);
    return;
  }
  if (l.producer == Producer::kTorch) ++job.torch_lines;
  read_torch_message(job, l, file, line_no);
}

ProcessLog* LogJob::recent_process(std::string_view host, int pid) {
  for (size_t i = 0; i < kRecent && recent_[i]; ++i) {
    ProcessLog* p = recent_[i];
    if (p->pid != pid || p->host != host) continue;
    std::rotate(recent_.begin(), recent_.begin() + long(i), recent_.begin() + long(i) + 1);
    return p;
  }
  return nullptr;
}

ProcessLog& LogJob::process(std::string_view host, int pid) {
  if (ProcessLog* p = recent_process(host, pid)) return *p;
  auto [it, fresh] = processes.try_emplace({std::string(host), pid});
  if (fresh) {
    it->second.host = host;
    it->second.pid = pid;
  }
  std::rotate(recent_.begin(), recent_.end() - 1, recent_.end());  // the oldest drops out
  recent_[0] = &it->second;
  return it->second;
}

}  // namespace rankscope::logs
