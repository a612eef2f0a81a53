//! railyard's topology: devices, directed links, shared interfaces, routes and rank
//! placement of a GPU cluster, with the seeds' clusters built in.
//!
//! Data flow of the workspace: `topology -> schedule -> {model, sim, runtime} -> cli`.

#![forbid(unsafe_code)]

pub mod achievable;
pub mod derated;
pub mod error;
pub mod failure;
pub mod file;
pub mod graph;
pub mod hardware;
pub mod import;
pub mod kinds;
pub mod placement;
pub mod presets;
pub mod route;

pub use achievable::{Achievable, Hop, Protocol};
pub use error::TopologyError;
pub use graph::{
    Device, DeviceId, DeviceKind, HostCosts, Interface, InterfaceId, InterfaceUse, Link, LinkClass, LinkId, Resource,
    Routing, Topology, TopologyBuilder,
};
pub use hardware::Hardware;
pub use placement::{Placement, PlacementPolicy};
pub use route::{Route, RouteTable, RouteView};

/// Load a topology from a preset spec (`hgx-h100x2`, `rail:servers=4`) or, when the
/// text names an existing file, from that file.
pub fn load(spec: &str) -> Result<Topology, TopologyError> {
    let path = std::path::Path::new(spec);
    let io = |message: &str| Err(TopologyError::Io { path: spec.to_string(), message: message.to_string() });
    if path.is_file() {
        file::load(path)
    } else if path.is_dir() {
        io("is a directory, not a topology file")
    } else if path.exists() {
        // /dev/zero, /dev/null, a pipe: something that is there but is not a file.
        io("is not a regular file (a device or a pipe?); give a topology file or a preset")
    } else if spec.ends_with(".toml") || spec.ends_with(".json") {
        Err(TopologyError::Io { path: spec.to_string(), message: "no such file".into() })
    } else {
        presets::preset(spec)
    }
}
