// Two threads of one process on one CPU hand a token back and forth through futexes, as
// lmbench's lat_ctx does with pipes: each hand-over is a futex wake, a block and a switch
// to the other thread. Prints the median time per switch over 9 batches of 100,000 round
// trips. Used for host.thread_switch_us (docs/realism.md):
//   gcc -O2 -pthread -o /tmp/thread_switch scripts/thread_switch.c && taskset -c 1 /tmp/thread_switch
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
enum { ROUNDS = 100000, BATCHES = 9 };
static _Atomic int turn; // whose turn: 0 or 1
static void wait_for(int me) {
  while (atomic_load(&turn) != me) syscall(SYS_futex, &turn, FUTEX_WAIT_PRIVATE, 1 - me, NULL, NULL, 0);
}
static void hand_to(int other) {
  atomic_store(&turn, other);
  syscall(SYS_futex, &turn, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
static void *partner(void *arg) {
  (void)arg;
  for (long i = 0; i < (long)ROUNDS * BATCHES; i++) { wait_for(1); hand_to(0); }
  return NULL;
}
static long long ns(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
int main(void) {
  pthread_t th;
  pthread_create(&th, NULL, partner, NULL);
  double per_switch[BATCHES];
  for (int b = 0; b < BATCHES; b++) {
    long long start = ns();
    for (int i = 0; i < ROUNDS; i++) { hand_to(1); wait_for(0); }
    per_switch[b] = (double)(ns() - start) / (2.0 * ROUNDS);
  }
  pthread_join(th, NULL);
  qsort(per_switch, BATCHES, sizeof per_switch[0], cmp);
  printf("thread switch (futex hand-over, one CPU): median %.0f ns, min %.0f, max %.0f over %d batches\n",
         per_switch[BATCHES / 2], per_switch[0], per_switch[BATCHES - 1], BATCHES);
  return 0;
}
