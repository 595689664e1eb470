//! `[scheduler]`: which policy runs the hosts, with its parameters checked.

use std::collections::BTreeMap;

use vsched_model::{ConfigError, Params, Value};

use super::file::NamedSection;
use super::values::{err, to_params};
use crate::external::{is_external_name, PolicyResolver, PolicySource};

/// The policy `[scheduler]` names, its parameters checked: a registered policy, or one that
/// `resolver` finds (an external name, see `external`). `releases` are the host's
/// (`xen_version`, `kvm_version`), each the default of a registered policy that declares that
/// parameter; `field` is where the name was given, for errors.
pub(super) fn policy_source(
    scheduler: &NamedSection,
    releases: [(&str, Option<&str>); 2],
    field: &str,
    resolver: Option<&dyn PolicyResolver>,
) -> Result<PolicySource, ConfigError> {
    let name = &scheduler.name;
    let mut given = to_params("scheduler", &scheduler.params)?;
    if is_external_name(name) {
        let resolver = resolver.ok_or_else(|| {
            err(field, format!("{name:?} names a policy written in Python, which only the Python package can load"))
        })?;
        return Ok(PolicySource::External(resolver.resolve(field, name, &given)?));
    }
    let info = vsched_policies::find(name).ok_or_else(|| {
        err(
            "scheduler.name",
            format!(
                "unknown policy {name:?}; expected one of {}, or a Python policy as path/to/file.py:ClassName",
                vsched_policies::names().join(", ")
            ),
        )
    })?;
    for (key, version) in releases {
        if let Some(version) = version {
            if info.params.iter().any(|p| p.name == key) && !given.contains_key(key) {
                given.insert(key.into(), Value::Str(version.to_string()));
            }
        }
    }
    let params = Params::check("scheduler", info.params, &given)?;
    Ok(PolicySource::Builtin { info, params })
}

/// Whether policy `info`, at its default parameters, handles VMs created and destroyed
/// during a run.
pub fn supports_vm_lifecycle(info: &vsched_model::PolicyInfo) -> bool {
    Params::check("scheduler", info.params, &BTreeMap::new())
        .and_then(|params| (info.build)(&params))
        .is_ok_and(|b| b.supports_vm_lifecycle())
}

/// The policies that handle VMs created and destroyed during a run.
pub(super) fn lifecycle_policies() -> Vec<&'static str> {
    vsched_policies::REGISTRY.iter().filter(|p| supports_vm_lifecycle(p)).map(|p| p.name).collect()
}
