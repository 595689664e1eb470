//! Each VM's CPU entitlement: what a weighted max-min fair split of its host would have
//! given it, instant by instant, for what it asked. The host `fairness` index compares what
//! each VM received with this (`metrics.rs`).
//!
//! At each instant a VM asks for as many pCPUs as it has vCPUs running or runnable (a vCPU
//! waiting in a run queue wants a pCPU as much as one holding it), and no more than its cap
//! allows (`cap` percent of one pCPU; 0 = none). The host's pCPUs are split among the VMs
//! by weighted max-min fairness, "water-filling" (Bertsekas & Gallager, *Data Networks*,
//! 2nd ed., §6.5.2; `water_filling.rs`): a VM asking for less than its weight's share of
//! what is left gets all it asks for, and the others split the rest by weight. The split changes only when some
//! VM starts or stops asking for a pCPU, so between such changes each VM's entitlement grows
//! at a constant rate; summed over the run, that is its entitlement in pCPU-seconds.
//!
//! Approximations, on purpose:
//! - The split is fluid: it ignores time slices, the policy's quanta and pinning, so no real
//!   scheduler tracks it exactly from instant to instant; over a run the differences average
//!   out for a fair scheduler (the index reads 0.99+), and what remains is what the scheduler
//!   decided.
//! - Asking is read off the vCPU's state, not its guest's intent: time a VM was kept waiting
//!   counts as asked for, so a VM served late (a web server whose vCPUs wait behind hogs)
//!   was entitled to more than it received even if it finished its work eventually. That is
//!   the point: it could have run sooner.
//! - Dispatch overheads count as CPU received (as in `cpu_s`), and the pool is all of the
//!   host's pCPUs, whatever they did.

use vsched_engine::Time;

use crate::water_filling::{key, max_min_fair_resplit, max_min_fair_split, SplitScratch, WaterLevel};

/// One host's entitlements, integrated as its VMs start and stop asking for pCPUs. The
/// simulator tells it every change (`sim/accounting.rs`); VMs are indexed from 0 on the host.
#[derive(Debug, Clone)]
pub struct EntitlementMeter {
    pcpus: f64,
    weights: Vec<f64>,
    /// The weights' sum, when it is exact whatever the order of summing (whole weights, as
    /// they are, below 2^53): then a change of one VM's demand costs a `resplit`.
    exact_weight_total: Option<f64>,
    /// The most pCPUs each VM may be given: its cap, or unbounded.
    cap_pcpus: Vec<f64>,
    /// Its vCPUs running or runnable now.
    asking: Vec<u32>,
    /// Its entitlement per second of the current interval, in pCPUs.
    rates: Vec<f64>,
    entitled_ns: Vec<f64>,
    /// The start of the current interval.
    since: Time,
    /// `asking` changed since `rates` were computed.
    stale: bool,
    /// Which VMs' demands changed since `rates` were computed.
    changed: Changed,
    /// Where the water stopped in the split that gave `rates`.
    water: Option<WaterLevel>,
    /// Each VM's demand in pCPUs, `min(asking, cap)`, as of the last split.
    demands: Vec<f64>,
    /// Every cap is a whole number of pCPUs (or none): then every demand is a whole number,
    /// any sum of them is exact in `f64`, and `demand_sum` is kept up to date change by
    /// change instead of summed again.
    whole_demands: bool,
    demand_sum: f64,
    // Scratch space of the split, kept to spare allocations per change.
    scratch: SplitScratch,
}

impl EntitlementMeter {
    /// A host of `pcpus` pCPUs with VMs of the given (weight, cap) — cap in percent of one
    /// pCPU, 0 for none — none of them asking yet.
    pub fn new(pcpus: usize, vms: impl IntoIterator<Item = (u32, u32)>) -> Self {
        let (weights, cap_pcpus): (Vec<f64>, Vec<f64>) = vms
            .into_iter()
            .map(|(weight, cap)| (weight as f64, if cap == 0 { f64::INFINITY } else { cap as f64 / 100.0 }))
            .unzip();
        let n = weights.len();
        let whole_demands = cap_pcpus.iter().all(|c| c.fract() == 0.0 || c.is_infinite());
        let weight_total: f64 = weights.iter().sum();
        let exact_weight_total = (weight_total < 2f64.powi(53)).then_some(weight_total);
        EntitlementMeter {
            pcpus: pcpus as f64,
            weights,
            exact_weight_total,
            cap_pcpus,
            asking: vec![0; n],
            rates: vec![0.0; n],
            entitled_ns: vec![0.0; n],
            since: 0,
            stale: false,
            changed: Changed::None,
            water: None,
            demands: vec![0.0; n],
            whole_demands,
            demand_sum: 0.0,
            scratch: SplitScratch::default(),
        }
    }

    /// One more vCPU of VM `vm` asks for a pCPU from `now` on.
    pub fn start_asking(&mut self, now: Time, vm: usize) {
        self.advance(now);
        self.asking[vm] += 1;
        self.note_change(vm);
    }

    /// One vCPU of VM `vm` stops asking for a pCPU at `now` (it blocked or went offline).
    pub fn stop_asking(&mut self, now: Time, vm: usize) {
        self.advance(now);
        debug_assert!(self.asking[vm] > 0, "a VM stopped asking for more pCPUs than it asked for");
        self.asking[vm] -= 1;
        self.note_change(vm);
    }

    /// How many vCPUs of VM `vm` ask for a pCPU now (runnable or running).
    pub fn asking(&self, vm: usize) -> usize {
        self.asking[vm] as usize
    }

    fn note_change(&mut self, vm: usize) {
        self.stale = true;
        self.changed = match self.changed {
            Changed::None => Changed::One(vm),
            Changed::One(v) if v == vm => Changed::One(vm),
            _ => Changed::Many,
        };
    }

    /// Demand per unit of weight, as the split computes it.
    fn per_weight(&self, vm: usize, demand: f64) -> f64 {
        key(self.weights[vm], demand)
    }

    /// The sum of the demands, bit for bit as the split sums them: kept up to date when every
    /// demand is whole (any order of summing gives the same exact sum), else summed again.
    fn total_demand(&self) -> f64 {
        if self.whole_demands {
            self.demand_sum
        } else {
            self.demands.iter().sum()
        }
    }

    /// Adds the entitlements of the interval up to `now`.
    pub fn advance(&mut self, now: Time) {
        if now <= self.since {
            return;
        }
        if self.stale {
            // Several changes at one instant cost one split.
            let one_change = match (self.changed, self.water) {
                (Changed::One(vm), Some(water)) => Some((vm, water, self.demands[vm])),
                _ => None,
            };
            match self.changed {
                // The others' demands are as they were.
                Changed::One(vm) => {
                    let demand = (self.asking[vm] as f64).min(self.cap_pcpus[vm]);
                    self.demand_sum += demand - self.demands[vm];
                    self.demands[vm] = demand;
                }
                Changed::Many | Changed::None => {
                    for ((demand, &asking), &cap) in self.demands.iter_mut().zip(&self.asking).zip(&self.cap_pcpus) {
                        *demand = (asking as f64).min(cap);
                    }
                    self.demand_sum = self.demands.iter().sum();
                }
            }
            // When the one VM whose demand changed was above the water and still is (and
            // after every VM met in full), the split would redo the same arithmetic: the VMs
            // met in full, their order, the level and so every rate come out as before. The
            // test is on the very floats the split compares, so skipping it changes no bit of
            // a result; it spares the split on most changes of a contended host, where nearly
            // every VM is above the water.
            let same_split = one_change.is_some_and(|(vm, water, old_demand)| {
                water.keeps_above(self.per_weight(vm, old_demand))
                    && water.keeps_above(self.per_weight(vm, self.demands[vm]))
                    && self.total_demand() > self.pcpus
            });
            if same_split {
                // The rates stand; the order the next split starts from follows the change.
                if let Changed::One(vm) = self.changed {
                    self.scratch.note_change(vm, self.per_weight(vm, self.demands[vm]));
                }
            } else {
                self.water = match (self.changed, self.exact_weight_total) {
                    (Changed::One(vm), Some(weight_total)) => max_min_fair_resplit(
                        self.pcpus,
                        &self.weights,
                        weight_total,
                        &self.demands,
                        self.total_demand(),
                        vm,
                        &mut self.rates,
                        &mut self.scratch,
                    ),
                    _ => {
                        max_min_fair_split(self.pcpus, &self.weights, &self.demands, &mut self.rates, &mut self.scratch)
                    }
                };
            }
            self.stale = false;
            self.changed = Changed::None;
        }
        let elapsed = (now - self.since) as f64;
        for (entitled, rate) in self.entitled_ns.iter_mut().zip(&self.rates) {
            *entitled += rate * elapsed;
        }
        self.since = now;
    }

    /// VM `vm`'s entitlement so far (up to the last `advance`), in pCPU-nanoseconds.
    pub fn entitled_ns(&self, vm: usize) -> f64 {
        self.entitled_ns[vm]
    }
}

/// Which VMs' demands changed since the last split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Changed {
    None,
    One(usize),
    Many,
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Time = 1_000_000_000;

    #[test]
    fn a_cap_bounds_the_entitlement_and_the_others_take_the_rest() {
        // 4 pCPUs; VM 0 capped at half a pCPU, both with 4 vCPUs asking for 10 s.
        let mut meter = EntitlementMeter::new(4, [(256, 50), (256, 0)]);
        for _ in 0..4 {
            meter.start_asking(0, 0);
            meter.start_asking(0, 1);
        }
        meter.advance(10 * S);
        assert_eq!(meter.entitled_ns(0), 5.0 * S as f64);
        assert_eq!(meter.entitled_ns(1), 35.0 * S as f64);
    }

    #[test]
    fn a_vm_that_blocks_is_entitled_to_what_it_asked_for_and_no_more() {
        // 4 pCPUs, three 4-vCPU VMs; VM 0 asks for the first 5 s only, then blocks.
        let mut meter = EntitlementMeter::new(4, [(256, 0); 3]);
        for vm in 0..3 {
            for _ in 0..4 {
                meter.start_asking(0, vm);
            }
        }
        for _ in 0..4 {
            meter.stop_asking(5 * S, 0);
        }
        meter.advance(10 * S);
        let third = 4.0 / 3.0 * 5.0 * S as f64;
        assert!((meter.entitled_ns(0) - third).abs() < 1.0);
        // The others: a third each while it asked, half each after.
        assert!((meter.entitled_ns(1) - (third + 2.0 * 5.0 * S as f64)).abs() < 1.0);
        assert_eq!(meter.entitled_ns(1), meter.entitled_ns(2));
    }

    #[test]
    fn entitlements_add_up_to_the_host_when_it_is_contended() {
        let mut meter = EntitlementMeter::new(2, [(256, 0), (512, 0), (256, 30)]);
        for vm in 0..3 {
            meter.start_asking(0, vm);
            meter.start_asking(0, vm);
        }
        meter.stop_asking(3 * S, 1);
        meter.advance(7 * S);
        let total: f64 = (0..3).map(|vm| meter.entitled_ns(vm)).sum();
        assert!((total - 14.0 * S as f64).abs() < 1.0, "{total}");
    }

    /// The meter skips the split when one VM's change leaves it above the water, and sums
    /// the demands only when a cap is fractional: its entitlements must stay bit for bit
    /// those of splitting at every change.
    #[test]
    fn skipping_unchanged_splits_changes_no_bit() {
        // Fractional caps (1.5 and 0.3 pCPUs), then whole ones (the demand sum kept up to date).
        skipping_changes_no_bit([(256, 0), (512, 0), (256, 150), (128, 0), (256, 0), (0, 0), (256, 30)]);
        skipping_changes_no_bit([(256, 0), (512, 0), (256, 200), (128, 0), (256, 0), (0, 0), (256, 100)]);
    }

    fn skipping_changes_no_bit(vms: [(u32, u32); 7]) {
        let vcpus = [8u32, 4, 4, 2, 8, 2, 1];
        let mut meter = EntitlementMeter::new(6, vms);
        let weights: Vec<f64> = vms.iter().map(|&(w, _)| w as f64).collect();
        let caps: Vec<f64> = vms.iter().map(|&(_, c)| if c == 0 { f64::INFINITY } else { c as f64 / 100.0 }).collect();
        let mut asking = vec![0u32; vms.len()];
        let (mut rates, mut scratch) = (vec![0.0; vms.len()], SplitScratch::default());
        let mut reference = vec![0.0f64; vms.len()];
        let (mut now, mut since, mut x) = (0 as Time, 0 as Time, 0x9e37_79b9_7f4a_7c15u64);
        let mut skipped = 0;
        for _ in 0..20_000 {
            // xorshift: a fixed pseudo-random walk of wakes and blocks.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let vm = (x % vms.len() as u64) as usize;
            if x >> 60 < 3 {
                now += (x >> 20) % 5_000_000;
            }
            let wake = (x >> 8) & 1 == 1 && asking[vm] < vcpus[vm] || asking[vm] == 0;
            if now > since {
                let demands: Vec<f64> = asking.iter().zip(&caps).map(|(&a, &c)| (a as f64).min(c)).collect();
                max_min_fair_split(6.0, &weights, &demands, &mut rates, &mut scratch);
                for (e, r) in reference.iter_mut().zip(&rates) {
                    *e += r * (now - since) as f64;
                }
                since = now;
            }
            let water_before = meter.water;
            if wake {
                asking[vm] += 1;
                meter.start_asking(now, vm);
            } else {
                asking[vm] -= 1;
                meter.stop_asking(now, vm);
            }
            skipped += usize::from(meter.water == water_before && water_before.is_some());
            let summed: f64 = meter.demands.iter().sum();
            assert_eq!(meter.total_demand().to_bits(), summed.to_bits(), "the demands' sum after {now} ns");
        }
        meter.advance(now + 1);
        let demands: Vec<f64> = asking.iter().zip(&caps).map(|(&a, &c)| (a as f64).min(c)).collect();
        max_min_fair_split(6.0, &weights, &demands, &mut rates, &mut scratch);
        for (e, r) in reference.iter_mut().zip(&rates) {
            *e += r * (now + 1 - since) as f64;
        }
        for (vm, expected) in reference.iter().enumerate() {
            assert_eq!(meter.entitled_ns(vm).to_bits(), expected.to_bits(), "VM {vm}");
        }
        assert!(skipped > 1_000, "the walk should often leave the water level as it was: {skipped}");
    }
}
