//! The window census: how many events a conservative parallel simulator of the cluster's
//! hosts could handle between two barriers (docs/parallel.md). Built only with the
//! `window-census` feature, so the normal event loop carries no trace of it.
//!
//! A window of lookahead `L` opens at the time `T` of the first event not yet in a window and
//! holds every event before `T + L` (YAWNS): no message sent inside it reaches another host
//! before `T + L` when `L` is at most the wire's latency. For each window the census counts
//! the handled events of every host, and for each core count `P` the most events one core
//! handles in it when hosts are dealt to cores in contiguous blocks: the window's critical
//! path. It also counts the events of each connected component of the hosts' communication
//! graph (hosts joined by a job whose ranks span them), which need no barrier between them,
//! and the messages from other hosts that a host handles at the same time and priority as
//! another of its events: where a per-host tie-break could order events otherwise than the
//! one queue's sequence numbers do.

use serde_json::{json, Value};
use vsched_engine::Time;

use super::events::Ev;
use super::network::Stage;
use super::state::Core;

/// Tie-break priorities (`Ev::priority`: 0 to 5).
const PRIORITIES: usize = 6;

/// The census of one lookahead.
struct Windows {
    lookahead: Time,
    /// The open window's start, once an event opened it.
    start: Option<Time>,
    /// Handled events of each host in the open window, and the hosts with any.
    per_host: Vec<u64>,
    touched: Vec<usize>,
    /// Handled events of each closed window.
    sizes: Vec<u32>,
    /// Hosts with an event, summed over closed windows.
    active_hosts: u64,
    /// For each entry of `cores`: the most events one core handled, summed over windows.
    critical: Vec<u64>,
    /// Scratch: events per core of the window being closed.
    per_core: Vec<u64>,
}

/// Events per lookahead window, for several lookaheads and core counts at once.
pub struct WindowCensus {
    hosts: usize,
    cores: Vec<usize>,
    windows: Vec<Windows>,
    /// Handled events of each host over the run.
    host_events: Vec<u64>,
    /// Events popped that found nothing to do (stale by a generation check).
    stale: u64,
    /// Messages that reached another host (the end of their wire stage).
    cross_host_messages: u64,
    /// The component of each host in the communication graph, numbered from 0.
    component: Vec<usize>,
    /// Each host's handled events, and message arrivals from other hosts among them, at its
    /// latest instant, by priority (`ties`).
    instant: Vec<Time>,
    instant_events: Vec<[u32; PRIORITIES]>,
    instant_arrivals: Vec<[u32; PRIORITIES]>,
    /// Messages from another host handled at the same time and priority as another event
    /// of their receiving host: the only events whose order a per-host tie-break decides
    /// differently from the one queue's sequence numbers (docs/parallel.md).
    tied_arrivals: u64,
}

/// The core that host `h` of `hosts` runs on among `cores` cores: contiguous blocks, so that
/// the hosts of a virtual cluster laid out side by side share a core where they can.
fn core_of(h: usize, hosts: usize, cores: usize) -> usize {
    h * cores / hosts
}

impl Windows {
    fn new(lookahead: Time, hosts: usize, n_cores: usize) -> Self {
        Windows {
            lookahead,
            start: None,
            per_host: vec![0; hosts],
            touched: Vec::new(),
            sizes: Vec::new(),
            active_hosts: 0,
            critical: vec![0; n_cores],
            per_core: Vec::new(),
        }
    }

    fn record(&mut self, now: Time, host: usize, handled: bool, cores: &[usize]) {
        match self.start {
            Some(start) if now < start + self.lookahead => {}
            Some(_) => {
                self.close(cores);
                self.start = Some(now);
            }
            None => self.start = Some(now),
        }
        if handled {
            if self.per_host[host] == 0 {
                self.touched.push(host);
            }
            self.per_host[host] += 1;
        }
    }

    fn close(&mut self, cores: &[usize]) {
        let hosts = self.per_host.len();
        let size: u64 = self.touched.iter().map(|&h| self.per_host[h]).sum();
        self.sizes.push(u32::try_from(size).unwrap_or(u32::MAX));
        self.active_hosts += self.touched.len() as u64;
        for (i, &p) in cores.iter().enumerate() {
            self.per_core.clear();
            self.per_core.resize(p, 0);
            for &h in &self.touched {
                self.per_core[core_of(h, hosts, p)] += self.per_host[h];
            }
            self.critical[i] += self.per_core.iter().max().copied().unwrap_or(0);
        }
        for &h in &self.touched {
            self.per_host[h] = 0;
        }
        self.touched.clear();
    }

    fn report(&mut self, cores: &[usize], events: u64) -> Value {
        if self.start.is_some() {
            self.close(cores);
            self.start = None;
        }
        let n = self.sizes.len();
        let mut sorted = self.sizes.clone();
        sorted.sort_unstable();
        let quantile = |q: f64| sorted.get(((n as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0);
        let by_cores: Vec<Value> = cores
            .iter()
            .zip(&self.critical)
            .map(|(&p, &critical)| {
                json!({
                    "cores": p,
                    "critical_events": critical,
                    "window_bound": events as f64 / critical.max(1) as f64,
                })
            })
            .collect();
        json!({
            "lookahead_ns": self.lookahead,
            "windows": n,
            "events_per_window_mean": events as f64 / n.max(1) as f64,
            "events_per_window_p10": quantile(0.1),
            "events_per_window_median": quantile(0.5),
            "events_per_window_p90": quantile(0.9),
            "events_per_window_max": sorted.last().copied().unwrap_or(0),
            "active_hosts_per_window_mean": self.active_hosts as f64 / n.max(1) as f64,
            "by_cores": by_cores,
        })
    }
}

impl WindowCensus {
    pub(super) fn new(core: &Core, lookaheads: &[Time], cores: &[usize]) -> Self {
        let hosts = core.hosts.len();
        WindowCensus {
            hosts,
            cores: cores.to_vec(),
            windows: lookaheads.iter().map(|&l| Windows::new(l, hosts, cores.len())).collect(),
            host_events: vec![0; hosts],
            stale: 0,
            cross_host_messages: 0,
            component: core.host_components(),
            instant: vec![0; hosts],
            instant_events: vec![[0; PRIORITIES]; hosts],
            instant_arrivals: vec![[0; PRIORITIES]; hosts],
            tied_arrivals: 0,
        }
    }

    /// Counts one popped event of `host` at `now` with tie-break `priority`; `handled` false
    /// if it was stale, `crosses_hosts` if it is a message arriving from another host.
    pub(super) fn record(&mut self, now: Time, priority: u8, host: usize, handled: bool, crosses_hosts: bool) {
        for w in &mut self.windows {
            w.record(now, host, handled, &self.cores);
        }
        if !handled {
            self.stale += 1;
            return;
        }
        self.host_events[host] += 1;
        self.cross_host_messages += u64::from(crosses_hosts);
        if self.instant[host] != now {
            self.close_instant(host);
            self.instant[host] = now;
        }
        self.instant_events[host][usize::from(priority)] += 1;
        self.instant_arrivals[host][usize::from(priority)] += u32::from(crosses_hosts);
    }

    /// Counts the arrivals of host `h`'s latest instant that shared their priority with
    /// another of its events, and clears the instant.
    fn close_instant(&mut self, h: usize) {
        for (events, arrivals) in self.instant_events[h].iter_mut().zip(&mut self.instant_arrivals[h]) {
            if *arrivals > 0 && *events > 1 {
                self.tied_arrivals += u64::from(*arrivals);
            }
            (*events, *arrivals) = (0, 0);
        }
    }

    /// What was counted, as JSON: per lookahead, the windows and their critical paths; per
    /// core count, the bound that the components alone set (no barrier between them).
    pub fn report(&mut self) -> Value {
        for h in 0..self.hosts {
            self.close_instant(h);
        }
        let events: u64 = self.host_events.iter().sum();
        let n_components = self.component.iter().max().map_or(0, |&c| c + 1);
        let mut component_events = vec![0u64; n_components];
        for (h, &e) in self.host_events.iter().enumerate() {
            component_events[self.component[h]] += e;
        }
        let by_cores: Vec<Value> = self
            .cores
            .iter()
            .map(|&p| {
                // Components dealt to cores in contiguous blocks, as hosts are.
                let mut per_core = vec![0u64; p];
                for (c, &e) in component_events.iter().enumerate() {
                    per_core[core_of(c, n_components, p)] += e;
                }
                let busiest = per_core.iter().max().copied().unwrap_or(0);
                json!({ "cores": p, "busiest_core_events": busiest, "bound": events as f64 / busiest.max(1) as f64 })
            })
            .collect();
        let (cores, hosts) = (self.cores.clone(), self.hosts);
        json!({
            "hosts": hosts,
            "events": events,
            "stale_pops": self.stale,
            "cross_host_messages": self.cross_host_messages,
            "tied_arrivals": self.tied_arrivals,
            "host_events_min": self.host_events.iter().min(),
            "host_events_max": self.host_events.iter().max(),
            "components": n_components,
            "components_by_cores": by_cores,
            "lookaheads": self.windows.iter_mut().map(|w| w.report(&cores, events)).collect::<Vec<_>>(),
        })
    }
}

impl Core {
    /// The host whose state event `ev` touches, and whether it is a message reaching a host
    /// other than its sender's (the only event one host makes for another, `network`).
    pub(super) fn event_host(&self, ev: &Ev) -> (usize, bool) {
        match *ev {
            Ev::Guest { v, .. } | Ev::Irq { v, .. } | Ev::GuestTimer { v, .. } => (self.vcpus[v].host, false),
            Ev::Wake { t } | Ev::Client { t } => (self.host_of(t), false),
            Ev::Timer { host, .. } => (host as usize, false),
            Ev::Tick { p } | Ev::SliceEnd { p } | Ev::Resched { p, .. } => (self.pcpus[p].host, false),
            Ev::SetType { d, .. } | Ev::Create { d } | Ev::Destroy { d } => (self.doms[d].host, false),
            Ev::Net { m } => {
                let msg = &self.msgs[m];
                let (from, to) = (self.host_of(msg.src), self.host_of(msg.dst));
                (to, msg.stage == Stage::Wire && from != to)
            }
            Ev::Disk { r } => (self.host_of(self.disk_reqs[r].t), false),
        }
    }

    /// Each host's connected component in the graph whose edges join the hosts of one job's
    /// ranks, numbered in the order of their first host.
    fn host_components(&self) -> Vec<usize> {
        let n = self.hosts.len();
        let mut parent: Vec<usize> = (0..n).collect();
        fn root(parent: &mut [usize], mut h: usize) -> usize {
            while parent[h] != h {
                parent[h] = parent[parent[h]];
                h = parent[h];
            }
            h
        }
        for ranks in &self.jobs {
            let mut hosts = ranks.iter().map(|&t| self.host_of(t));
            if let Some(first) = hosts.next() {
                for h in hosts {
                    let (a, b) = (root(&mut parent, first), root(&mut parent, h));
                    parent[a.max(b)] = a.min(b);
                }
            }
        }
        let mut number = vec![usize::MAX; n];
        let mut next = 0;
        (0..n)
            .map(|h| {
                let r = root(&mut parent, h);
                if number[r] == usize::MAX {
                    number[r] = next;
                    next += 1;
                }
                number[r]
            })
            .collect()
    }
}

impl super::Simulation {
    /// Counts the events of the coming run per window of each lookahead (ns), with the
    /// critical path of each core count (`WindowCensus`). Call before `run`.
    pub fn enable_window_census(&mut self, lookaheads: &[Time], cores: &[usize]) {
        self.census = Some(WindowCensus::new(&self.core, lookaheads, cores));
    }

    /// What the census counted, as JSON (`None` if it was not enabled).
    pub fn window_census(&mut self) -> Option<Value> {
        self.census.as_mut().map(WindowCensus::report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Windows open at their first event and hold everything before `start + lookahead`; a
    /// window's critical path is its busiest core's events, hosts dealt in contiguous blocks.
    #[test]
    fn windows_and_their_critical_paths() {
        let cores = [1, 2];
        let mut w = Windows::new(10, 4, cores.len());
        // Window [0, 10): hosts 0, 1 (core 0 of 2) with 3 events, host 3 (core 1) with 1.
        for (t, h) in [(0, 0), (3, 1), (9, 0), (9, 3)] {
            w.record(t, h, true, &cores);
        }
        // A stale event opens the next window [10, 20) but counts no work; then host 2.
        w.record(10, 2, false, &cores);
        w.record(19, 2, true, &cores);
        // [25, 35): one event.
        w.record(25, 1, true, &cores);
        let report = w.report(&cores, 6);
        assert_eq!(report["windows"], 3);
        assert_eq!(w.sizes, [4, 1, 1]);
        // One core: every event is on the critical path; two cores: 3 + 1 + 1.
        assert_eq!(w.critical, [6, 5]);
        assert_eq!(report["events_per_window_median"], 1);
        assert_eq!(report["events_per_window_max"], 4);
    }

    #[test]
    fn hosts_are_dealt_to_cores_in_contiguous_blocks() {
        let dealt: Vec<usize> = (0..8).map(|h| core_of(h, 8, 3)).collect();
        assert_eq!(dealt, [0, 0, 0, 1, 1, 1, 2, 2]);
        // More cores than hosts: each host on a core of its own.
        let spread: Vec<usize> = (0..4).map(|h| core_of(h, 4, 8)).collect();
        assert_eq!(spread, [0, 2, 4, 6]);
    }
}
