//! `disk`: each vCPU issues synchronous disk requests, computing between them.
//!
//! A disk-bound guest (a file server, a database doing random reads, a backup): each vCPU
//! runs one thread that computes `think_us` (exponential; 0 = none), then reads or writes
//! `request_kb` on the VM's virtual disk and blocks until the request completes, `requests`
//! times (0 = until the horizon). Where the request goes — the host's driver domain (blkback),
//! then its disk, FIFO with seek and transfer time — is the simulator's (`sim/disk.rs`), so
//! the same guest pays dom0's scheduling on a Xen host and only the disk without one.
//!
//! Defaults are fio's (the flexible I/O tester, `fio(1)`): `bs` = 4 KiB blocks, `thinktime`
//! = 0, and a synchronous engine (one request in flight per thread: `iodepth` = 1).

use vsched_model::{ConfigError, Dur, GuestSpec, Instr, ParamDefault, ParamRange, ParamSpec, Params, ProgramBuilder};

use crate::{us, Ranks, WorkloadInfo};

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "requests",
        default: ParamDefault::Int(0),
        range: ParamRange::Int { min: 0, max: 1_000_000_000 },
        doc: "disk requests per vCPU (0 = until the horizon)",
    },
    ParamSpec {
        name: "request_kb",
        default: ParamDefault::Float(4.0),
        range: ParamRange::Float { min: 0.0, max: 1e6 },
        doc: "size of each request, KiB (fio's bs)",
    },
    ParamSpec {
        name: "think_us",
        default: ParamDefault::Float(0.0),
        range: ParamRange::Float { min: 0.0, max: 1e9 },
        doc: "mean compute before each request, µs (exponential; fio's thinktime)",
    },
];

fn build(params: &Params, ranks: &Ranks) -> Result<GuestSpec, ConfigError> {
    let requests = params.int("requests") as u64;
    let request_kb = params.float("request_kb");
    let think_us = params.float("think_us");
    let bytes = (request_kb * 1024.0).round() as u64;
    let mut b = ProgramBuilder::new();
    b.repeat((requests > 0).then_some(requests));
    if think_us > 0.0 {
        b.push(Instr::Compute(Dur::Exp { mean: us(think_us) }));
    }
    b.push(Instr::Disk { bytes }).end_repeat();
    Ok(GuestSpec::lockless(vec![b.build(); ranks.vcpus], requests > 0))
}

pub const INFO: WorkloadInfo = WorkloadInfo {
    name: "disk",
    description: "Synchronous disk requests (fio-like): think, then read or write a block and wait for it",
    models: "(no row: a disk-bound guest, fio's synchronous random I/O)",
    params: PARAMS,
    build,
};
