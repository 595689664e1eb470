//! The counters a policy bumps with `Cx::count`, one set per host.
//!
//! A policy names a counter with a `&'static str` and bumps it on hot paths (every tickle,
//! every steal), while a host has only a handful of names. So they are kept in a short list
//! in first-use order, found by the name's address before its text: a literal bumped from
//! one place in the code keeps one address, so the common lookup is a pointer compare; the
//! text compare behind it keeps two copies of one name a single counter. The report lists
//! them by name (`sorted`), as the map they replaced did.

use std::collections::BTreeMap;

#[derive(Debug, Clone, Default)]
pub struct PolicyCounters {
    counts: Vec<(&'static str, u64)>,
}

impl PolicyCounters {
    /// Adds one to counter `name`.
    #[inline]
    pub fn bump(&mut self, name: &'static str, amount: u64) {
        let slot = match self.counts.iter().position(|&(known, _)| std::ptr::eq(known, name)) {
            Some(i) => i,
            None => match self.counts.iter().position(|&(known, _)| known == name) {
                Some(i) => i,
                None => {
                    self.counts.push((name, 0));
                    self.counts.len() - 1
                }
            },
        };
        self.counts[slot].1 += amount;
    }

    /// Every counter by name.
    pub fn sorted(&self) -> BTreeMap<String, u64> {
        self.counts.iter().map(|&(name, count)| (name.to_string(), count)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_names_at_different_addresses_are_one_counter() {
        let mut counters = PolicyCounters::default();
        let owned = String::from("credit.tickles");
        let leaked: &'static str = Box::leak(owned.into_boxed_str());
        counters.bump("credit.tickles", 1);
        counters.bump(leaked, 1);
        counters.bump("credit.boosts", 1);
        let sorted = counters.sorted();
        assert_eq!(
            sorted.into_iter().collect::<Vec<_>>(),
            [("credit.boosts".to_string(), 1), ("credit.tickles".to_string(), 2)]
        );
    }
}
