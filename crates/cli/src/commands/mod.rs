pub mod calibrate;
pub mod launch;
pub mod model;
pub mod nccl;
pub mod perf;
pub mod plan;
pub mod sim;
pub mod topo;
