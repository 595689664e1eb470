//! `web`: each vCPU serves requests: wait for one (I/O), then process it.
//!
//! Models the "httperf web server" row of workloads.md (seed 003's web experiment):
//! independent short requests, interrupt/wake-up driven, measured by throughput and latency.
//! Requests come from clients outside the host, to each server thread as a Poisson stream
//! (exponential gaps of mean `io_us`). On a host with a driver domain each request's packet
//! passes dom0's netback before the server sees it, and each reply's packets pass it on the
//! way out (`sim/client.rs`). A request's latency runs from its arrival at the NIC to the end
//! of its processing, so it includes the time it waits for dom0 and the time the woken vCPU
//! waits for a pCPU (which is what Credit's BOOST shortens).

use vsched_model::{
    ConfigError, Dur, GuestSpec, Instr, LockKind, ParamDefault, ParamRange, ParamSpec, Params, ProgramBuilder,
};

use crate::{us, Ranks, WorkloadInfo};

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "requests",
        default: ParamDefault::Int(0),
        range: ParamRange::Int { min: 0, max: 1_000_000_000 },
        doc: "requests per vCPU (0 = serve until the horizon)",
    },
    ParamSpec {
        name: "service_us",
        default: ParamDefault::Float(200.0),
        range: ParamRange::Float { min: 0.0, max: 1e9 },
        doc: "mean CPU time per request, µs",
    },
    ParamSpec {
        name: "jitter",
        default: ParamDefault::Float(0.3),
        range: ParamRange::Float { min: 0.0, max: 10.0 },
        doc: "coefficient of variation of the service time",
    },
    ParamSpec {
        name: "io_us",
        default: ParamDefault::Float(2_000.0),
        range: ParamRange::Float { min: 0.0, max: 1e9 },
        doc: "mean gap between requests (exponential), µs",
    },
    ParamSpec {
        name: "reply_bytes",
        default: ParamDefault::Int(REPLY_BYTES as i64),
        range: ParamRange::Int { min: 0, max: MAX_REPLY_BYTES },
        doc: "bytes of each reply (its packets pass the driver domain's netback)",
    },
];

/// A reply of one packet. Our choice, not a measurement: the papers do not say which page
/// their server returned (httperf's default asks for "/").
const REPLY_BYTES: u64 = 1_024;
/// A reply larger than this is no web request's.
const MAX_REPLY_BYTES: i64 = 1 << 30;

fn build(params: &Params, ranks: &Ranks) -> Result<GuestSpec, ConfigError> {
    let vcpus = ranks.vcpus;
    let requests = params.int("requests") as u64;
    let service_us = params.float("service_us");
    let jitter = params.float("jitter");
    let io_us = params.float("io_us");
    let reply_bytes = params.int("reply_bytes") as u64;
    // Durations are whole nanoseconds: a loop of sub-nanosecond steps would take no time.
    if us(service_us) + us(io_us) == 0 {
        return Err(params.invalid("service_us", "expected service_us + io_us >= 0.001 (a nanosecond)"));
    }
    let mut b = ProgramBuilder::new();
    b.repeat((requests > 0).then_some(requests))
        .push(Instr::ClientRequest(Dur::Exp { mean: us(io_us) }))
        .push(Instr::RequestBegin)
        .push(Instr::Compute(Dur::Jitter { mean: us(service_us), cv: jitter }))
        .push(Instr::RequestEnd)
        .push(Instr::ClientReply { bytes: reply_bytes })
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
