use thiserror::Error;

/// What a network model refuses: an input outside its domain, named by its field.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum NetModelError {
    #[error("{field}: {message}")]
    BadInput { field: String, message: String },
}
