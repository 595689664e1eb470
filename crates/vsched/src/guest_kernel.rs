//! A VM's guest-kernel keys (`[[vm]]` and `[[virtual_cluster]]`): `guest_tick`, `guest_hz`
//! and `idle_wakes_per_s`, checked with one-line errors naming the field
//! (`vsched_model::GuestTick` says what they do).

use vsched_model::{ConfigError, GuestTick, DEFAULT_GUEST_HZ, DEFAULT_IDLE_WAKES_PER_S};

use crate::scenario::err;

/// The keys as a VM table gives them.
pub(crate) struct TickKeys<'a> {
    pub(crate) mode: Option<&'a str>,
    pub(crate) hz: Option<u32>,
    pub(crate) idle_wakes_per_s: Option<f64>,
}

/// Linux has offered `CONFIG_HZ` from 100 to 1000 (`kernel/Kconfig.hz`); older kernels and
/// other guests went beyond, so we accept up to 10,000.
const MAX_HZ: u32 = 10_000;

/// The guest tick a VM table asks for (`at` names its fields).
pub(crate) fn guest_tick(at: &dyn Fn(&str) -> String, keys: &TickKeys) -> Result<GuestTick, ConfigError> {
    let hz = keys.hz.unwrap_or(DEFAULT_GUEST_HZ);
    if !(1..=MAX_HZ).contains(&hz) {
        return Err(err(at("guest_hz"), format!("expected an integer in 1..={MAX_HZ}, got {hz}")));
    }
    let idle_wakes_per_s = match keys.idle_wakes_per_s {
        None => DEFAULT_IDLE_WAKES_PER_S,
        Some(x) if x.is_finite() && (0.0..=hz as f64).contains(&x) => x,
        Some(x) => {
            return Err(err(
                at("idle_wakes_per_s"),
                format!("expected a number in 0..=guest_hz ({hz}; 0 = none), got {}", vsched_model::number(x)),
            ))
        }
    };
    let mode = keys.mode.unwrap_or("tickless");
    let only_tickless =
        |key: &str| err(at(key), format!("applies to guest_tick = \"tickless\" only, and guest_tick is {mode:?}"));
    match mode {
        "tickless" => Ok(GuestTick::Tickless { hz, idle_wakes_per_s }),
        "periodic" if keys.idle_wakes_per_s.is_some() => Err(only_tickless("idle_wakes_per_s")),
        "periodic" => Ok(GuestTick::Periodic { hz }),
        "off" if keys.idle_wakes_per_s.is_some() => Err(only_tickless("idle_wakes_per_s")),
        "off" if keys.hz.is_some() => Err(err(at("guest_hz"), "does not apply with guest_tick = \"off\"".to_string())),
        "off" => Ok(GuestTick::Off),
        other => Err(err(at("guest_tick"), format!("expected \"tickless\", \"periodic\" or \"off\", got {other:?}"))),
    }
}

/// The driver domain's guest kernel: tickless, waking `idle_wakes_per_s` times a second
/// when idle (`host.dom0_idle_wakes_per_s`).
pub(crate) fn dom0_tick(idle_wakes_per_s: f64) -> GuestTick {
    GuestTick::Tickless { hz: DEFAULT_GUEST_HZ, idle_wakes_per_s }
}
