#!/bin/sh
# How often this machine's per-CPU kernel threads run, and for how long: the measurement
# behind `host.kthread_run_us` (docs/realism.md, "A KVM host is never silent").
#
#     sh scripts/kthread_noise.sh [SECONDS]      # default 30
#
# Reads /proc/PID/schedstat (time on CPU in ns, time waiting, number of times run) of every
# kernel thread bound to one CPU (ksoftirqd/N, migration/N, cpuhp/N, kworker/N:M; not the
# unbound kworker/uN or the highpri kworker/N:MH, which serve block I/O) before and after
# SECONDS, and prints each thread's runs per second and mean CPU time per run, then the
# totals per CPU. Needs only procfs; run it as any user.
set -eu
T=${1:-30}
snap() {
    for d in /proc/[0-9]*; do
        comm=$(cat "$d/comm" 2>/dev/null) || continue
        case "$comm" in
            ksoftirqd/*|migration/*|cpuhp/*) ;;
            kworker/[0-9]*:*H*) continue ;;
            kworker/[0-9]*:*) ;;
            *) continue ;;
        esac
        stat=$(cat "$d/schedstat" 2>/dev/null) || continue
        echo "${d#/proc/} $(echo "$comm" | tr ' ' _) $stat"
    done | sort
}
before=$(mktemp)
after=$(mktemp)
snap >"$before"
sleep "$T"
snap >"$after"
cpus=$(getconf _NPROCESSORS_ONLN)
join "$before" "$after" | awk -v T="$T" -v C="$cpus" '
    { cpu = $7 - $3; n = $9 - $5
      if (n > 0) { printf "%-32s %8.2f runs/s %8.1f us/run\n", $2, n / T, cpu / 1000 / n; R += n; S += cpu } }
    END { if (R > 0) printf "per CPU: %.2f runs/s, %.1f us of CPU per run (%d CPUs, %d s)\n", R / T / C, S / 1000 / R, C, T }'
rm -f "$before" "$after"
