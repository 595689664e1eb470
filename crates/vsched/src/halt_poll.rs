//! The halt-polling keys (`vsched_model::HaltPoll`, `vsched_model::GuestHaltPoll`): the
//! host's `halt_poll_ns`, `halt_poll_ns_grow`, `halt_poll_ns_grow_start`, `halt_poll_ns_shrink`
//! (KVM's module parameters, in their units: nanoseconds and factors) and a VM's
//! `guest_haltpoll` with the governor's `guest_halt_poll_*` parameters, checked with one-line
//! errors naming the field. Both are KVM's: refused on a Xen host or a bare one.

use vsched_model::{ConfigError, GuestHaltPoll, HaltPoll, Hypervisor, Time};

use crate::host::HostSection;
use crate::scenario::err;

/// KVM and the haltpoll governor keep these parameters as `unsigned int`.
const MAX_UINT: u64 = u32::MAX as u64;

/// An `unsigned int` module parameter, or its default.
fn uint(field: &str, v: Option<u64>, default: u64, what: &str) -> Result<u64, ConfigError> {
    match v {
        None => Ok(default),
        Some(x) if x <= MAX_UINT => Ok(x),
        Some(x) => Err(err(field, format!("expected an integer in 0..={MAX_UINT} ({what}), got {x}"))),
    }
}

/// The host's halt polling: off unless `halt_poll_ns` > 0, on a KVM host only.
pub(crate) fn host_halt_poll(h: &HostSection, hypervisor: Hypervisor, policy: &str) -> Result<HaltPoll, ConfigError> {
    let keys = [
        ("halt_poll_ns", h.halt_poll_ns),
        ("halt_poll_ns_grow", h.halt_poll_ns_grow),
        ("halt_poll_ns_grow_start", h.halt_poll_ns_grow_start),
        ("halt_poll_ns_shrink", h.halt_poll_ns_shrink),
    ];
    if hypervisor != Hypervisor::Kvm {
        if let Some((key, _)) = keys.iter().find(|(_, v)| v.is_some()) {
            return Err(err(
                format!("host.{key}"),
                format!(
                    "expected no key under policy {policy} on this {} host (host.hypervisor): halt polling is KVM's",
                    hypervisor.name()
                ),
            ));
        }
        return Ok(HaltPoll::OFF);
    }
    let d = HaltPoll::OFF;
    Ok(HaltPoll {
        max_ns: uint("host.halt_poll_ns", h.halt_poll_ns, d.max_ns, "nanoseconds; 0 = off, KVM's x86 default 200000")?,
        grow: uint("host.halt_poll_ns_grow", h.halt_poll_ns_grow, d.grow.into(), "a factor; 0 = never grow")? as u32,
        grow_start_ns: uint("host.halt_poll_ns_grow_start", h.halt_poll_ns_grow_start, d.grow_start_ns, "nanoseconds")?,
        shrink: uint("host.halt_poll_ns_shrink", h.halt_poll_ns_shrink, d.shrink.into(), "a divisor; 0 = reset to 0")?
            as u32,
    })
}

/// A VM table's guest haltpoll keys.
#[derive(Default)]
pub(crate) struct GuestPollKeys {
    pub(crate) on: Option<bool>,
    pub(crate) ns: Option<u64>,
    pub(crate) grow: Option<u64>,
    pub(crate) shrink: Option<u64>,
    pub(crate) grow_start: Option<u64>,
    pub(crate) allow_shrink: Option<bool>,
}

impl GuestPollKeys {
    /// Whether the table asks for guest haltpoll.
    pub(crate) fn on(&self) -> bool {
        self.on == Some(true)
    }
}

/// The guest haltpoll a VM table asks for (`at` names its fields); `None` when off. The
/// governor's parameters apply only with `guest_haltpoll = true`.
pub(crate) fn guest_haltpoll(
    at: &dyn Fn(&str) -> String,
    keys: &GuestPollKeys,
) -> Result<Option<GuestHaltPoll>, ConfigError> {
    let given = [
        ("guest_halt_poll_ns", keys.ns.is_some()),
        ("guest_halt_poll_grow", keys.grow.is_some()),
        ("guest_halt_poll_shrink", keys.shrink.is_some()),
        ("guest_halt_poll_grow_start", keys.grow_start.is_some()),
        ("guest_halt_poll_allow_shrink", keys.allow_shrink.is_some()),
    ];
    if !keys.on() {
        if let Some((key, _)) = given.iter().find(|(_, g)| *g) {
            return Err(err(at(key), "applies with guest_haltpoll = true only"));
        }
        return Ok(None);
    }
    let d = GuestHaltPoll::default();
    let ns = |key: &str, v: Option<u64>, default: Time| uint(&at(key), v, default, "nanoseconds");
    let factor =
        |key: &str, v: Option<u64>, default: u32| uint(&at(key), v, default.into(), "a factor").map(|x| x as u32);
    Ok(Some(GuestHaltPoll {
        max_ns: ns("guest_halt_poll_ns", keys.ns, d.max_ns)?,
        grow: factor("guest_halt_poll_grow", keys.grow, d.grow)?,
        shrink: factor("guest_halt_poll_shrink", keys.shrink, d.shrink)?,
        grow_start_ns: ns("guest_halt_poll_grow_start", keys.grow_start, d.grow_start_ns)?,
        allow_shrink: keys.allow_shrink.unwrap_or(true),
    }))
}

/// `guest_haltpoll` needs KVM's paravirtual interface (`kvm_para_available()`, without which
/// the driver does not load): refused on any other host, naming the first VM table asking.
pub(crate) fn refuse_off_kvm<'a>(
    hypervisor: Hypervisor,
    policy: &str,
    tables: impl Iterator<Item = (String, bool)> + 'a,
) -> Result<(), ConfigError> {
    if hypervisor == Hypervisor::Kvm {
        return Ok(());
    }
    for (table, on) in tables {
        if on {
            return Err(err(
                format!("{table}.guest_haltpoll"),
                format!(
                    "expected false or no key under policy {policy} on this {} host (host.hypervisor): the haltpoll \
                     driver loads only under KVM",
                    hypervisor.name()
                ),
            ));
        }
    }
    Ok(())
}
