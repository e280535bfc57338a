// symbolizer.h — names the functions of this process's code addresses, for in-process stacks.
//
// Is: one interface with two back ends. libdw (elfutils' libdwfl: every module of the process,
// separate debug info, source lines) is loaded with dlopen("libdw.so.1") when the machine has it,
// so the probe links no elfutils library and runs where it is absent (GPU containers often lack it);
// otherwise the ELF symbol tables (.symtab, else .dynsym) of the files in /proc/self/maps, then
// dladdr() for what no file names (the vDSO). Is not: an unwinder (thread_stacks.h) or a formatter.
//
// Runs in the capturing thread after the program's threads have answered, and uses the loader and
// the allocator; a program thread that holds the loader lock or a malloc arena forever would stall
// it, which is one reason the outside tools (eu-stack, gdb) are tried first.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace rankscope::probe {

struct FrameSymbol {
  std::string function;  // demangled; empty when unknown
  std::string module;    // the file the address lies in; empty when unknown
  std::string source;    // "file:line:column" when asked for and known (libdw only)
};

class Symbolizer {
 public:
  virtual ~Symbolizer() = default;
  virtual const char* backend() const = 0;  // "libdw" or "elf-symtab"
  virtual bool has_source_lines() const = 0;
  // `address` lies inside the instruction to name (a return address minus one).
  virtual FrameSymbol symbolize(uintptr_t address, bool with_source) = 0;
};

// libdw when it loads and reports this process, else the ELF tables. Never null.
std::unique_ptr<Symbolizer> make_own_process_symbolizer();
// The individual back ends (tests pick one); null when libdw cannot be used here.
std::unique_ptr<Symbolizer> make_libdw_symbolizer();
std::unique_ptr<Symbolizer> make_elf_table_symbolizer();

// The readable form of a C++ symbol; other names come back unchanged.
std::string demangle_symbol(const char* name);

}  // namespace rankscope::probe
