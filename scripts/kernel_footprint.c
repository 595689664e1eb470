// The kernel's L2 footprint on an idle CPU's timer wake: the lines the kernel demands from
// beyond a cold L2 (L2 demand misses in kernel mode, counted on this CPU by the PMU) while
// the program sleeps 100 us: the syscall, the switch to the idle task, the idle loop, the
// timer interrupt, the wake-up and the switch back. Before each sleep a user-mode walk of
// 4 x the L2 leaves it full of user lines, so the kernel finds none of its own there. A
// sleep counts only if nothing else ran on the CPU (exactly two context switches); a 200 us
// spin without a sleep gives what reading the counters costs, which is subtracted. (Longer
// sleeps count more: on a shared machine other CPUs' IPIs and interrupts land in them.)
// Prints the median and quartiles in lines and KiB. Needs kernel-mode perf counters (root,
// or perf_event_paranoid <= 0) and an AMD family 19h CPU (the raw event below). Used for
// KERNEL_FOOTPRINT_BYTES in crates/vsched-model/src/sim/cache.rs (docs/realism.md):
//   gcc -O2 -o /tmp/kernel_footprint scripts/kernel_footprint.c && taskset -c 1 /tmp/kernel_footprint
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { LINE = 64, TRIALS = 301 };

// l2_cache_req_stat.ic_dc_miss_in_l2 (instruction and data demand misses in the L2), as
// `perf list --details` encodes it for AMD family 19h (Zen 3).
static const uint64_t L2_DEMAND_MISSES = 0x0964;

static int lines_fd, switch_fd;
static char *flusher;
static size_t flusher_bytes;

static int open_counter(uint32_t type, uint64_t config, int cpu) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = type;
  a.config = config;
  a.exclude_user = 1; // the kernel's lines only
  int fd = (int)syscall(SYS_perf_event_open, &a, -1, cpu, -1, 0);
  if (fd < 0) { perror("perf_event_open (root, or perf_event_paranoid <= 0)"); exit(1); }
  return fd;
}

static uint64_t value(int fd) {
  uint64_t v;
  if (read(fd, &v, sizeof v) != sizeof v) { perror("read"); exit(1); }
  return v;
}

static void flush(void) {
  for (size_t k = 0; k < flusher_bytes; k += LINE) flusher[k]++;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double report(const char *name, double *v, int n, double minus) {
  qsort(v, n, sizeof *v, cmp);
  double m = v[n / 2] - minus;
  printf("%-6s median %6.0f lines (%6.1f KiB), quartiles %6.0f .. %6.0f lines, n = %d\n", name, m, m * LINE / 1024,
         v[n / 4] - minus, v[3 * n / 4] - minus, n);
  return m;
}

int main(void) {
  int cpu = sched_getcpu();
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  flusher_bytes = 4 * (size_t)(l2 > 0 ? l2 : 1 << 20);
  flusher = malloc(flusher_bytes);
  memset(flusher, 1, flusher_bytes);
  lines_fd = open_counter(PERF_TYPE_RAW, L2_DEMAND_MISSES, cpu);
  switch_fd = open_counter(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, cpu);
  static double idle[TRIALS], quiet[TRIALS];
  struct timespec sleep = {0, 100000}, t0, t;
  int ni = 0, nq = 0;
  for (int k = 0; k < 10 * TRIALS && (ni < TRIALS || nq < TRIALS); k++) {
    flush();
    uint64_t s = value(lines_fd), sw = value(switch_fd);
    clock_nanosleep(CLOCK_MONOTONIC, 0, &sleep, NULL);
    uint64_t e = value(lines_fd);
    if (ni < TRIALS && value(switch_fd) - sw == 2) idle[ni++] = (double)(e - s);
    flush();
    s = value(lines_fd), sw = value(switch_fd);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t); // the vDSO: no kernel entry
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 200000);
    e = value(lines_fd);
    if (nq < TRIALS && value(switch_fd) == sw) quiet[nq++] = (double)(e - s);
  }
  printf("CPU %d, L2 %ld KiB; kernel lines demanded from beyond a cold L2:\n", cpu, l2 / 1024);
  double q = report("read", quiet, nq, 0);
  report("idle", idle, ni, q);
  return 0;
}
