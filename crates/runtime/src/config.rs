//! Everything a communicator can be told, read once (from the environment by
//! `Config::from_env`, like NCCL's variables but into one struct, not all over).

use std::time::Duration;

use railyard_model::ChunkPolicy;
use railyard_schedule::Algorithm;

use crate::error::CommError;

/// RAILYARD_SOCKETS_PER_PEER at most (a bound on the descriptors a job opens).
pub const MAX_SOCKETS_PER_PEER: usize = 16;
/// RAILYARD_TRACE_BUFFER at most (a bound on what a communicator holds).
pub const MAX_TRACE_CALLS: usize = 1 << 16;
/// The most pipelined chunks a call is cut into (RAILYARD_PIPELINE_CHUNKS, RAILYARD_CHUNK_BYTES):
/// the schedules' own limit, so the runtime takes what `plan` and `sim` take.
pub use railyard_schedule::limits::MAX_PIPELINE_CHUNKS;

/// 1/true/on or 0/false/off.
fn switch(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "on" => Some(true),
        "0" | "false" | "off" => Some(false),
        _ => None,
    }
}

/// Everything configurable, read once (from the environment by `Config::from_env`).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Every wait for a peer gives up after this.
    pub timeout: Duration,
    /// Force an algorithm (RAILYARD_ALGO), else the default per collective.
    pub algorithm: Option<Algorithm>,
    /// Parallel rings (RAILYARD_NCHANNELS).
    pub channels: usize,
    /// Pipelined chunks for chain, trees and the hierarchical all-reduce
    /// (RAILYARD_PIPELINE_CHUNKS); unset: as many as the model finds fastest.
    pub pipeline_chunks: Option<usize>,
    /// RAILYARD_DEBUG=INFO: log the links and every call's algorithm to standard error.
    pub debug: bool,
    /// Use shared memory between ranks on one host (RAILYARD_SHM=0 turns it off).
    pub shm: bool,
    /// Bytes of each shared-memory ring, a power of two (RAILYARD_SHM_BYTES).
    pub shm_ring_bytes: usize,
    /// A topology file the tuner costs algorithms on (RAILYARD_TOPO), else the job's hosts.
    pub topology_file: Option<String>,
    /// Bytes per pipelined chunk of chain and tree algorithms (RAILYARD_CHUNK_BYTES);
    /// overrides the pipeline chunk count when set.
    pub chunk_bytes: Option<u64>,
    /// Pin each rank to a core when its host's ranks fit the cores (RAILYARD_PIN=1).
    pub pin: bool,
    /// TCP connections to each peer on another host, used together (RAILYARD_SOCKETS_PER_PEER).
    pub sockets_per_peer: usize,
    /// Which interface to listen on (RAILYARD_SOCKET_IFNAME, NCCL_SOCKET_IFNAME's syntax:
    /// prefixes, `^` to exclude, `=` for exact names).
    pub socket_ifname: Option<String>,
    /// Single-copy large messages between processes of one host (RAILYARD_CMA=0 turns it off).
    pub cma: bool,
    /// A rank that only receives, call after call, falls back behind a producer it keeps
    /// catching up (`slip.rs`; RAILYARD_SLIP=0 turns it off).
    pub slip: bool,
    /// Calls the flight recorder keeps (RAILYARD_TRACE_BUFFER, 0 turns it off).
    pub trace_buffer: usize,
    /// Where the flight recorder writes on the first error, on SIGUSR1 and on request
    /// (RAILYARD_DUMP_DIR); unset: nothing is written.
    pub dump_dir: Option<std::path::PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            timeout: Duration::from_secs(30),
            algorithm: None,
            channels: 1,
            pipeline_chunks: None,
            debug: false,
            shm: true,
            shm_ring_bytes: 4 << 20,
            topology_file: None,
            chunk_bytes: None,
            pin: false,
            sockets_per_peer: 1,
            socket_ifname: None,
            cma: true,
            slip: true,
            trace_buffer: 64,
            dump_dir: None,
        }
    }
}

impl Config {
    /// The chunk policy for a call of `bytes`: RAILYARD_CHUNK_BYTES's size, else
    /// RAILYARD_PIPELINE_CHUNKS's count, else the model's choice.
    pub fn chunk_policy(&self, bytes: u64) -> ChunkPolicy {
        match (self.chunk_bytes, self.pipeline_chunks) {
            (Some(chunk), _) => ChunkPolicy::Fixed(bytes.div_ceil(chunk).clamp(1, MAX_PIPELINE_CHUNKS as u64) as usize),
            (None, Some(n)) => ChunkPolicy::Fixed(n),
            (None, None) => ChunkPolicy::Search,
        }
    }

    /// Every RAILYARD_* variable above, from the process environment.
    pub fn from_env() -> Result<Config, CommError> {
        Config::from_vars(&std::env::vars().collect())
    }

    /// The same from a set of variables (so it can be tested without touching the process's).
    pub fn from_vars(vars: &std::collections::HashMap<String, String>) -> Result<Config, CommError> {
        let mut c = Config::default();
        let var = |k: &str| vars.get(k).cloned().filter(|v| !v.is_empty());
        let bad = |k: &str, v: &str| CommError::BadArgs { message: format!("{k}={v} is not valid") };
        if let Some(v) = var("RAILYARD_TIMEOUT_SECS") {
            let secs: f64 = v.parse().map_err(|_| bad("RAILYARD_TIMEOUT_SECS", &v))?;
            if !(secs > 0.0 && secs < 1e6) {
                return Err(bad("RAILYARD_TIMEOUT_SECS", &v));
            }
            c.timeout = Duration::from_secs_f64(secs);
        }
        if let Some(v) = var("RAILYARD_ALGO") {
            c.algorithm =
                Some(v.parse().map_err(|e: String| CommError::BadArgs { message: format!("RAILYARD_ALGO: {e}") })?);
        }
        if let Some(v) = var("RAILYARD_NCHANNELS") {
            c.channels =
                v.parse().ok().filter(|&n| (1..=64).contains(&n)).ok_or_else(|| bad("RAILYARD_NCHANNELS", &v))?;
        }
        if let Some(v) = var("RAILYARD_PIPELINE_CHUNKS") {
            c.pipeline_chunks = Some(
                v.parse()
                    .ok()
                    .filter(|&n| (1..=MAX_PIPELINE_CHUNKS).contains(&n))
                    .ok_or_else(|| bad("RAILYARD_PIPELINE_CHUNKS", &v))?,
            );
        }
        if let Some(v) = var("RAILYARD_CHUNK_BYTES") {
            c.chunk_bytes = Some(
                v.parse()
                    .ok()
                    .filter(|&n: &u64| n >= 64)
                    .ok_or_else(|| bad("RAILYARD_CHUNK_BYTES (at least 64)", &v))?,
            );
        }
        if let Some(v) = var("RAILYARD_SHM") {
            c.shm = switch(&v).ok_or_else(|| bad("RAILYARD_SHM (1 or 0)", &v))?;
        }
        if let Some(v) = var("RAILYARD_CMA") {
            c.cma = switch(&v).ok_or_else(|| bad("RAILYARD_CMA (1 or 0)", &v))?;
        }
        if let Some(v) = var("RAILYARD_SLIP") {
            c.slip = switch(&v).ok_or_else(|| bad("RAILYARD_SLIP (1 or 0)", &v))?;
        }
        if let Some(v) = var("RAILYARD_SOCKETS_PER_PEER") {
            c.sockets_per_peer = v
                .parse()
                .ok()
                .filter(|n| (1..=MAX_SOCKETS_PER_PEER).contains(n))
                .ok_or_else(|| bad("RAILYARD_SOCKETS_PER_PEER (1..=16)", &v))?;
        }
        c.socket_ifname = var("RAILYARD_SOCKET_IFNAME");
        if let Some(v) = var("RAILYARD_SHM_BYTES") {
            c.shm_ring_bytes = v
                .parse()
                .ok()
                .filter(|&n: &usize| {
                    n.is_power_of_two() && (crate::shm::MIN_RING_BYTES..=crate::shm::MAX_RING_BYTES).contains(&n)
                })
                .ok_or_else(|| bad("RAILYARD_SHM_BYTES (a power of two, 4096..=1073741824)", &v))?;
        }
        if let Some(v) = var("RAILYARD_PIN") {
            c.pin = switch(&v).ok_or_else(|| bad("RAILYARD_PIN (1 or 0)", &v))?;
        }
        c.topology_file = var("RAILYARD_TOPO");
        if let Some(v) = var("RAILYARD_TRACE_BUFFER") {
            c.trace_buffer = v
                .parse()
                .ok()
                .filter(|&n: &usize| n <= MAX_TRACE_CALLS)
                .ok_or_else(|| bad("RAILYARD_TRACE_BUFFER (0..=65536 calls)", &v))?;
        }
        c.dump_dir = var("RAILYARD_DUMP_DIR").filter(|d| !d.is_empty()).map(std::path::PathBuf::from);
        c.debug =
            var("RAILYARD_DEBUG").is_some_and(|v| v.eq_ignore_ascii_case("INFO") || v.eq_ignore_ascii_case("TRACE"));
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_from_variables() {
        let vars = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let c = Config::from_vars(&vars(&[
            ("RAILYARD_TIMEOUT_SECS", "2.5"),
            ("RAILYARD_ALGO", "rhd"),
            ("RAILYARD_NCHANNELS", "4"),
            ("RAILYARD_PIPELINE_CHUNKS", "8"),
            ("RAILYARD_CHUNK_BYTES", "65536"),
            ("RAILYARD_SHM", "0"),
            ("RAILYARD_SHM_BYTES", "1048576"),
            ("RAILYARD_TOPO", "cluster.toml"),
            ("RAILYARD_DEBUG", "INFO"),
            ("RAILYARD_PIN", "on"),
            ("RAILYARD_CMA", "off"),
            ("RAILYARD_SLIP", "0"),
            ("RAILYARD_SOCKETS_PER_PEER", "4"),
            ("RAILYARD_SOCKET_IFNAME", "^docker,lo"),
            ("RAILYARD_TRACE_BUFFER", "5"),
            ("RAILYARD_DUMP_DIR", "/tmp/dumps"),
        ]))
        .unwrap();
        assert_eq!((c.trace_buffer, c.dump_dir.as_deref()), (5, Some(std::path::Path::new("/tmp/dumps"))));
        assert!(c.pin && !c.cma && !c.slip);
        assert!(Config::default().slip);
        assert_eq!((c.sockets_per_peer, c.socket_ifname.as_deref()), (4, Some("^docker,lo")));
        assert_eq!(c.timeout, Duration::from_millis(2500));
        assert_eq!(
            (c.algorithm, c.channels, c.pipeline_chunks, c.chunk_bytes),
            (Some(Algorithm::Rhd), 4, Some(8), Some(65536))
        );
        assert_eq!(
            (c.shm, c.shm_ring_bytes, c.topology_file.as_deref(), c.debug),
            (false, 1 << 20, Some("cluster.toml"), true)
        );
        assert_eq!(Config::from_vars(&vars(&[])).unwrap(), Config::default());
        for (k, v) in [
            ("RAILYARD_TIMEOUT_SECS", "-1"),
            ("RAILYARD_ALGO", "fast"),
            ("RAILYARD_NCHANNELS", "0"),
            ("RAILYARD_SHM_BYTES", "1000"),
            ("RAILYARD_CHUNK_BYTES", "x"),
            ("RAILYARD_PIN", "yes please"),
            ("RAILYARD_SHM", "maybe"),
            ("RAILYARD_SLIP", "2"),
            ("RAILYARD_SOCKETS_PER_PEER", "17"),
            ("RAILYARD_SOCKETS_PER_PEER", "0"),
            ("RAILYARD_TRACE_BUFFER", "1000000"),
        ] {
            assert!(Config::from_vars(&vars(&[(k, v)])).is_err(), "{k}={v}");
        }
    }
}
