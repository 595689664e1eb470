// The kernel work of a directed yield, without the switch that follows it and without the
// system call around it. One thread alone on one CPU calls sched_yield() in a loop: each
// call takes the run queue's lock, charges the caller (`update_curr`), runs the scheduler,
// which picks the caller again, and returns. The same loop of getppid(), a system call that
// does almost nothing, measures the entry and exit, which a PLE handler does not pay (it
// runs in the host kernel after the exit, which `vm_exit_us` charges), and which this
// machine's software virtualization (`kvm_pvm`) makes far costlier than on hardware.
// Prints, over 9 interleaved batches of 1,000,000 calls each, the median of each and of the
// difference per batch. Used for host.ple_handler_us (docs/realism.md):
//   gcc -O2 -o /tmp/lone_yield scripts/lone_yield.c && taskset -c 1 /tmp/lone_yield
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
enum { CALLS = 1000000, BATCHES = 9 };
static long long ns(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
static double median(double *v) { qsort(v, BATCHES, sizeof v[0], cmp); return v[BATCHES / 2]; }
int main(void) {
  double yield[BATCHES], null[BATCHES], diff[BATCHES];
  for (int b = 0; b < BATCHES; b++) {
    long long start = ns();
    for (int i = 0; i < CALLS; i++) sched_yield();
    yield[b] = (double)(ns() - start) / CALLS;
    start = ns();
    for (int i = 0; i < CALLS; i++) syscall(SYS_getppid);
    null[b] = (double)(ns() - start) / CALLS;
    diff[b] = yield[b] - null[b];
  }
  double d = median(diff);
  printf("sched_yield alone: median %.0f ns; getppid: median %.0f ns; difference: median %.0f ns\n", median(yield),
         median(null), d);
  return 0;
}
