// symbolizer_libdw.cpp — the preferred symbolizer: elfutils' libdwfl on this process, loaded at run
// time with dlopen("libdw.so.1").
//
// Why dlopen and not a link: the probe goes into training containers that have no elfutils, and a
// hard dependency would stop the program from starting there; the header (Debian's libdw-dev) is
// used at build time only, so each function pointer has the exact type libdwfl.h declares. Without
// the header the build has no libdw back end and the ELF tables serve alone.
#include "symbolizer.h"

#if RANKSCOPE_HAVE_LIBDWFL_H
#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <unistd.h>

#include <mutex>

#include <fmt/format.h>
#endif

namespace rankscope::probe {

#if RANKSCOPE_HAVE_LIBDWFL_H
namespace {

// The libdwfl entry points used, resolved once per process; the library stays loaded.
struct LibdwApi {
  decltype(&::dwfl_begin) begin = nullptr;
  decltype(&::dwfl_end) end = nullptr;
  decltype(&::dwfl_linux_proc_report) proc_report = nullptr;
  decltype(&::dwfl_report_end) report_end = nullptr;
  decltype(&::dwfl_addrmodule) addrmodule = nullptr;
  decltype(&::dwfl_module_addrname) module_addrname = nullptr;
  decltype(&::dwfl_module_info) module_info = nullptr;
  decltype(&::dwfl_module_getsrc) module_getsrc = nullptr;
  decltype(&::dwfl_lineinfo) lineinfo = nullptr;
  decltype(&::dwfl_linux_proc_find_elf) proc_find_elf = nullptr;
  decltype(&::dwfl_standard_find_debuginfo) standard_find_debuginfo = nullptr;
  bool usable = false;
};

template <class Fn>
bool resolve(void* handle, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(::dlsym(handle, name));
  return out != nullptr;
}

const LibdwApi& libdw_api() {
  static LibdwApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = ::dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return;
    api.usable = resolve(h, "dwfl_begin", api.begin) && resolve(h, "dwfl_end", api.end) &&
                 resolve(h, "dwfl_linux_proc_report", api.proc_report) &&
                 resolve(h, "dwfl_report_end", api.report_end) && resolve(h, "dwfl_addrmodule", api.addrmodule) &&
                 resolve(h, "dwfl_module_addrname", api.module_addrname) &&
                 resolve(h, "dwfl_module_info", api.module_info) &&
                 resolve(h, "dwfl_module_getsrc", api.module_getsrc) && resolve(h, "dwfl_lineinfo", api.lineinfo) &&
                 resolve(h, "dwfl_linux_proc_find_elf", api.proc_find_elf) &&
                 resolve(h, "dwfl_standard_find_debuginfo", api.standard_find_debuginfo);
  });
  return api;
}

class LibdwSymbolizer final : public Symbolizer {
 public:
  // Reports every module mapped into this process (from /proc/PID/maps); ok() says if that worked.
  explicit LibdwSymbolizer(const LibdwApi& api) : api_(api) {
    callbacks_.find_elf = api.proc_find_elf;
    callbacks_.find_debuginfo = api.standard_find_debuginfo;
    dwfl_ = api.begin(&callbacks_);  // keeps the pointer: callbacks_ lives as long as dwfl_
    if (dwfl_ != nullptr && (api.proc_report(dwfl_, ::getpid()) != 0 || api.report_end(dwfl_, nullptr, nullptr) != 0)) {
      api.end(dwfl_);
      dwfl_ = nullptr;
    }
  }
  ~LibdwSymbolizer() override {
    if (dwfl_ != nullptr) api_.end(dwfl_);
  }
  LibdwSymbolizer(const LibdwSymbolizer&) = delete;
  LibdwSymbolizer& operator=(const LibdwSymbolizer&) = delete;
  bool ok() const { return dwfl_ != nullptr; }

  const char* backend() const override { return "libdw"; }
  bool has_source_lines() const override { return true; }

  FrameSymbol symbolize(uintptr_t address, bool with_source) override {
    FrameSymbol out;
    Dwfl_Module* module = api_.addrmodule(dwfl_, address);
    if (module == nullptr) return out;
    if (const char* name = api_.module_info(module, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr))
      out.module = name;
    if (const char* name = api_.module_addrname(module, address)) out.function = demangle_symbol(name);
    if (with_source) {
      if (Dwfl_Line* line = api_.module_getsrc(module, address)) {
        int number = 0;
        int column = 0;
        if (const char* file = api_.lineinfo(line, nullptr, &number, &column, nullptr, nullptr))
          out.source = column > 0 ? fmt::format("{}:{}:{}", file, number, column) : fmt::format("{}:{}", file, number);
      }
    }
    return out;
  }

 private:
  const LibdwApi& api_;
  Dwfl_Callbacks callbacks_{};
  Dwfl* dwfl_ = nullptr;
};

}  // namespace

std::unique_ptr<Symbolizer> make_libdw_symbolizer() {
  const LibdwApi& api = libdw_api();
  if (!api.usable) return nullptr;
  auto symbolizer = std::make_unique<LibdwSymbolizer>(api);
  if (!symbolizer->ok()) return nullptr;
  return symbolizer;
}

#else

std::unique_ptr<Symbolizer> make_libdw_symbolizer() { return nullptr; }

#endif

}  // namespace rankscope::probe
