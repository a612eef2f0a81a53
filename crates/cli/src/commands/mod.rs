pub mod model;
pub mod plan;
pub mod topo;
