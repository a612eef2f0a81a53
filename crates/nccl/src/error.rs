use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum NcclError {
    /// A line of an input that cannot be read, with its number (1-based).
    #[error("line {line}: {message}")]
    Line { line: usize, message: String },
    #[error("{field}: {message}")]
    BadInput { field: String, message: String },
}
