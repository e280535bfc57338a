// hide_libdw_preload.cpp — an LD_PRELOAD shim for one test: dlopen of libdw fails, as on a GPU
// container without elfutils, so the in-process stacks must be named by the ELF symbol tables.
// Is not: part of any product; every other dlopen goes to the real one.
#include <dlfcn.h>

#include <cstring>

extern "C" void* dlopen(const char* file, int mode) {
  if (file != nullptr && std::strstr(file, "libdw.so") != nullptr) return nullptr;
  using DlopenFn = void* (*)(const char*, int);
  static const auto real_dlopen = reinterpret_cast<DlopenFn>(::dlsym(RTLD_NEXT, "dlopen"));
  return real_dlopen(file, mode);
}
