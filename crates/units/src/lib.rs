//! What every railyard crate prints and reads: sizes, bandwidths and times in the seeds'
//! units (`units`), quantities with units in input files (`quantity`), aligned Markdown
//! tables (`table`) and SVG charts (`chart`). No dependency on the rest of railyard.

#![forbid(unsafe_code)]

pub mod chart;
pub mod quantity;
pub mod stats;
pub mod table;
pub mod units;

pub use table::Table;
pub use units::UnitError;
