// log_line_test.cpp — the line splitter on every prefix shape NCCL and PyTorch have printed
// (docs/log-formats/nccl.md §a, pytorch.md), each quoted from a real fixture or NCCL's debug.cc.
#include <gtest/gtest.h>

#include "log_line.h"

namespace rankscope::logs {
namespace {

TEST(LogLine, NcclInfo) {
  // nccltests-healthy.log (NCCL 2.27.7)
  const LogLine l = split_log_line("mew0:64904:64921 [1] NCCL INFO Using network IB");
  EXPECT_EQ(l.producer, Producer::kNccl);
  EXPECT_EQ(l.host, "mew0");
  EXPECT_EQ(l.pid, 64904);
  EXPECT_EQ(l.tid, 64921);
  EXPECT_EQ(l.device, 1);
  EXPECT_EQ(l.level, 'I');
  EXPECT_EQ(l.message, "Using network IB");
}

TEST(LogLine, NcclWarnCarriesItsCallSite) {
  // nccl928 fixture (2.18): WARN has "<file>:<line>" between the device and NCCL.
  const LogLine l = split_log_line(
      "H100-2:19989:20082 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
      "fe80::966d:ae03:8b:df78%ib0<53249> with error 4, opcode 32564, len 32564, vendor err 81 (Send)");
  EXPECT_EQ(l.producer, Producer::kNccl);
  EXPECT_EQ(l.host, "H100-2");
  EXPECT_EQ(l.level, 'W');
  EXPECT_EQ(l.source, "transport/net_ib.cc:1295");
  EXPECT_TRUE(l.message.starts_with("NET/IB : Got completion")) << l.message;
}

TEST(LogLine, NcclWarnWithTimestampAndRasSource) {
  // vllm19204 fixture (2.26+): a timestamp in front by default on WARN.
  const LogLine l = split_log_line(
      "[2025-06-05 10:45:19] paula09:2528103:2528103 [0] ras/client_support.cc:160 NCCL WARN Call to bind failed: "
      "Address already in use");
  EXPECT_EQ(l.producer, Producer::kNccl);
  EXPECT_EQ(l.host, "paula09");
  EXPECT_EQ(l.pid, 2528103);
  EXPECT_EQ(l.source, "ras/client_support.cc:160");
  EXPECT_EQ(l.message, "Call to bind failed: Address already in use");
}

TEST(LogLine, NcclCallHasNoDevice) {
  const LogLine l = split_log_line("node1:100:100 NCCL CALL ncclCommInitRank(0x7ffd,2,0x5ad2,0)");
  EXPECT_EQ(l.producer, Producer::kNccl);
  EXPECT_EQ(l.device, -1);
  EXPECT_EQ(l.level, 'C');
}

TEST(LogLine, LauncherPrefixes) {
  LogLine l = split_log_line("[default3]:[rank3]:node7:4242:4242 [3] NCCL INFO NCCL version 2.21.5+cuda12.4");
  EXPECT_EQ(l.tagged_rank, 3);
  EXPECT_EQ(l.tagged_local_rank, 3);
  EXPECT_EQ(l.producer, Producer::kNccl);
  EXPECT_EQ(l.message, "NCCL version 2.21.5+cuda12.4");
  l = split_log_line(" 12: node2:77:77 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>");  // srun --label
  EXPECT_EQ(l.tagged_rank, 12);
  EXPECT_EQ(l.host, "node2");
  // Ray's prefix is not a rank: the NCCL place is found after it.
  l = split_log_line("(RayTrainWorker pid=615, ip=10.72.7.6) r24-worker-fqztx:615:18953 [2] NCCL INFO AllReduce: opCount 139d");
  EXPECT_EQ(l.tagged_rank, -1);
  EXPECT_EQ(l.host, "r24-worker-fqztx");
  EXPECT_EQ(l.pid, 615);
}

TEST(LogLine, GluedLinesAreFoundMidLine) {
  // msswift3934 fixture: two processes wrote into one terminal.
  const LogLine l = split_log_line("g183:161258:161695 [0] NCCL INFO Channel 02/0 : 6[6] -> 6[g183:161258:161696 [1] NCCL INFO Connected all rings");
  EXPECT_EQ(l.producer, Producer::kNccl);
  EXPECT_EQ(l.pid, 161258);
}

TEST(LogLine, TorchPrefixes) {
  LogLine l = split_log_line("[rank1]:[E1127 03:04:05.123456 12345 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation timeout");
  EXPECT_EQ(l.producer, Producer::kTorch);
  EXPECT_EQ(l.tagged_rank, 1);
  EXPECT_EQ(l.level, 'E');
  EXPECT_EQ(l.source, "ProcessGroupNCCL.cpp:632");
  EXPECT_TRUE(l.message.starts_with("[Rank 1] Watchdog")) << l.message;
  l = split_log_line("[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out.");  // 1.x
  EXPECT_EQ(l.producer, Producer::kTorch);
  EXPECT_EQ(l.source, "ProcessGroupNCCL.cpp:455");
}

TEST(LogLine, WhatIsNotALogLineIsOther) {
  for (std::string_view s : {"", "Traceback (most recent call last):", "[1, 2, 3]", "NCCL INFO", "x NCCL INFO y",
                             "a:b:c [0] NCCL INFO not a pid", "[rank]: nothing", "\xff\xfe\x00 NCCL WARN", "1: plain"}) {
    const LogLine l = split_log_line(s);
    EXPECT_NE(l.producer, Producer::kNccl) << s;
  }
}

TEST(LogLine, Numbers) {
  std::string_view s = "4a8 rest";
  long long v = 0;
  ASSERT_TRUE(take_number(s, v, true));
  EXPECT_EQ(v, 0x4a8);
  EXPECT_EQ(s, " rest");
  EXPECT_TRUE(number_after("count 1024 datatype 7 op 0", "op", v));
  EXPECT_EQ(v, 0);  // "op" is a word of its own, not the end of "opCount"
  EXPECT_TRUE(number_after("opCount 1f count 3", "count", v));
  EXPECT_EQ(v, 3);
  EXPECT_FALSE(number_after("count 99999999999999999999999", "count", v));  // too long to be a count
}

}  // namespace
}  // namespace rankscope::logs
