// symbolizer_elf.cpp — the fallback symbolizer: ELF symbol tables of the files mapped into this
// process, then dladdr(). Needs nothing beyond glibc.
//
// Why read the files rather than use dladdr() alone: dladdr sees only exported (.dynsym) symbols,
// and an executable exports none of its own functions unless linked with -rdynamic, which would
// leave the stuck function of the program itself unnamed. Every offset read from a file is
// bounds-checked: a truncated or odd file gives no name, never a crash.
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "symbolizer.h"

namespace rankscope::probe {
namespace {

struct Mapping {
  uintptr_t start = 0;
  uintptr_t end = 0;
  uint64_t file_offset = 0;
  std::string path;
};

std::vector<Mapping> read_own_maps() {
  std::vector<Mapping> maps;
  std::FILE* f = std::fopen("/proc/self/maps", "re");
  if (!f) return maps;
  char line[4096 + 256];
  while (std::fgets(line, sizeof(line), f)) {
    unsigned long start = 0, end = 0, offset = 0;
    int path_at = 0;
    if (std::sscanf(line, "%lx-%lx %*s %lx %*s %*s %n", &start, &end, &offset, &path_at) < 3 || path_at <= 0) continue;
    std::string path(line + path_at);
    while (!path.empty() && (path.back() == '\n' || path.back() == ' ')) path.pop_back();
    if (path.empty() || path[0] != '/') continue;  // anonymous, [stack], [vdso]: dladdr's business
    maps.push_back({start, end, offset, std::move(path)});
  }
  std::fclose(f);
  return maps;
}

// One ELF file, mapped read-only: its loadable segments and function symbols sorted by address.
class ElfSymbols {
 public:
  explicit ElfSymbols(const std::string& path) { load(path); }
  ~ElfSymbols() {
    if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
  }
  ElfSymbols(const ElfSymbols&) = delete;
  ElfSymbols& operator=(const ElfSymbols&) = delete;

  // The function containing the file offset `offset`, or nullptr.
  const char* function_at_file_offset(uint64_t offset) const {
    for (const Segment& s : segments_) {
      if (offset < s.file_offset || offset - s.file_offset >= s.file_size) continue;
      return function_at_vaddr(offset - s.file_offset + s.vaddr);
    }
    return nullptr;
  }

 private:
  struct Segment {
    uint64_t file_offset, file_size, vaddr;
  };
  struct Symbol {
    uint64_t value, size;
    const char* name;
  };

  bool in_file(uint64_t offset, uint64_t length) const { return offset <= size_ && length <= size_ - offset; }

  void load(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_size >= static_cast<off_t>(sizeof(Elf64_Ehdr))) {
      void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        data_ = static_cast<const char*>(p);
        size_ = static_cast<size_t>(st.st_size);
      }
    }
    ::close(fd);
    if (data_ == nullptr) return;
    Elf64_Ehdr eh;
    std::memcpy(&eh, data_, sizeof(eh));
    if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) return;
    read_segments(eh);
    read_symbols(eh);
  }

  void read_segments(const Elf64_Ehdr& eh) {
    if (eh.e_phentsize != sizeof(Elf64_Phdr) || !in_file(eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr))) return;
    for (unsigned i = 0; i < eh.e_phnum; ++i) {
      Elf64_Phdr ph;
      std::memcpy(&ph, data_ + eh.e_phoff + i * sizeof(Elf64_Phdr), sizeof(ph));
      if (ph.p_type == PT_LOAD) segments_.push_back({ph.p_offset, ph.p_filesz, ph.p_vaddr});
    }
  }

  bool section(const Elf64_Ehdr& eh, unsigned index, Elf64_Shdr& out) const {
    if (index >= eh.e_shnum) return false;
    std::memcpy(&out, data_ + eh.e_shoff + index * sizeof(Elf64_Shdr), sizeof(out));
    return true;
  }

  void read_symbols(const Elf64_Ehdr& eh) {
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || !in_file(eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr))) return;
    // .symtab names static functions too; a stripped file keeps only .dynsym.
    for (uint32_t wanted : {SHT_SYMTAB, SHT_DYNSYM}) {
      for (unsigned i = 0; i < eh.e_shnum && symbols_.empty(); ++i) {
        Elf64_Shdr table, strings;
        if (!section(eh, i, table) || table.sh_type != wanted || table.sh_entsize != sizeof(Elf64_Sym)) continue;
        if (!section(eh, table.sh_link, strings) || !in_file(table.sh_offset, table.sh_size) ||
            !in_file(strings.sh_offset, strings.sh_size))
          continue;
        add_functions(table, strings);
      }
      if (!symbols_.empty()) break;
    }
    std::sort(symbols_.begin(), symbols_.end(), [](const Symbol& a, const Symbol& b) { return a.value < b.value; });
  }

  void add_functions(const Elf64_Shdr& table, const Elf64_Shdr& strings) {
    const uint64_t count = table.sh_size / sizeof(Elf64_Sym);
    for (uint64_t k = 0; k < count; ++k) {
      Elf64_Sym sym;
      std::memcpy(&sym, data_ + table.sh_offset + k * sizeof(Elf64_Sym), sizeof(sym));
      const unsigned type = ELF64_ST_TYPE(sym.st_info);
      if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
      if (sym.st_name >= strings.sh_size) continue;
      const char* name = data_ + strings.sh_offset + sym.st_name;
      // The name must end inside its string table.
      if (::memchr(name, '\0', strings.sh_size - sym.st_name) == nullptr || *name == '\0') continue;
      symbols_.push_back({sym.st_value, sym.st_size, name});
    }
  }

  const char* function_at_vaddr(uint64_t vaddr) const {
    auto after = std::upper_bound(symbols_.begin(), symbols_.end(), vaddr,
                                  [](uint64_t v, const Symbol& s) { return v < s.value; });
    // Several symbols may start at one address (aliases); any that spans vaddr will do.
    while (after != symbols_.begin()) {
      --after;
      if (vaddr - after->value < std::max<uint64_t>(after->size, 1)) return after->name;
      if (after->size != 0) break;
    }
    return nullptr;
  }

  const char* data_ = nullptr;
  size_t size_ = 0;
  std::vector<Segment> segments_;
  std::vector<Symbol> symbols_;
};

class ElfTableSymbolizer final : public Symbolizer {
 public:
  ElfTableSymbolizer() : maps_(read_own_maps()) {}
  const char* backend() const override { return "elf-symtab"; }
  bool has_source_lines() const override { return false; }

  FrameSymbol symbolize(uintptr_t address, bool /*with_source*/) override {
    FrameSymbol out;
    for (const Mapping& m : maps_) {
      if (address < m.start || address >= m.end) continue;
      out.module = m.path;
      if (const char* name = elf_of(m.path).function_at_file_offset(address - m.start + m.file_offset))
        out.function = demangle_symbol(name);
      break;
    }
    if (out.function.empty()) {
      Dl_info info{};
      if (::dladdr(reinterpret_cast<void*>(address), &info) != 0) {
        if (info.dli_sname != nullptr) out.function = demangle_symbol(info.dli_sname);
        if (out.module.empty() && info.dli_fname != nullptr) out.module = info.dli_fname;
      }
    }
    return out;
  }

 private:
  const ElfSymbols& elf_of(const std::string& path) {
    auto it = files_.find(path);
    if (it == files_.end()) it = files_.emplace(path, std::make_unique<ElfSymbols>(path)).first;
    return *it->second;
  }

  std::vector<Mapping> maps_;
  std::map<std::string, std::unique_ptr<ElfSymbols>> files_;
};

}  // namespace

std::unique_ptr<Symbolizer> make_elf_table_symbolizer() { return std::make_unique<ElfTableSymbolizer>(); }

}  // namespace rankscope::probe
