use thiserror::Error;

/// What a network model refuses: an input outside its domain, named by its field.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum NetModelError {
    #[error("{field}: {message}")]
    BadInput { field: String, message: String },
    /// A scenario's inputs that do not read as the model's (`path`: which input).
    #[error("input {path}: {message}")]
    Input { path: String, message: String },
    /// A scenario file that is not JSON.
    #[error("{message}")]
    Scenario { message: String },
    /// A change (`key=value`) that names no input.
    #[error("{key}: {message}")]
    Set { key: String, message: String },
}

/// Positive-value check for inputs where zero would divide or mean nothing.
pub fn positive(field: &str, value: f64) -> Result<(), NetModelError> {
    if value > 0.0 && value.is_finite() {
        Ok(())
    } else {
        Err(NetModelError::BadInput {
            field: field.to_string(),
            message: format!("must be greater than zero (got {})", railyard_units::units::format_number(value)),
        })
    }
}
