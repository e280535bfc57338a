// sqlite_db.h — the few SQLite calls the nsys importer needs, read-only (internal).
//
// Is: a database opened through a file: URI with mode=ro&immutable=1 (SQLite never writes, locks
// or creates a journal next to the user's export), statements with columns read by index after
// the caller built the column list by name, and PRAGMA table_info. Is not: a general wrapper.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "rankscope/format/status.h"

namespace rankscope::nsys {

class Statement {
 public:
  Statement() = default;
  explicit Statement(sqlite3_stmt* s) : stmt_(s) {}
  Statement(Statement&& o) noexcept : stmt_(o.stmt_) { o.stmt_ = nullptr; }
  Statement& operator=(Statement&& o) noexcept {
    std::swap(stmt_, o.stmt_);
    return *this;
  }
  ~Statement() { sqlite3_finalize(stmt_); }

  // True while a row is available; errors end the iteration (see done_ok()).
  bool step();
  bool done_ok() const { return rc_ == SQLITE_DONE; }
  bool null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  bool is_text(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_TEXT; }
  int64_t i64(int col) const { return sqlite3_column_int64(stmt_, col); }
  // Serialized ids (globalTid, globalPid) are 64-bit patterns stored as signed integers.
  uint64_t u64(int col) const { return static_cast<uint64_t>(sqlite3_column_int64(stmt_, col)); }
  double f64(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string_view text(int col) const;

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_OK;
};

class Database {
 public:
  // Opens `file` read-only and immutable. Fails with a message naming the file.
  static Result<std::unique_ptr<Database>> open(const std::filesystem::path& file);
  ~Database();

  bool has_table(std::string_view table);
  // Column names of `table` (PRAGMA table_info); empty when the table does not exist.
  std::set<std::string> columns(std::string_view table);
  Result<Statement> prepare(const std::string& sql);
  std::string error() const { return sqlite3_errmsg(db_); }
  const std::string& display_name() const { return name_; }

 private:
  Database() = default;
  sqlite3* db_ = nullptr;
  std::string name_;
};

// "file:/a%20b/rep.sqlite?mode=ro&immutable=1": percent-encodes what a URI path cannot carry.
std::string readonly_uri(const std::filesystem::path& file);

}  // namespace rankscope::nsys
