// symbolizer.cpp — the choice between the symbolizer back ends, and demangling shared by both.
#include "symbolizer.h"

#include <cxxabi.h>

#include <cstdlib>

namespace rankscope::probe {

std::unique_ptr<Symbolizer> make_own_process_symbolizer() {
  if (auto libdw = make_libdw_symbolizer()) return libdw;
  return make_elf_table_symbolizer();
}

std::string demangle_symbol(const char* name) {
  std::string text(name);
  // A versioned dynamic symbol ("f@@GLIBC_2.34", as eu-stack prints it) keeps its version.
  const size_t at = text.find('@');
  std::string base = text.substr(0, at);
  int status = -1;
  std::unique_ptr<char, void (*)(void*)> readable(abi::__cxa_demangle(base.c_str(), nullptr, nullptr, &status),
                                                  std::free);
  if (status != 0 || !readable) return text;
  return std::string(readable.get()) + (at == std::string::npos ? "" : text.substr(at));
}

}  // namespace rankscope::probe
