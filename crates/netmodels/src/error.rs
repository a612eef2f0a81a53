use thiserror::Error;

/// What a network model refuses: an input outside its domain, named by its field.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum NetModelError {
    #[error("{field}: {message}")]
    BadInput { field: String, message: String },
}

/// Positive-value check for inputs where zero would divide or mean nothing.
pub fn positive(field: &str, value: f64) -> Result<(), NetModelError> {
    if value > 0.0 && value.is_finite() {
        Ok(())
    } else {
        Err(NetModelError::BadInput {
            field: field.to_string(),
            message: format!("must be greater than zero (got {value})"),
        })
    }
}
