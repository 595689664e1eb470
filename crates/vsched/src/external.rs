//! Policies from outside the registry: a scenario's `[scheduler] name` (or `--policy`) may name
//! a policy that the caller of the facade supplies, such as a Python class
//! (`path/to/file.py:ClassName`, loaded by the `vsched-py` bindings).
//!
//! The facade knows such a name by its form only (a `:` in it, which no registered name has)
//! and asks the caller's [`PolicyResolver`] for it while it parses the scenario; the
//! resolver binds the `[scheduler]` table's other keys and returns an [`ExternalPolicy`], a
//! factory that builds one policy instance per host and run, exactly where a registered
//! policy's `build` would be called. Everything after that (the engine, the validation of
//! decisions, the report) is the same for both kinds.

use std::collections::BTreeMap;
use std::sync::Arc;

use vsched_model::{ConfigError, Cx, Decision, Hypervisor, Params, PcpuId, Policy, PolicyInfo, Value, VcpuId};

/// Whether a scheduler name names an external policy rather than a registered one.
pub fn is_external_name(name: &str) -> bool {
    name.contains(':')
}

/// A policy supplied by the facade's caller, its parameters bound.
pub trait ExternalPolicy: Send + Sync {
    /// The name the scenario gave it, as errors and the report show it.
    fn name(&self) -> &str;
    /// The hypervisor it is the scheduler of (what the host has by default, e.g. Domain-0).
    fn hypervisor(&self) -> Hypervisor;
    /// A new instance, for one host of one run; an error is one line saying why.
    fn build(&self) -> Result<Box<dyn Policy>, String>;
}

/// Finds the external policies that scenarios name (see the module notes).
pub trait PolicyResolver {
    /// The policy `name` names, with `params` (the `[scheduler]` table's keys other than
    /// `name`). `field` is where the name was given (`scheduler.name` or `--policy`), for
    /// the error, which names it.
    fn resolve(
        &self,
        field: &str,
        name: &str,
        params: &BTreeMap<String, Value>,
    ) -> Result<Arc<dyn ExternalPolicy>, ConfigError>;
}

/// The policy a scenario runs under.
#[derive(Clone)]
pub enum PolicySource {
    /// A registered policy, with its checked parameters.
    Builtin { info: &'static PolicyInfo, params: Params },
    /// A policy of the facade's caller.
    External(Arc<dyn ExternalPolicy>),
}

impl PolicySource {
    pub fn name(&self) -> &str {
        match self {
            PolicySource::Builtin { info, .. } => info.name,
            PolicySource::External(policy) => policy.name(),
        }
    }

    pub fn hypervisor(&self) -> Hypervisor {
        match self {
            PolicySource::Builtin { info, .. } => info.hypervisor,
            PolicySource::External(policy) => policy.hypervisor(),
        }
    }

    /// A new instance; errors name the field at fault.
    pub fn build(&self) -> Result<Box<dyn Policy>, ConfigError> {
        match self {
            PolicySource::Builtin { info, params } => (info.build)(params),
            PolicySource::External(policy) => policy.build().map_err(|m| ConfigError::new("scheduler", m)),
        }
    }

    /// A new instance for a run of a scenario that validation has built once already. Should
    /// an external policy fail now (its constructor is user code, which may not do the same
    /// twice), the run fails at its start with that error, as a policy error.
    pub(crate) fn build_for_run(&self) -> Box<dyn Policy> {
        match self {
            PolicySource::Builtin { info, params } => (info.build)(params).expect("validated"),
            PolicySource::External(policy) => {
                policy.build().unwrap_or_else(|message| Box::new(FailsAtInit { message }))
            }
        }
    }
}

/// Stands in for a policy that could not be built: it fails the run at `init`.
struct FailsAtInit {
    message: String,
}

impl Policy for FailsAtInit {
    fn init(&mut self, cx: &mut Cx) {
        cx.fail(format!("could not be built for the run: {}", self.message));
    }
    fn vcpu_insert(&mut self, _cx: &mut Cx, _v: VcpuId) {}
    fn wake(&mut self, _cx: &mut Cx, _v: VcpuId) {}
    fn pick_next(&mut self, _cx: &mut Cx, _pcpu: PcpuId, _prev: Option<VcpuId>) -> Decision {
        Decision::idle()
    }
}
