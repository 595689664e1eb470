//! How a run on real vCPUs fails, in the classes the command line turns into exit codes.

use crate::backend::BackendError;

/// Why a run on real vCPUs did not produce a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RealError {
    /// Bad input, or this machine cannot run it (no `/dev/kvm`, a workload the backend cannot
    /// run, more pCPUs than host CPUs): one line naming the field. Exit 2.
    Scenario(String),
    /// The policy made an unusable decision or called `fail`. Exit 1.
    Policy(String),
    /// The backend failed while running (an unexpected exit, a failed ioctl). Exit 1.
    Backend(String),
    /// The caller's stop flag was raised (Ctrl-C). Exit 130.
    Interrupted,
}

impl std::fmt::Display for RealError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RealError::Scenario(m) | RealError::Policy(m) | RealError::Backend(m) => f.write_str(m),
            RealError::Interrupted => f.write_str("interrupted"),
        }
    }
}

impl std::error::Error for RealError {}

impl From<BackendError> for RealError {
    fn from(error: BackendError) -> Self {
        match error {
            BackendError::Unavailable(_) | BackendError::Unsupported { .. } => RealError::Scenario(error.to_string()),
            BackendError::Failed(m) => RealError::Backend(format!("real vCPUs failed: {m}")),
        }
    }
}

impl From<vsched_model::ConfigError> for RealError {
    fn from(error: vsched_model::ConfigError) -> Self {
        RealError::Scenario(error.to_string())
    }
}
