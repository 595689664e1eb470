//! Analytic models from the seed papers, kept apart from the simulator: exact, small models
//! whose results the simulator's behaviour is checked against in the tests.
//!
//! - [`slot_model`]: Weng's slot model of a concurrent job on an SMP VM (seed 003).

pub mod slot_model;
