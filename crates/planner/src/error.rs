use thiserror::Error;

#[derive(Debug, Error)]
pub enum PlannerError {
    /// A scenario value that cannot be planned with, named by its field.
    #[error("{field}: {message}")]
    BadInput { field: String, message: String },
    #[error("scenario file: {0}")]
    Scenario(String),
    // The cause is in the message, not a `source`, so a report that prints the error
    // chain does not say it twice.
    #[error("{field}: {cause}")]
    Topology { field: String, cause: railyard_topology::TopologyError },
    #[error("{field}: {cause} (in a scenario, the options are the communication's topo, algo and size_bytes)")]
    Model { field: String, cause: Box<railyard_model::ModelError> },
    #[error("{field}: {message}")]
    Sim { field: String, message: String },
}

impl PlannerError {
    pub fn bad(field: impl Into<String>, message: impl Into<String>) -> Self {
        PlannerError::BadInput { field: field.into(), message: message.into() }
    }
}

/// `value` must be finite and above zero.
pub fn positive(field: &str, value: f64) -> Result<f64, PlannerError> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(PlannerError::bad(
            field,
            format!("must be a finite number above zero (got {})", railyard_units::units::format_number(value)),
        ))
    }
}

/// The longest time any planner input may give (about 31 years), so sums stay finite.
pub const MAX_SECS: f64 = 1e9;

/// A time input: 0..=MAX_SECS, so sums of times stay finite.
pub fn secs(field: &str, value: f64) -> Result<f64, PlannerError> {
    within(field, value, 0.0, MAX_SECS)
}

/// `value` must lie in `lo..=hi`.
pub fn within(field: &str, value: f64, lo: f64, hi: f64) -> Result<f64, PlannerError> {
    if value.is_finite() && (lo..=hi).contains(&value) {
        Ok(value)
    } else {
        Err(PlannerError::bad(
            field,
            format!("must be within {lo}..={hi} (got {})", railyard_units::units::format_number(value)),
        ))
    }
}
