// sqlite_db.cpp — see sqlite_db.h.
#include "sqlite_db.h"

#include <fmt/format.h>

namespace rankscope::nsys {

bool Statement::step() {
  if (!stmt_) return false;
  rc_ = sqlite3_step(stmt_);
  return rc_ == SQLITE_ROW;
}

std::string_view Statement::text(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  if (!p) return {};
  return {reinterpret_cast<const char*>(p), size_t(sqlite3_column_bytes(stmt_, col))};
}

std::string readonly_uri(const std::filesystem::path& file) {
  const std::string path = std::filesystem::absolute(file).lexically_normal().string();
  std::string out = "file:";
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      out += char(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out + "?mode=ro&immutable=1";
}

Result<std::unique_ptr<Database>> Database::open(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) return not_found(fmt::format("{}: no such file", file.string()));
  auto db = std::unique_ptr<Database>(new Database());
  db->name_ = file.string();
  const int rc = sqlite3_open_v2(readonly_uri(file).c_str(), &db->db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db->db_ ? sqlite3_errmsg(db->db_) : sqlite3_errstr(rc);
    return io_error(fmt::format("{}: cannot open as SQLite: {}", file.string(), msg));
  }
  // A file that is not a database fails at the first read, not at open.
  auto probe = db->prepare("SELECT count(*) FROM sqlite_master");
  if (!probe.ok()) return corrupt(fmt::format("{}: not an SQLite database ({})", file.string(), probe.status().message()));
  if (!probe->step()) return corrupt(fmt::format("{}: not an SQLite database ({})", file.string(), db->error()));
  return db;
}

Database::~Database() { sqlite3_close_v2(db_); }

bool Database::has_table(std::string_view table) {
  auto s = prepare(fmt::format("SELECT 1 FROM sqlite_master WHERE type IN ('table','view') AND name='{}'", table));
  return s.ok() && s->step();
}

std::set<std::string> Database::columns(std::string_view table) {
  std::set<std::string> out;
  auto s = prepare(fmt::format("PRAGMA table_info(\"{}\")", table));
  if (!s.ok()) return out;
  while (s->step()) out.insert(std::string(s->text(1)));
  return out;
}

Result<Statement> Database::prepare(const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), int(sql.size()), &stmt, nullptr) != SQLITE_OK) {
    return corrupt(fmt::format("{}: {} (in: {})", name_, sqlite3_errmsg(db_), sql));
  }
  return Statement(stmt);
}

}  // namespace rankscope::nsys
