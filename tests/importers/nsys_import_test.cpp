// nsys_import_test.cpp — the acceptance on SQLite exports our fixture writer makes in three
// schema flavours (2024: ENUM tables, no eventId; 2026: eventId, extra columns, ENUM ids that only
// the ENUM table explains; none: no ENUM tables), each with shuffled rows, an unterminated range, a
// range from before the capture, a start/end range ended on another thread, a second process whose
// correlation ids collide with the rank's, and rank 2's session clock 37 ms off. Rank 3's
// forward/block1/mlp kernels are 20 ms slower.
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "nsys_fixture.h"
#include "rankscope/analyzers/scaling/scaling_analyzer.h"
#include "rankscope/analyzers/scaling/sweep.h"
#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/run_directory.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"
#include "rankscope/nsys/nsys_import.h"
#include "rankscope/trace_core/import_job.h"

namespace rankscope::nsys {
namespace {

namespace fs = std::filesystem;
// The importers' shared job steps (importers/trace_core), tested here with the nsys import.
using trace_core::add_saturating;
using trace_core::distance_saturating;
using trace_core::int64_saturating;
using trace_core::median_of;
using trace_core::provenance_text;
using trace_core::rank_from_file_name;
using trace_core::sub_saturating;
using testing::Expected;
using testing::FixtureSpec;
using testing::Flavour;
using testing::Identity;

constexpr int64_t k37ms = 37'000'000;

fs::path fresh_dir(const std::string& name) {
  static int counter = 0;
  const fs::path p = fs::temp_directory_path() / ("rs-nsys-" + name + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// The acceptance fixture of each flavour: rank identity, domain and step range differ by flavour.
FixtureSpec acceptance_spec(Flavour f) {
  FixtureSpec s;
  s.flavour = f;
  s.world = 4;
  s.steps = 6;
  s.clock_error_ns = [](int r) { return r == 2 ? k37ms : 0; };
  const bool nested = f == Flavour::kNoEnum;
  s.script = testing::standard_script(2, nested, nullptr, nullptr, [](int r, int64_t) { return r == 3 ? 20.0 : 0.0; });
  if (f == Flavour::k2024) {
    s.identity = Identity::kMpiRanks;
  } else if (f == Flavour::k2026) {
    s.identity = Identity::kRankMark;
    s.nccl_ranges = true;
    s.step_payload = false;
  } else {
    s.identity = Identity::kEnvironment;
    s.domain = "";  // the default domain, short names nested: forward > block1 > mlp
    s.step_text = "train_step";
    s.step_payload = false;
  }
  return s;
}

ImportOptions options_for(Flavour f) {
  ImportOptions o;
  if (f == Flavour::kNoEnum) o.step_range = "train_step";
  return o;
}

struct FileState {
  std::string bytes;
  int64_t mtime_ns;
};
FileState file_state(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  struct stat st {};
  ::stat(p.c_str(), &st);
  return {std::string(std::istreambuf_iterator<char>(in), {}), int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

class NsysFlavour : public ::testing::TestWithParam<Flavour> {};

TEST_P(NsysFlavour, ImportsRangesProjectionIdentityAndClocks) {
  const Flavour f = GetParam();
  const fs::path dir = fresh_dir(std::string("acc-") + testing::flavour_name(f));
  const FixtureSpec spec = acceptance_spec(f);
  Expected expected;
  const auto files = testing::write_nsys_fixture(dir / "exports", spec, &expected);
  std::vector<FileState> before;
  for (const auto& p : files) before.push_back(file_state(p));

  // Given in sorted order (which is reverse rank order): the ranks come from the exports.
  std::vector<fs::path> sorted = files;
  std::sort(sorted.begin(), sorted.end());
  auto summary = import_nsys(sorted, dir / "run", options_for(f));
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  ASSERT_EQ(summary->world_size, 4);
  ASSERT_EQ(summary->ranks.size(), 4u);
  const char* how = f == Flavour::k2024 ? "MPI_RANKS" : f == Flavour::k2026 ? "rankscope:rank=" : "RANK=";
  for (int r = 0; r < 4; ++r) {
    const RankProvenance& p = summary->ranks[size_t(r)];
    EXPECT_EQ(p.rank, r);
    EXPECT_EQ(p.file, expected.files[size_t(r)]) << "rank " << r << " read from the wrong export";
    EXPECT_NE(p.identity.find(how), std::string::npos) << p.identity;
    EXPECT_EQ(p.host, "node" + std::to_string(r / 2));
    EXPECT_EQ(p.steps, spec.steps);
    // Kept and flagged: the range left open, the one from before the capture, the cross-thread one.
    EXPECT_EQ(p.open_ended, 1);
    EXPECT_EQ(p.negative_start, 1);
    EXPECT_EQ(p.cross_thread, 1);
    EXPECT_EQ(p.unlaunched_ops, 0);
  }

  // Projected GPU time, CPU time and count of every range in every step, from the event streams.
  for (int r = 0; r < 4; ++r) {
    auto es = format::read_event_stream(format::event_stream_path(dir / "run", r));
    ASSERT_TRUE(es.ok()) << es.status().to_string();
    ASSERT_EQ(es->steps.size(), size_t(spec.steps));
    ASSERT_TRUE(es->clock.has_value());
    for (size_t s = 0; s < es->steps.size(); ++s) {
      const auto& rec = es->steps[s];
      EXPECT_EQ(rec.step, int64_t(s) + 1);
      EXPECT_EQ(rec.end_ns - rec.begin_ns, expected.step_ns[size_t(r)][s]);
      std::map<std::string, std::array<int64_t, 3>> got;
      for (const auto& a : rec.ranges) got[std::string(es->name(a.name_id))] = {a.count, a.total_ns, a.kernel_ns};
      const auto& want = expected.ranges[size_t(r)][s];
      EXPECT_EQ(got.size(), want.size()) << "rank " << r << " step " << s;
      for (const auto& [name, w] : want) {
        auto it = got.find(name);
        ASSERT_NE(it, got.end()) << "rank " << r << " step " << s << ": range " << name << " missing";
        EXPECT_EQ(it->second[0], w[0]) << name << " count";
        EXPECT_EQ(it->second[1], w[1]) << name << " CPU time";
        EXPECT_EQ(it->second[2], w[2]) << name << " projected GPU time (rank " << r << ", step " << s << ")";
      }
      EXPECT_EQ(got.count("prefetch"), 0u) << "a start/end range ended on another thread is not a range of the step";
      // Every collective: completed, arrival before its kernel, kernel span positive.
      for (const auto& c : rec.collectives) {
        EXPECT_LE(c.enqueue_ns, c.start_ns);
        EXPECT_LT(c.start_ns, c.end_ns);
      }
      EXPECT_EQ(rec.collectives.size(), 11u);  // 9 TP all-reduces, grad_sync's all-reduce, the all-to-all
    }
    // Alignment: every rank on rank 0's clock; rank 2's session clock was 37 ms ahead.
    const double want_offset = -double(expected.clock_error_ns[size_t(r)] - expected.clock_error_ns[0]);
    EXPECT_NEAR(double(es->clock->offset_ns), want_offset, 1e6) << "rank " << r;
    EXPECT_LT(es->clock->uncertainty_ns, 1'000'000);
    EXPECT_NEAR(summary->ranks[size_t(r)].offset_ms, want_offset / 1e6, 1.0);
  }

  // The exports were not written to (bytes and mtime), and SQLite left nothing beside them.
  for (size_t i = 0; i < files.size(); ++i) {
    const FileState after = file_state(files[i]);
    EXPECT_EQ(after.bytes, before[i].bytes);
    EXPECT_EQ(after.mtime_ns, before[i].mtime_ns);
    for (const char* suffix : {"-journal", "-wal", "-shm"}) EXPECT_FALSE(fs::exists(files[i].string() + suffix));
  }

  // inspect's view: every rank's flight recorder; the range left open is what the rank was doing.
  auto run = format::open_run_directory(dir / "run");
  ASSERT_TRUE(run.ok());
  EXPECT_TRUE(run->problems.empty()) << run->problems.front();
  for (const auto& rf : run->ranks) {
    ASSERT_TRUE(rf.flight.has_value()) << rf.flight_status.to_string();
  }
  ASSERT_TRUE(run->metadata.has_value());
  EXPECT_TRUE(run->metadata->extra.contains("source"));
  EXPECT_NE(provenance_text(run->metadata->extra["source"]).find("imported from Nsight Systems"), std::string::npos);
  fs::remove_all(dir);
}

TEST_P(NsysFlavour, SkewNamesTheSlowMlpRankFirst) {
  const Flavour f = GetParam();
  const fs::path dir = fresh_dir(std::string("skew-") + testing::flavour_name(f));
  const auto files = testing::write_nsys_fixture(dir / "exports", acceptance_spec(f));
  ASSERT_TRUE(import_nsys(files, dir / "run", options_for(f)).ok());
  auto report = analyzers::analyze_skew(dir / "run");
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_FALSE(report->findings.empty());
  const auto& top = report->findings.front();
  EXPECT_EQ(top.ranks, std::vector<int>{3}) << top.text;
  EXPECT_EQ(top.range, "forward/block1/mlp") << top.text;
  EXPECT_NEAR(top.cost_ms_per_step, 20.0, 2.0) << top.text;
  // Its compute in the range (collectives taken out) is 20 ms above rank 0's. The range's projected
  // GPU time is not: as nsys projects it, it runs to the end of the range's all-reduce kernel, which
  // ends together on every rank, so the waiting peers show the same span.
  const std::string mlp = "forward/block1/mlp";
  EXPECT_NEAR(report->ranks[3].range_compute_ms.at(mlp) - report->ranks[0].range_compute_ms.at(mlp), 20.0, 0.5);
  EXPECT_NEAR(report->ranks[3].range_kernel_ms.at(mlp), report->ranks[0].range_kernel_ms.at(mlp), 0.5);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Flavours, NsysFlavour, ::testing::Values(Flavour::k2024, Flavour::k2026, Flavour::kNoEnum),
                         [](const auto& info) { return std::string(testing::flavour_name(info.param)); });

// A sweep of 4 sequence lengths imported from nsys gives the scaling slopes of the same job's
// probe-written run directories.
TEST(NsysScaling, SlopesEqualThoseOfProbeRunDirectories) {
  for (Flavour f : {Flavour::k2024, Flavour::k2026, Flavour::kNoEnum}) {
    const fs::path dir = fresh_dir(std::string("scaling-") + testing::flavour_name(f));
    std::vector<analyzers::SweepPoint> nsys_points, probe_points;
    for (int64_t T : {128, 256, 512, 1024}) {
      FixtureSpec s = acceptance_spec(f);
      s.world = 2;
      s.steps = 4;
      const double Td = double(T);
      s.script = testing::standard_script(2, f == Flavour::kNoEnum,
                                          [Td](int, int64_t) { return 0.2 + 0.001 * Td + 2e-5 * Td * Td; },
                                          [Td](int, int64_t) { return 0.004 * Td; });
      s.clock_error_ns = [](int r) { return r == 1 ? k37ms : 0; };
      const std::string point = analyzers::sweep_point_dir_name(T);
      const auto files = testing::write_nsys_fixture(dir / "exports" / point, s);
      ImportOptions o = options_for(f);
      o.seq_len = T;
      o.batch = 4;
      auto imported = import_nsys(files, dir / "nsys" / point, o);
      ASSERT_TRUE(imported.ok()) << imported.status().to_string();
      testing::write_probe_run(dir / "probe" / point, s, T, 4);
      nsys_points.push_back({T, dir / "nsys" / point});
      probe_points.push_back({T, dir / "probe" / point});
    }
    ASSERT_TRUE(analyzers::write_sweep_index(dir / "nsys", nsys_points).ok());
    ASSERT_TRUE(analyzers::write_sweep_index(dir / "probe", probe_points).ok());
    auto a = analyzers::analyze_scaling(dir / "nsys");
    auto b = analyzers::analyze_scaling(dir / "probe");
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    ASSERT_EQ(a->points.size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_DOUBLE_EQ(a->points[i].step_ms, b->points[i].step_ms);
      EXPECT_DOUBLE_EQ(a->points[i].tokens_per_s, b->points[i].tokens_per_s);
    }
    std::map<std::string, const analyzers::ScalingRange*> ours;
    for (const auto& r : b->ranges) ours[r.name] = &r;
    ASSERT_EQ(a->ranges.size(), b->ranges.size());
    size_t gpu = 0;
    for (const auto& r : a->ranges) {
      auto it = ours.find(r.name);
      ASSERT_NE(it, ours.end()) << r.name;
      ASSERT_EQ(r.slopes.size(), it->second->slopes.size());
      for (size_t i = 0; i < r.slopes.size(); ++i) {
        ASSERT_EQ(r.slopes[i].has_value(), it->second->slopes[i].has_value()) << r.name;
        if (r.slopes[i]) {
          EXPECT_NEAR(*r.slopes[i], *it->second->slopes[i], 1e-9) << r.name;
        }
      }
      EXPECT_NEAR(r.fit.b, it->second->fit.b, 1e-12) << r.name;
      gpu += r.name.find("[gpu kernels]") != std::string::npos;
    }
    EXPECT_GT(gpu, 10u);  // the projected GPU time of each range is a series of its own
    // And the attention grows as T^2 at the top: the sweep says so from nsys captures.
    bool superlinear = false;
    for (const auto& fnd : a->findings) superlinear |= fnd.kind == "superlinear_range" && fnd.range.find("attn") != std::string::npos;
    EXPECT_TRUE(superlinear);
    fs::remove_all(dir);
  }
}

TEST(NsysImport, ExactAlignmentFromSyncMarks) {
  const fs::path dir = fresh_dir("sync");
  FixtureSpec s = acceptance_spec(Flavour::k2026);
  s.sync_marks = true;
  Expected expected;
  const auto files = testing::write_nsys_fixture(dir / "exports", s, &expected);
  auto summary = import_nsys(files, dir / "run");
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  std::vector<int64_t> first_begin;
  for (int r = 0; r < 4; ++r) {
    EXPECT_NE(summary->ranks[size_t(r)].alignment.find("rankscope:sync"), std::string::npos);
    EXPECT_EQ(summary->ranks[size_t(r)].offset_ms, 0.0);
    auto es = format::read_event_stream(format::event_stream_path(dir / "run", r));
    ASSERT_TRUE(es.ok());
    first_begin.push_back(es->steps.front().begin_ns);
  }
  // On the probe clock the steps begin at the true times (0.1 ms apart by construction), whatever
  // the session clocks said (rank 2's is 37 ms off).
  for (int r = 1; r < 4; ++r) EXPECT_EQ(first_begin[size_t(r)] - first_begin[0], r * 100'000);
  fs::remove_all(dir);
}

TEST(NsysImport, StepsFromARepeatingCollectiveWithoutAStepRange) {
  const fs::path dir = fresh_dir("nostep");
  const FixtureSpec s = acceptance_spec(Flavour::kNoEnum);
  const auto files = testing::write_nsys_fixture(dir / "exports", s);
  auto summary = import_nsys(files, dir / "run");  // no --step-range: "train_step" is not "step"
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  for (const auto& p : summary->ranks) {
    EXPECT_NE(p.steps_from.find("collective"), std::string::npos) << p.steps_from;
    EXPECT_EQ(p.steps, s.steps - 1) << p.steps_from;  // from one all-to-all to the next
  }
  auto report = analyzers::analyze_skew(dir / "run");
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_FALSE(report->findings.empty());
  EXPECT_EQ(report->findings.front().ranks, std::vector<int>{3});

  // A step range that is named but absent is an error that lists what is there.
  auto bad = import_nsys(files, dir / "run2", [] {
    ImportOptions o;
    o.step_range = "iteration";
    return o;
  }());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no range named 'iteration'"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("'forward' (42)"), std::string::npos) << bad.status().message();
  fs::remove_all(dir);
}

TEST(NsysImport, RankFromFileNameNeverFromSortedOrder) {
  const fs::path dir = fresh_dir("names");
  FixtureSpec s = acceptance_spec(Flavour::k2024);
  s.identity = Identity::kFileName;
  s.world = 2;
  s.file_name = [](int r) { return r == 0 ? std::string("rep_10.sqlite") : std::string("rep_2.sqlite"); };
  const auto files = testing::write_nsys_fixture(dir / "exports", s);
  auto summary = import_nsys(files, dir / "run");
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  EXPECT_EQ(summary->world_size, 11);
  ASSERT_EQ(summary->ranks.size(), 2u);
  EXPECT_EQ(summary->ranks[0].rank, 2);
  EXPECT_NE(summary->ranks[0].file.find("rep_2.sqlite"), std::string::npos);
  EXPECT_EQ(summary->ranks[1].rank, 10);
  EXPECT_NE(summary->ranks[1].identity.find("file name 'rep_10'"), std::string::npos) << summary->ranks[1].identity;
  ASSERT_FALSE(summary->warnings.empty());
  EXPECT_NE(summary->warnings.front().find("9 of 11 ranks have no export"), std::string::npos) << summary->warnings.front();
  // Without any identity at all, the import refuses rather than number ranks by position.
  s.file_name = [](int r) { return r == 0 ? std::string("alpha.sqlite") : std::string("beta.sqlite"); };
  const auto unnamed = testing::write_nsys_fixture(dir / "unnamed", s);
  auto refused = import_nsys(unnamed, dir / "run2");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("cannot tell which rank"), std::string::npos);
  fs::remove_all(dir);
}

// `nsys profile mpirun -np 4 ...` records every rank's process in one export. Each is a rank by
// MPI_RANKS; their correlation ids all start at 1, and each has its colliding helper process.
TEST(NsysImport, OneExportHoldingEveryRank) {
  const fs::path dir = fresh_dir("one");
  FixtureSpec s = acceptance_spec(Flavour::k2024);
  s.one_export = true;
  s.clock_error_ns = nullptr;
  Expected expected;
  const auto files = testing::write_nsys_fixture(dir / "exports", s, &expected);
  ASSERT_EQ(files.size(), 1u);
  auto summary = import_nsys(files, dir / "run");
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  ASSERT_EQ(summary->ranks.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(summary->ranks[size_t(r)].pid, uint32_t(4000 + r));
    EXPECT_EQ(summary->ranks[size_t(r)].identity, "MPI_RANKS table");
    auto es = format::read_event_stream(format::event_stream_path(dir / "run", r));
    ASSERT_TRUE(es.ok());
    ASSERT_EQ(es->steps.size(), size_t(s.steps));
    for (size_t st = 0; st < es->steps.size(); ++st) {
      for (const auto& a : es->steps[st].ranges) {
        const auto& w = expected.ranges[size_t(r)][st].at(std::string(es->name(a.name_id)));
        EXPECT_EQ(a.kernel_ns, w[2]) << es->name(a.name_id);
        EXPECT_EQ(a.total_ns, w[1]) << es->name(a.name_id);
      }
    }
    EXPECT_LT(std::abs(es->clock->offset_ns), 1'000'000);
  }
  auto report = analyzers::analyze_skew(dir / "run");
  ASSERT_TRUE(report.ok());
  ASSERT_FALSE(report->findings.empty());
  EXPECT_EQ(report->findings.front().ranks, std::vector<int>{3});
  fs::remove_all(dir);
}

void write_sqlite(const fs::path& file, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
}

TEST(NsysImport, RefusesWhatItCannotRead) {
  const fs::path dir = fresh_dir("refuse");
  write_sqlite(dir / "old.sqlite",
               "CREATE TABLE META_DATA_EXPORT(name TEXT, value TEXT); INSERT INTO META_DATA_EXPORT VALUES "
               "('EXPORT_SCHEMA_VERSION','2.9.0'),('EXPORT_PRODUCT_VERSION','2020.3.1'); CREATE TABLE StringIds(id INTEGER, value TEXT);");
  auto old = import_nsys({dir / "old.sqlite"}, dir / "run");
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(old.status().message().find("2.9.0"), std::string::npos);
  write_sqlite(dir / "other.sqlite", "CREATE TABLE t(x INTEGER);");
  auto other = import_nsys({dir / "other.sqlite"}, dir / "run");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("not an nsys SQLite export"), std::string::npos);
  std::ofstream(dir / "rep.nsys-rep") << "x";
  auto rep = import_nsys({dir / "rep.nsys-rep"}, dir / "run");
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.status().message().find("nsys export --type sqlite"), std::string::npos);
  // A probe's run directory is never overwritten.
  {
    format::RunMetadata probe_run;
    probe_run.run_id = "probe";
    probe_run.program = "gpt2-train";
    fs::create_directories(dir / "probe_run");
    ASSERT_TRUE(format::write_run_metadata(dir / "probe_run", probe_run).ok());
    auto ok_files = testing::write_nsys_fixture(dir / "exports", acceptance_spec(Flavour::k2026));
    auto kept = import_nsys(ok_files, dir / "probe_run");
    ASSERT_FALSE(kept.ok());
    EXPECT_NE(kept.status().message().find("'gpt2-train'"), std::string::npos) << kept.status().message();
    EXPECT_EQ(format::read_run_metadata(dir / "probe_run")->program, "gpt2-train");
    // An earlier import is replaced.
    ASSERT_TRUE(import_nsys(ok_files, dir / "again").ok());
    ASSERT_TRUE(import_nsys(ok_files, dir / "again").ok());
  }
  // A file that is not SQLite at all.
  std::ofstream(dir / "junk.sqlite") << "this is not a database, only text that is long enough to be read";
  auto junk = import_nsys({dir / "junk.sqlite"}, dir / "run");
  ASSERT_FALSE(junk.ok());
  fs::remove_all(dir);
}

// META_DATA_EXPORT read key by key: the version split into _MAJOR/_MINOR/_MICRO rows is put together
// (4.0 is refused naming it; any 3.x is not refused), and a checksum row is never the version.
TEST(NsysImport, SchemaVersionFromItsOwnRows) {
  const fs::path dir = fresh_dir("schema_rows");
  write_sqlite(dir / "split4.sqlite",
               "CREATE TABLE META_DATA_EXPORT(name TEXT, value TEXT); INSERT INTO META_DATA_EXPORT VALUES "
               "('EXPORT_SCHEMA_VERSION_MAJOR','4'),('EXPORT_SCHEMA_VERSION_MINOR','0'),('EXPORT_SCHEMA_VERSION_MICRO','1'),"
               "('EXPORT_SCHEMA_VERSION_CKSUM','1271772049 158887'); CREATE TABLE StringIds(id INTEGER, value TEXT);");
  auto four = import_nsys({dir / "split4.sqlite"}, dir / "run");
  ASSERT_FALSE(four.ok());
  EXPECT_EQ(four.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(four.status().message().find("export schema 4.0.1"), std::string::npos) << four.status().message();
  for (const char* rows : {"('EXPORT_SCHEMA_VERSION_MAJOR','3'),('EXPORT_SCHEMA_VERSION_MINOR','13')",
                           "('EXPORT_SCHEMA_VERSION','3.13.2'),('EXPORT_SCHEMA_VERSION_CKSUM','1271772049 158887')",
                           "('EXPORT_SCHEMA_VERSION','3.99.0')"}) {
    fs::remove(dir / "three.sqlite");
    write_sqlite(dir / "three.sqlite", std::string("CREATE TABLE META_DATA_EXPORT(name TEXT, value TEXT); INSERT INTO "
                                                   "META_DATA_EXPORT VALUES ") + rows +
                                           "; CREATE TABLE StringIds(id INTEGER, value TEXT);");
    auto three = import_nsys({dir / "three.sqlite"}, dir / "run");
    EXPECT_TRUE(three.ok() || three.status().code() != StatusCode::kUnsupported) << rows << ": " << three.status().message();
  }
  fs::remove_all(dir);
}

// Clock arithmetic on a corrupt export's timestamps near the ends of int64: held there, never an
// overflow (found by fuzzing: a kernel end near INT64_MAX plus the session's epoch offset).
TEST(NsysImport, ClockArithmeticSaturates) {
  EXPECT_EQ(add_saturating(INT64_MAX - 5, 1'700'000'000'000'000'000), INT64_MAX);
  EXPECT_EQ(add_saturating(INT64_MIN + 5, -1'700'000'000'000'000'000), INT64_MIN);
  EXPECT_EQ(add_saturating(100, -30), 70);
  EXPECT_EQ(sub_saturating(INT64_MIN + 1, 2), INT64_MIN);
  EXPECT_EQ(sub_saturating(INT64_MAX, -1), INT64_MAX);
  EXPECT_EQ(distance_saturating(INT64_MIN, INT64_MAX), INT64_MAX);
  EXPECT_EQ(distance_saturating(3, -4), 7);
  EXPECT_EQ(int64_saturating(1e300), INT64_MAX);
  EXPECT_EQ(int64_saturating(-1e300), INT64_MIN);
  EXPECT_EQ(median_of({INT64_MIN, INT64_MAX}), -1);
}

// The same end to end: one rank's export holds a kernel ending at INT64_MAX - 1 and a sync-free
// clock from its session start. The import finishes (or refuses with a message); it never faults.
TEST(NsysImport, KernelEndNearInt64MaxImports) {
  const fs::path dir = fresh_dir("int64max");
  auto files = testing::write_nsys_fixture(dir / "exports", acceptance_spec(Flavour::k2026));
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(files[0].c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = 9223372036854775806 WHERE rowid IN "
                             "(SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 3)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto summary = import_nsys(files, dir / "run");
  if (!summary.ok()) {
    EXPECT_NE(summary.status().message().find(".sqlite"), std::string::npos) << summary.status().message();
  }
  fs::remove_all(dir);
}

// The CLI end to end: import-nsys, then skew --json carries the provenance.
TEST(NsysImport, CliImportThenSkewWithProvenance) {
  const fs::path dir = fresh_dir("cli");
  const auto files = testing::write_nsys_fixture(dir / "exports", acceptance_spec(Flavour::k2024));
  const std::string bin = std::string(RANKSCOPE_BINARY_DIR) + "/bin/rankscope";
  std::string cmd = bin + " import-nsys";
  for (const auto& f : files) cmd += " " + f.string();
  cmd += " -o " + (dir / "run").string() + " > " + (dir / "import.txt").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream in(dir / "import.txt");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(text.find("4 ranks of a world of 4"), std::string::npos) << text;
  EXPECT_NE(text.find("MPI_RANKS"), std::string::npos) << text;
  EXPECT_NE(text.find("2024.5.1.113"), std::string::npos) << text;
  const std::string skew = bin + " skew " + (dir / "run").string() + " --json " + (dir / "skew.json").string() + " --html " +
                           (dir / "skew.html").string() + " > " + (dir / "skew.txt").string();
  ASSERT_EQ(std::system(skew.c_str()), 0);
  std::ifstream sj(dir / "skew.json");
  const auto j = nlohmann::json::parse(sj);
  ASSERT_TRUE(j.contains("provenance"));
  ASSERT_EQ(j["provenance"]["ranks"].size(), 4u);
  EXPECT_EQ(j["provenance"]["ranks"][2]["schema_version"], "3.13.2");
  EXPECT_NEAR(j["provenance"]["ranks"][2]["alignment"]["offset_ms"].get<double>(), -37.0, 1.0);
  std::ifstream st(dir / "skew.txt");
  const std::string skew_text((std::istreambuf_iterator<char>(st)), {});
  EXPECT_NE(skew_text.find("imported from Nsight Systems"), std::string::npos) << skew_text;
  // The HTML report shows the provenance table (rendered by headless Chromium when installed).
  if (fs::exists("/usr/bin/chromium")) {
    const std::string dump = "/usr/bin/chromium --headless --no-sandbox --disable-gpu --no-first-run --disable-dev-shm-usage "
                             "--user-data-dir=" + (dir / "profile").string() + " --virtual-time-budget=5000 --dump-dom file://" +
                             (dir / "skew.html").string() + " > " + (dir / "dom.html").string() + " 2> /dev/null";
    ASSERT_EQ(std::system(dump.c_str()), 0);
    std::ifstream dm(dir / "dom.html");
    const std::string dom((std::istreambuf_iterator<char>(dm)), {});
    EXPECT_NE(dom.find("data-rankscope-rendered=\"yes\""), std::string::npos);
    EXPECT_NE(dom.find("data-rankscope-errors=\"0\""), std::string::npos);
    EXPECT_NE(dom.find("<h2>Provenance</h2>"), std::string::npos);
    EXPECT_NE(dom.find("imported from Nsight Systems (4 exports)"), std::string::npos);
  }
  fs::remove_all(dir);
}

// Ranks from file names other tools write (HTA's naming, steps and times beside the rank).
TEST(RankFromFileName, TheNumberAfterRankOrWorkerWins) {
  const std::vector<const char*> kineto = {".gz", ".json", ".pt.trace"};
  std::string stem, rule;
  EXPECT_EQ(rank_from_file_name("rank-1.Apr_03_18_51_38.1102.pt.trace.json.gz", kineto, &stem, &rule), 1);
  EXPECT_NE(rule.find("after 'rank'"), std::string::npos) << rule;
  EXPECT_EQ(rank_from_file_name("trace_rank_5_step_100.json.gz", kineto, &stem, &rule), 5);
  EXPECT_EQ(rank_from_file_name("worker0.1712345678901.pt.trace.json", kineto, &stem, &rule), 0);
  EXPECT_EQ(rank_from_file_name("RANK12_node3.json", kineto, &stem, &rule), 12);
  EXPECT_EQ(rank_from_file_name("rep_12.sqlite", {".sqlite"}, &stem, &rule), 12);
  EXPECT_NE(rule.find("last number"), std::string::npos) << rule;
  EXPECT_EQ(rank_from_file_name("trace.1712345678901.json", kineto, &stem, &rule), std::nullopt);
}

}  // namespace
}  // namespace rankscope::nsys
