//! `web`: each vCPU serves requests: wait for one (I/O), then process it.
//!
//! Models the "httperf web server" row of workloads.md (seed 003's web experiment):
//! independent short requests, interrupt/wake-up driven, measured by throughput and latency.
//! Requests arrive at each vCPU as a Poisson stream (exponential gaps of mean `io_us`); a
//! request's latency runs from its arrival to the end of its processing, so it includes the
//! time the woken vCPU waits for a pCPU (which is what Credit's BOOST shortens).

use vsched_model::{ConfigError, Dur, GuestSpec, Instr, LockKind, ParamDefault, ParamSpec, Params, ProgramBuilder};

use crate::{us, Ranks, WorkloadInfo};

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "requests",
        default: ParamDefault::Int(0),
        doc: "requests per vCPU (0 = serve until the horizon)",
    },
    ParamSpec { name: "service_us", default: ParamDefault::Float(200.0), doc: "mean CPU time per request, µs" },
    ParamSpec {
        name: "jitter",
        default: ParamDefault::Float(0.3),
        doc: "coefficient of variation of the service time",
    },
    ParamSpec {
        name: "io_us",
        default: ParamDefault::Float(2_000.0),
        doc: "mean gap between requests (exponential), µs",
    },
];

fn build(params: &Params, ranks: &Ranks) -> Result<GuestSpec, ConfigError> {
    let vcpus = ranks.vcpus;
    let requests = params.int_at_least("requests", 0)? as u64;
    let service_us = params.float_in("service_us", 0.0, f64::INFINITY)?;
    let jitter = params.float_in("jitter", 0.0, 10.0)?;
    let io_us = params.float_in("io_us", 0.0, f64::INFINITY)?;
    if service_us + io_us <= 0.0 {
        return Err(params.invalid("service_us", "expected service_us + io_us > 0"));
    }
    let mut b = ProgramBuilder::new();
    b.repeat((requests > 0).then_some(requests))
        .push(Instr::Io(Dur::Exp { mean: us(io_us) }))
        .push(Instr::RequestBegin)
        .push(Instr::Compute(Dur::Jitter { mean: us(service_us), cv: jitter }))
        .push(Instr::RequestEnd)
        .end_repeat();
    let program = b.build();
    Ok(GuestSpec {
        programs: vec![program; vcpus],
        vcpus,
        locks: 0,
        lock_kind: LockKind::Ticket,
        finite: requests > 0,
        idle_vcpus: 0,
    })
}

pub const INFO: WorkloadInfo = WorkloadInfo {
    name: "web",
    description: "Request serving: wait for a request (I/O), process it; reports throughput and latency",
    models: "httperf web server (seed 003)",
    params: PARAMS,
    build,
};
