use railyard_units::units::format_number;
use railyard_units::UnitError;
use thiserror::Error;

/// Everything that can be wrong with a topology, a route or a placement.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum TopologyError {
    // Not a `source`: the message already includes it, and error chains would print it twice.
    #[error("{field}: {problem}")]
    Unit { field: String, problem: UnitError },
    #[error("{field}: unknown device \"{name}\"")]
    UnknownDevice { field: String, name: String },
    #[error("{field}: unknown interface \"{name}\"")]
    UnknownInterface { field: String, name: String },
    #[error("{field}: device \"{name}\" is declared twice")]
    DuplicateDevice { field: String, name: String },
    #[error("{field}: interface \"{name}\" is declared twice")]
    DuplicateInterface { field: String, name: String },
    #[error("{field}: a link from \"{name}\" to itself")]
    SelfLink { field: String, name: String },
    #[error("{field}: bandwidth must be 1 byte/s to 10 PB/s (1 to 1e16 bytes per second; got {})", format_number(*value))]
    BadBandwidth { field: String, value: f64 },
    #[error("{field}: name \"{name}\" {problem}")]
    BadName { field: String, name: String, problem: &'static str },
    #[error("{field}: latency must be 0 to 1 s (got {} s)", format_number(*value))]
    BadLatency { field: String, value: f64 },
    #[error("achievable.{field}: {message}")]
    BadAchievable { field: String, message: String },
    #[error("{field}: rank {rank} is placed on \"{name}\", which is a {kind}, not a GPU")]
    RankNotOnGpu { field: String, rank: usize, name: String, kind: String },
    #[error("{field}: rank {rank} and rank {other} are both placed on \"{name}\"")]
    RankTwice { field: String, rank: usize, other: usize, name: String },
    #[error("placement asks for {wanted} ranks but the topology has {available} GPUs")]
    NotEnoughGpus { wanted: usize, available: usize },
    #[error("the topology has no GPU to place a rank on")]
    NoGpus,
    #[error("no route from \"{from}\" to \"{to}\" (GPUs do not forward traffic for others)")]
    NoRoute { from: String, to: String },
    #[error("cannot parse {format} topology file: {message}")]
    Parse { format: &'static str, message: String },
    #[error("unknown preset \"{name}\"; `railyard topo list` shows the presets")]
    UnknownPreset { name: String },
    #[error("preset \"{preset}\": {message}")]
    BadPresetParameter { preset: String, message: String },
    #[error("{field}: {} is outside {range}", format_number(*value))]
    OutOfRange { field: String, value: f64, range: &'static str },
    #[error("the topology has {count} {what}; the limit is {limit}")]
    TooLarge { what: &'static str, count: usize, limit: usize },
    #[error("no switch of this topology reduces in the network ({REDUCING_SWITCH})")]
    NoReductionSwitch,
    /// The devices are named by count and the first and last: at scale a list would be
    /// thousands of names.
    #[error("no switch of this topology that reduces in the network ({REDUCING_SWITCH}) reaches {}", devices_text(*devices, first, last))]
    NoReductionSwitchReaches { devices: usize, first: String, last: String },
    #[error("failed \"{name}\": no link between these devices")]
    NoSuchLink { name: String },
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    #[error("cannot read {path}: {message}")]
    Io { path: String, message: String },
}

/// How a topology declares a switch that reduces.
const REDUCING_SWITCH: &str =
    "a switch with in_network_reduction = true in a topology file, or sharp=on where a preset takes it";

/// The devices an in-network reduction would join, by count and the first and last.
fn devices_text(devices: usize, first: &str, last: &str) -> String {
    match devices {
        0 | 1 => format!("\"{first}\""),
        2 => format!("\"{first}\" and \"{last}\", the devices its reduction joins"),
        n => format!("all {n} devices its reduction joins (\"{first}\" … \"{last}\")"),
    }
}
