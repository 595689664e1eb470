//! `[host] sched_gran`: Xen's scheduling granularity (`sched-gran=cpu|core|socket` on Xen's
//! command line, since Xen 4.13), checked with one-line errors naming the field. The policy
//! runs at that granularity through `vsched_policies::core_gran`.

use vsched_model::{ConfigError, HostConfig, Policy};
use vsched_policies::core_gran::{CoreGran, SchedGran, SUPPORTED};

use crate::external::PolicySource;
use crate::host::HostSection;
use crate::scenario::err;

/// The Xen releases before core scheduling (Credit's `xen_version` "3.0" … "4.1", credit2's
/// "4.12"): `sched-gran` arrived in Xen 4.13 (`xen/common/schedule.c`, RELEASE-4.13.0).
const BEFORE_4_13: [&str; 5] = ["3.0", "3.2", "4.0", "4.1", "4.12"];

/// The granularity and its threads per resource, or `None` when every resource is one pCPU
/// (`sched_gran = "cpu"`, or a coarser one on a host where it is one pCPU, which Xen runs as
/// `cpu`: `schedule()` rendezvouses only `if ( gran > 1 )`).
pub(crate) fn sched_gran(
    h: &HostSection,
    host: &HostConfig,
    policy: &PolicySource,
) -> Result<Option<(SchedGran, usize)>, ConfigError> {
    let Some(name) = h.sched_gran.as_deref() else { return Ok(None) };
    let Some(gran) = SchedGran::parse(name) else {
        return Err(err("host.sched_gran", format!("expected \"cpu\", \"core\" or \"socket\", got {name:?}")));
    };
    if gran == SchedGran::Cpu {
        return Ok(None);
    }
    let PolicySource::Builtin { info, params } = policy else {
        return Err(err(
            "host.sched_gran",
            format!("core scheduling is modelled under {} only, not {}", SUPPORTED.join(" and "), policy.name()),
        ));
    };
    if !SUPPORTED.contains(&info.name) {
        return Err(err(
            "host.sched_gran",
            format!("core scheduling is modelled under {} only, not {}", SUPPORTED.join(" and "), info.name),
        ));
    }
    let version = params.str("xen_version");
    if BEFORE_4_13.contains(&version) {
        return Err(err(
            "host.sched_gran",
            format!("Xen's sched-gran arrived in Xen 4.13; the policy follows xen_version {version:?}"),
        ));
    }
    if host.host_threads.is_some() {
        return Err(err("host.sched_gran", "Xen's core scheduling needs a Xen host, not a KVM host's threads"));
    }
    // vsched's topologies are symmetric (`host::topology`), so Xen's fallback to a finer
    // granularity on an asymmetric one (`cpupool_gran_init`) never applies.
    let threads = gran.threads(host.pcpus, host.sockets, host.threads_per_core);
    Ok((threads > 1).then_some((gran, threads)))
}

/// `policy` at the granularity, if any.
pub(crate) fn wrap(policy: Box<dyn Policy>, gran: Option<(SchedGran, usize)>) -> Box<dyn Policy> {
    match gran {
        Some((gran, threads)) => Box::new(CoreGran::new(policy, gran, threads)),
        None => policy,
    }
}
