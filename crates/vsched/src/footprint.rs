//! The memory budget: what a scenario's simulation will hold, estimated at validation, and
//! a one-line refusal naming the field when it exceeds the budget (`--max-memory`).
//!
//! The estimate counts what grows with the scenario's size: pCPUs, VMs, vCPUs, guest threads and
//! their programs, locks, and the MPI mailboxes (a rank's mailbox holds the ranks it receives
//! from, up to a counter per rank of the job: the quadratic term of a large all-to-all job).
//! Nothing grows with simulated time: traces stream to their file, and per-request and
//! per-sample figures are streaming statistics. The per-item sizes are measured, not derived: peak RSS of runs that
//! vary one dimension at a time, divided by the count (docs/performance.md, "Memory").
//! The estimate is a bound on the order of magnitude, not an account: it errs high.

use vsched_model::{ConfigError, GuestSpec, Instr};
use vsched_workloads::Ranks;

// Each size is about twice what we measured (docs/performance.md, "Memory"): peak RSS of a
// scenario varying one count, less the base, divided by the count.
/// Bytes per pCPU: its state, its policy's run queue and its events (measured ~235).
const PCPU_BYTES: u64 = 512;
/// Bytes per VM, whatever its size: its domain state, its policy's, and its row of the report
/// in Rust and in Python (measured ~15,400: 20,000 one-vCPU VMs under `credit`, 345 MB).
const DOMAIN_BYTES: u64 = 20 << 10;
/// Bytes per vCPU: its state, its policy's per-vCPU state and its events (measured ~600,
/// with its thread).
const VCPU_BYTES: u64 = 1 << 10;
/// Bytes per guest thread, beside its program (measured ~220).
const THREAD_BYTES: u64 = 512;
/// Bytes per guest lock (its holder and waiter queues, empty at rest; measured ~100).
const LOCK_BYTES: u64 = 128;
/// Bytes of a streaming distribution (`vsched_model::Histogram`): 8 KiB per power of two its
/// samples visit, allocated as they arrive. A typical size, not the worst (30 powers, 240
/// KiB): a web server's latencies span about ten powers (10 µs to 10 ms: 80 KiB); a CON
/// VM's co-start skews about two (4 to 12 µs under `cs` on seed 004's lu), and none at all
/// under a policy that does not co-schedule.
const LATENCIES_BYTES: u64 = 10 * (8 << 10);
const SKEWS_BYTES: u64 = 2 * (8 << 10);
/// Bytes of a source rank in a sparse MPI mailbox (`(rank, count)`, two `u32`), and of a
/// counter per rank of the job in a dense one (`vsched_model`'s `sim/mailbox.rs`).
const MAILBOX_SPARSE_ENTRY_BYTES: u64 = 8;
const MAILBOX_DENSE_ENTRY_BYTES: u64 = 4;
/// What the process holds whatever the scenario: the interpreter, the library, the tables.
pub(crate) const BASE_BYTES: u64 = 64 << 20;

/// What one VM will hold, by the field that makes it grow.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct VmFootprint {
    /// The VM itself, whatever its size.
    pub(crate) domain: u64,
    pub(crate) vcpus: u64,
    /// Threads and their programs.
    pub(crate) threads: u64,
    pub(crate) locks: u64,
    /// The MPI mailboxes of its ranks.
    pub(crate) mailboxes: u64,
    /// Its streaming distributions (request latencies, co-start skews).
    pub(crate) statistics: u64,
}

impl VmFootprint {
    /// The footprint of a VM of `vcpus` vCPUs running `guest`, ranks `ranks` of its job.
    pub(crate) fn of(guest: &GuestSpec, vcpus: usize, ranks: &Ranks) -> Self {
        let instr = std::mem::size_of::<Instr>() as u64;
        let programs: u64 = guest.programs.iter().map(|p| p.len() as u64 * instr).sum();
        let threads = guest.programs.len() as u64;
        let mailboxes = guest.programs.iter().map(|p| mailbox_bytes(p, ranks.world)).sum();
        VmFootprint {
            domain: DOMAIN_BYTES,
            vcpus: vcpus as u64 * VCPU_BYTES,
            threads: threads * THREAD_BYTES + programs,
            locks: u64::from(guest.locks) * LOCK_BYTES,
            mailboxes,
            statistics: 0,
        }
    }

    /// With the streaming distributions a VM keeps: a web server's request latencies, a CON
    /// VM's co-start skews.
    pub(crate) fn with_distributions(self, web: bool, con: bool) -> Self {
        let statistics = u64::from(web) * LATENCIES_BYTES + u64::from(con) * SKEWS_BYTES;
        VmFootprint { statistics, ..self }
    }

    /// `n` times this footprint (a VM of `n` ranks from one rank's).
    pub(crate) fn times(&self, n: usize) -> Self {
        let n = n as u64;
        VmFootprint {
            domain: self.domain,
            vcpus: self.vcpus.saturating_mul(n),
            threads: self.threads.saturating_mul(n),
            locks: self.locks.saturating_mul(n),
            mailboxes: self.mailboxes.saturating_mul(n),
            statistics: self.statistics,
        }
    }

    pub(crate) fn total(&self) -> u64 {
        self.domain + self.vcpus + self.threads + self.locks + self.mailboxes + self.statistics
    }

    /// The workload or VM field behind the largest part, for the error message.
    fn largest(&self) -> &'static str {
        let parts = [
            (self.vcpus, "vcpus"),
            (self.threads, "workload.threads"),
            (self.locks, "workload.locks"),
            (self.mailboxes, "vcpus"),
        ];
        parts.iter().max_by_key(|(bytes, _)| *bytes).map(|&(_, field)| field).expect("four parts")
    }
}

/// The most a mailbox of a thread running `program`, of a job of `world` ranks, holds: an
/// entry per rank it receives from (messages from others, never received, are not counted:
/// MPI programs receive what is sent to them), in a vector grown by doubling from 4, until
/// that would outgrow a counter per rank of the job.
fn mailbox_bytes(program: &[Instr], world: usize) -> u64 {
    let mut sources: Vec<u32> =
        program.iter().filter_map(|i| if let Instr::Recv { from, .. } = i { Some(*from) } else { None }).collect();
    if sources.is_empty() {
        return 0;
    }
    sources.sort_unstable();
    sources.dedup();
    let sparse = (2 * sources.len() as u64).max(4) * MAILBOX_SPARSE_ENTRY_BYTES;
    sparse.min(world as u64 * MAILBOX_DENSE_ENTRY_BYTES)
}

/// The running estimate of a scenario's memory, against its budget.
pub(crate) struct Budget {
    limit: u64,
    used: u64,
}

impl Budget {
    pub(crate) fn new(limit: u64) -> Self {
        Budget { limit, used: BASE_BYTES }
    }

    /// The estimate so far, in bytes.
    pub(crate) fn used(&self) -> u64 {
        self.used
    }

    /// Charges `bytes`; refuses at `field` if the estimate exceeds the budget.
    fn charge(&mut self, field: &str, what: &str, bytes: u64) -> Result<(), ConfigError> {
        self.used = self.used.saturating_add(bytes);
        if self.used <= self.limit {
            return Ok(());
        }
        Err(ConfigError::new(
            field,
            format!(
                "{what} would need about {} of memory (estimated), more than the budget of {}; expected a smaller scenario, or --max-memory to raise the budget",
                human(self.used),
                human(self.limit)
            ),
        ))
    }

    /// `hosts` hosts of `pcpus` pCPUs each.
    pub(crate) fn hosts(&mut self, hosts: usize, pcpus: usize) -> Result<(), ConfigError> {
        let field = if hosts > 1 { "cluster.hosts" } else { "host.pcpus" };
        self.charge(field, "the hosts", (hosts as u64).saturating_mul(pcpus as u64).saturating_mul(PCPU_BYTES))
    }

    /// `copies` VMs of footprint `vm`, each a [[vm]] table at `at` (copies = 1) or a
    /// virtual cluster's members (its `hosts` list: the count of copies).
    pub(crate) fn vms(
        &mut self,
        at: &dyn Fn(&str) -> String,
        vm: VmFootprint,
        copies: usize,
    ) -> Result<(), ConfigError> {
        let (field, what) = if copies > 1 {
            (at("hosts"), format!("{copies} VMs of this virtual cluster"))
        } else {
            (at(vm.largest()), "this VM".to_string())
        };
        self.charge(&field, &format!("the scenario with {what}"), vm.total().saturating_mul(copies as u64))
    }
}

/// Bytes as a person reads them (binary units).
pub(crate) fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(4 << 30), "4.0 GiB");
        assert_eq!(human(1536 << 20), "1.5 GiB");
    }

    #[test]
    fn a_mailbox_is_charged_for_the_ranks_it_hears_from_up_to_a_counter_per_rank() {
        let recv = |from| Instr::Recv { from, wait: vsched_model::BarrierWait::Spin };
        let neighbours = [recv(3), recv(5), recv(3), Instr::Send { to: 3, bytes: 8 }];
        assert_eq!(mailbox_bytes(&neighbours, 2048), 4 * MAILBOX_SPARSE_ENTRY_BYTES);
        let everyone: Vec<Instr> = (1..2048).map(recv).collect();
        assert_eq!(mailbox_bytes(&everyone, 2048), 2048 * MAILBOX_DENSE_ENTRY_BYTES);
        assert_eq!(mailbox_bytes(&[Instr::Send { to: 1, bytes: 8 }], 2048), 0);
    }

    #[test]
    fn the_budget_refuses_past_its_limit_naming_the_field() {
        let mut budget = Budget::new(BASE_BYTES + (1 << 20));
        assert!(budget.hosts(1, 64).is_ok());
        let e = budget.hosts(1024, 4096).unwrap_err();
        assert_eq!(e.path, "cluster.hosts");
        assert!(e.message.contains("more than the budget of 65.0 MiB"), "{}", e.message);
    }
}
