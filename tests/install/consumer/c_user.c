/* c_user.c — one step through the installed probe's C ABI; argv[1] is the run directory. */
#include <rankscope_probe_c.h>
#include <stdio.h>
int main(int argc, char** argv) {
  char err[256];
  rankscope_probe* p = rankscope_probe_open(argv[1], 0, 1, err, sizeof err);
  if (!p) { printf("open failed: %s\n", err); return 1; }
  rankscope_probe_begin_step(p, 0);
  rankscope_probe_close(p);
  printf("C probe (ABI %d) wrote %s\n", rankscope_probe_abi_version(), argv[1]);
  return 0;
}
