//! Weighted max-min fair sharing ("water-filling", Bertsekas & Gallager, *Data Networks*, 2nd
//! ed., §6.5.2): how a host's pCPUs split among VMs that ask for some each, the reference the
//! entitlement meter (`entitlement.rs`) integrates. A full split sorts the claimants by
//! demand per unit of weight; after one claimant's change a resplit moves it alone.

/// Splits `capacity` pCPUs among claimants of the given `weights` asking for `demands`
/// pCPUs each, by weighted max-min fairness (water-filling), into `rates`. A claimant gets
/// its demand if that is at most its weight's share of what the smaller claimants left;
/// the rest share the remainder in proportion to their weights. `scratch` keeps the order of
/// the previous call, which makes the sort nearly free when few demands changed; after a
/// change of one claimant's demand alone, [`max_min_fair_resplit`] spares the sort.
///
/// Returns where the water stopped rising when some claimants got less than they asked for
/// (`None` when every demand was met, or only weightless claimants were left short).
pub fn max_min_fair_split(
    capacity: f64,
    weights: &[f64],
    demands: &[f64],
    rates: &mut [f64],
    scratch: &mut SplitScratch,
) -> Option<WaterLevel> {
    let total_demand: f64 = demands.iter().sum();
    if total_demand <= capacity {
        rates.copy_from_slice(demands);
        // The keys were not worked out: a later `resplit` must not trust them.
        scratch.current = false;
        return None;
    }
    // Smallest demand per unit of weight first: those are satisfied before the level rises
    // past them. Ties break by index, so the result depends on no previous order.
    let SplitScratch { order, per_weight, current } = scratch;
    if order.len() != demands.len() {
        order.clear();
        order.extend(0..demands.len());
    }
    // Each claimant's key is worked out once, not at each of its comparisons.
    per_weight.clear();
    per_weight.extend(weights.iter().zip(demands).map(|(&w, &d)| key(w, d)));
    // Insertion sort: linear on the nearly sorted order of the previous call.
    for i in 1..order.len() {
        let mut j = i;
        while j > 0 && before(per_weight, order[j], order[j - 1]) {
            order.swap(j, j - 1);
            j -= 1;
        }
    }
    *current = true;
    let weight_total: f64 = order.iter().map(|&i| weights[i]).sum();
    fill(capacity, weights, demands, weight_total, scratch, rates)
}

/// [`max_min_fair_split`] after only claimant `changed`'s demand changed since the last
/// split with this `scratch`, given the sum of the demands (as `max_min_fair_split` sums
/// them, in index order) and of the weights. The result is bit for bit that of
/// `max_min_fair_split` when the weights' sum is exact in any order (whole weights below
/// 2^53): the order is the same (a strict total order has one sorted arrangement), and so
/// is every sum and comparison of the water-filling. It costs a move of one claimant in the
/// order instead of a key and a comparison per claimant.
#[allow(clippy::too_many_arguments)]
pub fn max_min_fair_resplit(
    capacity: f64,
    weights: &[f64],
    weight_total: f64,
    demands: &[f64],
    total_demand: f64,
    changed: usize,
    rates: &mut [f64],
    scratch: &mut SplitScratch,
) -> Option<WaterLevel> {
    if !scratch.current || scratch.order.len() != demands.len() {
        return max_min_fair_split(capacity, weights, demands, rates, scratch);
    }
    if total_demand <= capacity {
        rates.copy_from_slice(demands);
        scratch.current = false;
        return None;
    }
    scratch.note_change(changed, key(weights[changed], demands[changed]));
    fill(capacity, weights, demands, weight_total, scratch, rates)
}

/// A claimant's sort key: its demand per unit of weight (weightless ones last).
pub(crate) fn key(weight: f64, demand: f64) -> f64 {
    if weight > 0.0 {
        demand / weight
    } else {
        f64::INFINITY
    }
}

/// Whether claimant `a` comes before `b`: a smaller key, or the same key and a smaller index.
fn before(per_weight: &[f64], a: usize, b: usize) -> bool {
    per_weight[a].total_cmp(&per_weight[b]).then(a.cmp(&b)).is_lt()
}

/// The water-filling over claimants in `scratch`'s sorted order, `weight_total` the sum of
/// their weights: claimants are met in full while their key is at most the level the rest
/// would reach; from the first that is not, everyone left gets the level times its weight.
fn fill(
    capacity: f64,
    weights: &[f64],
    demands: &[f64],
    weight_total: f64,
    scratch: &SplitScratch,
    rates: &mut [f64],
) -> Option<WaterLevel> {
    let SplitScratch { order, per_weight, .. } = scratch;
    let mut left = capacity;
    let mut weight_left = weight_total;
    let mut highest_met = f64::NEG_INFINITY;
    for (position, &i) in order.iter().enumerate() {
        if weight_left <= 0.0 {
            // Only weightless claimants remain: a share by weight gives them nothing.
            for &j in &order[position..] {
                rates[j] = 0.0;
            }
            return None;
        }
        let level = left / weight_left;
        if per_weight[i] <= level {
            rates[i] = demands[i];
            left -= demands[i];
            weight_left -= weights[i];
            highest_met = per_weight[i];
        } else {
            // Every claimant from here on asks for more than the level: they split the rest.
            for &j in &order[position..] {
                rates[j] = level * weights[j];
            }
            return Some(WaterLevel { level, highest_met });
        }
    }
    None
}

/// Scratch space of [`max_min_fair_split`], kept between calls: the claimants in the order of
/// the last split, and each one's demand per unit of weight.
#[derive(Debug, Clone, Default)]
pub struct SplitScratch {
    order: Vec<usize>,
    per_weight: Vec<f64>,
    /// `order` and `per_weight` are those of the last call's demands (it did not return
    /// before sorting, when every demand fitted), but for changes told by `note_change`.
    current: bool,
}

impl SplitScratch {
    /// Claimant `changed` now has key `per_weight` (demand over weight): keeps the order
    /// sorted by moving it alone. For a caller that skips a split whose result it knows
    /// (see `EntitlementMeter::advance`), so that the next `max_min_fair_resplit` may trust
    /// the order; nothing to do when it is not current.
    pub(crate) fn note_change(&mut self, changed: usize, per_weight: f64) {
        if !self.current {
            return;
        }
        let SplitScratch { order, per_weight: keys, .. } = self;
        keys[changed] = per_weight;
        let mut at = order.iter().position(|&i| i == changed).expect("every claimant is in the order");
        while at > 0 && before(keys, order[at], order[at - 1]) {
            order.swap(at, at - 1);
            at -= 1;
        }
        while at + 1 < order.len() && before(keys, order[at + 1], order[at]) {
            order.swap(at, at + 1);
            at += 1;
        }
    }
}

/// Where a split's water stopped: claimants whose demand per unit of weight is above `level`
/// got `level` times their weight; those met in full asked for at most `highest_met` each
/// per unit of weight (`-inf` if none was).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WaterLevel {
    pub level: f64,
    pub highest_met: f64,
}

impl WaterLevel {
    /// Whether a claimant asking `per_weight` (demand over weight) is above the water, and
    /// strictly after every claimant met in full in the split's order.
    pub(crate) fn keeps_above(&self, per_weight: f64) -> bool {
        per_weight > self.level && per_weight > self.highest_met
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(capacity: f64, weights: &[f64], demands: &[f64]) -> Vec<f64> {
        let mut rates = vec![f64::NAN; demands.len()];
        max_min_fair_split(capacity, weights, demands, &mut rates, &mut SplitScratch::default());
        rates
    }

    #[test]
    fn demands_that_fit_are_met_in_full() {
        assert_eq!(split(4.0, &[1.0, 1.0, 1.0], &[1.0, 2.0, 0.5]), vec![1.0, 2.0, 0.5]);
    }

    #[test]
    fn equal_weights_split_equally_and_a_small_demand_leaves_its_rest_to_the_others() {
        assert_eq!(split(3.0, &[1.0, 1.0, 1.0], &[4.0, 4.0, 4.0]), vec![1.0, 1.0, 1.0]);
        assert_eq!(split(4.0, &[1.0, 1.0, 1.0], &[1.0, 4.0, 4.0]), vec![1.0, 1.5, 1.5]);
    }

    #[test]
    fn weights_set_the_split_between_vms_that_ask_for_more() {
        assert_eq!(split(3.0, &[256.0, 512.0], &[4.0, 4.0]), vec![1.0, 2.0]);
        // The heavy VM cannot use its 2 pCPUs with one vCPU: the light one takes the rest.
        assert_eq!(split(3.0, &[256.0, 512.0], &[4.0, 1.0]), vec![2.0, 1.0]);
    }

    #[test]
    fn weightless_claimants_get_nothing_when_the_host_is_contended() {
        assert_eq!(split(2.0, &[0.0, 1.0], &[2.0, 4.0]), vec![0.0, 2.0]);
    }

    #[test]
    fn the_order_left_by_a_previous_split_does_not_change_the_next() {
        let mut scratch = SplitScratch::default();
        let mut rates = vec![0.0; 3];
        max_min_fair_split(2.0, &[1.0, 1.0, 1.0], &[0.5, 3.0, 3.0], &mut rates, &mut scratch);
        assert_eq!(rates, vec![0.5, 0.75, 0.75]);
        max_min_fair_split(2.0, &[1.0, 1.0, 1.0], &[3.0, 3.0, 0.2], &mut rates, &mut scratch);
        assert_eq!(rates, split(2.0, &[1.0, 1.0, 1.0], &[3.0, 3.0, 0.2]));
        assert_eq!(rates, vec![0.9, 0.9, 0.2]);
    }

    /// A resplit after one claimant's change must give what a split from scratch gives, bit
    /// for bit, water level included: whole weights (some zero, many tied), demands with
    /// fractions (capped VMs), and hosts from uncontended to heavily contended.
    #[test]
    fn a_resplit_after_one_change_is_the_split_bit_for_bit() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut moved = 0;
        for capacity in [2.0, 6.0, 24.0] {
            let n = 12;
            let weights: Vec<f64> = (0..n).map(|_| [0.0, 128.0, 256.0, 256.0, 512.0][(next() % 5) as usize]).collect();
            let weight_total: f64 = weights.iter().sum();
            let mut demands: Vec<f64> = (0..n).map(|_| (next() % 5) as f64).collect();
            let (mut rates, mut scratch) = (vec![0.0; n], SplitScratch::default());
            max_min_fair_split(capacity, &weights, &demands, &mut rates, &mut scratch);
            for _ in 0..5_000 {
                let changed = (next() % n as u64) as usize;
                demands[changed] = if next() % 4 == 0 { (next() % 30) as f64 / 10.0 } else { (next() % 6) as f64 };
                let before = scratch.order.clone();
                let total: f64 = demands.iter().sum();
                let water = max_min_fair_resplit(
                    capacity,
                    &weights,
                    weight_total,
                    &demands,
                    total,
                    changed,
                    &mut rates,
                    &mut scratch,
                );
                moved += usize::from(scratch.current && before != scratch.order);
                let mut expected = vec![0.0; n];
                let expected_water =
                    max_min_fair_split(capacity, &weights, &demands, &mut expected, &mut SplitScratch::default());
                assert_eq!(water, expected_water, "the water level after claimant {changed} changed");
                let bits = |r: &[f64]| r.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&rates), bits(&expected), "the rates after claimant {changed} changed");
            }
        }
        assert!(moved > 1_000, "a change should often move its claimant in the order: {moved}");
    }
}
