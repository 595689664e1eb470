//! `[network]`: the links between hosts and inside one (`NetworkConfig`, `sim/network.rs`).

use vsched_model::{ConfigError, NetworkConfig};

use super::file::NetworkSection;
use super::values::{err, micros};

/// A link's bandwidth in Gbit/s, from a slow serial line (1 Mbit/s) to far beyond any NIC
/// or memory bus (10 Tbit/s): a slower one would take longer than the longest run per packet.
fn gbps(path: &str, v: Option<f64>, default: f64) -> Result<f64, ConfigError> {
    const RANGE: std::ops::RangeInclusive<f64> = 1e-3..=1e4;
    match v {
        None => Ok(default),
        Some(x) if x.is_finite() && RANGE.contains(&x) => Ok(x),
        Some(x) => {
            Err(err(path, format!("expected a number of Gbit/s in [0.001, 10000], got {}", vsched_model::number(x))))
        }
    }
}

/// The network of a `[network]` table, every key defaulting to `NetworkConfig::default()`.
pub(super) fn network_config(n: &NetworkSection) -> Result<NetworkConfig, ConfigError> {
    let d = NetworkConfig::default();
    let mtu_bytes = n.mtu_bytes.unwrap_or(d.mtu_bytes);
    if !(64..=1 << 20).contains(&mtu_bytes) {
        return Err(err("network.mtu_bytes", format!("expected an integer in 64..=1048576, got {mtu_bytes}")));
    }
    Ok(NetworkConfig {
        latency_ns: micros("network.latency_us", n.latency_us, d.latency_ns)?,
        bandwidth_gbps: gbps("network.bandwidth_gbps", n.bandwidth_gbps, d.bandwidth_gbps)?,
        intra_host_latency_ns: micros(
            "network.intra_host_latency_us",
            n.intra_host_latency_us,
            d.intra_host_latency_ns,
        )?,
        intra_host_bandwidth_gbps: gbps(
            "network.intra_host_bandwidth_gbps",
            n.intra_host_bandwidth_gbps,
            d.intra_host_bandwidth_gbps,
        )?,
        shm_latency_ns: micros("network.shm_latency_us", n.shm_latency_us, d.shm_latency_ns)?,
        shm_bandwidth_gbps: gbps("network.shm_bandwidth_gbps", n.shm_bandwidth_gbps, d.shm_bandwidth_gbps)?,
        mtu_bytes,
        dom0_packet_ns: micros("network.dom0_packet_us", n.dom0_packet_us, d.dom0_packet_ns)?,
    })
}
