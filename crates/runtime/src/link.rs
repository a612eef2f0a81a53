//! A rank's link to one peer: a pair of shared-memory rings when both run on this host
//! (with single-copy pulls for large messages where the kernel allows it), else one or
//! more TCP sockets ("lanes", RAILYARD_SOCKETS_PER_PEER). Every lane is non-blocking:
//! it only ever tries to move bytes; the progress engine (`progress.rs`) decides when to
//! wait and for how long.

use std::io::{self, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;

use crate::config::Config;
use crate::error::CommError;
use crate::lane_io::{LaneIo, Transport, TCP_READ_BUFFER_BYTES};
use crate::progress::{Lane, Link};
use crate::shm::{ShmReader, ShmWriter};

/// This host: its name, boot id and network namespace, hashed (ranks with equal ids share /dev/shm).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

pub fn fnv(parts: &[u64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// Set up the link to `peer` over its connected sockets (lane order): agree over lane 0
/// whether both run on this host and want shared memory; if so, set the rings up (the
/// lower rank creates both files, the higher opens them, then the lower removes the names;
/// the mappings stay) and probe single-copy pulls both ways, and drop the sockets. Any
/// failure falls back to TCP on both sides. `here` is this rank's whereabouts; returns
/// the peer's and the link.
pub fn establish(
    mut sockets: Vec<TcpStream>,
    me: usize,
    peer: usize,
    tag: u64,
    here: Whereabouts,
    config: &Config,
    ranks: usize,
) -> Result<(Whereabouts, Link), CommError> {
    let io = |e| CommError::io(peer, "transport setup", e);
    let first = sockets.first_mut().ok_or_else(|| CommError::BadArgs { message: format!("no socket to {peer}") })?;
    first.set_read_timeout(Some(config.timeout)).map_err(io)?;
    first.set_write_timeout(Some(config.timeout)).map_err(io)?;
    let mut hello = [0u8; 21];
    hello[..8].copy_from_slice(&here.host.to_le_bytes());
    hello[8] = u8::from(config.shm);
    hello[9..17].copy_from_slice(&here.machine.to_le_bytes());
    hello[17..].copy_from_slice(&here.cores.to_le_bytes());
    first.write_all(&hello).map_err(io)?;
    let mut theirs = [0u8; 21];
    first.read_exact(&mut theirs).map_err(io)?;
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or_default());
    let cores = u32::from_le_bytes(theirs[17..].try_into().unwrap_or_default());
    let peer_at = Whereabouts { host: word(&theirs[..8]), machine: word(&theirs[9..17]), cores };
    if theirs[..8] == hello[..8] && theirs[8] == 1 && config.shm {
        if let Some(link) = shared_memory(first, me, peer, tag, config, ranks)? {
            return Ok((peer_at, link));
        }
    }
    let mut lanes = Vec::with_capacity(sockets.len());
    for s in sockets {
        s.set_nonblocking(true).map_err(io)?;
        let rx = BufReader::with_capacity(TCP_READ_BUFFER_BYTES, s.try_clone().map_err(io)?);
        lanes.push(Lane::new(LaneIo::Tcp { rx, tx: s }));
    }
    Ok((peer_at, Link { transport: Transport::Tcp, cma: false, lanes }))
}

/// Where a rank runs: its host (shared memory reaches it), its machine (it shares that
/// machine's cores) and how many cores it may run on (its affinity: a cpuset or a
/// container's limit counts, as in `Idle::for_machine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Whereabouts {
    pub host: u64,
    pub machine: u64,
    pub cores: u32,
}

impl Whereabouts {
    /// This process's: the machine is the kernel (hostname and boot id: ranks on it share
    /// its cores even across network namespaces or containers); the host adds the network
    /// namespace (emulated clusters put "hosts" in namespaces). Read once per communicator.
    pub fn here() -> Whereabouts {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
        let netns = std::fs::read_link("/proc/self/ns/net").map(|p| p.display().to_string()).unwrap_or_default();
        let machine = format!("{}/{}", hostname(), boot.trim());
        let id = |text: &str| fnv(&text.bytes().map(u64::from).collect::<Vec<_>>());
        let cores = std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX));
        Whereabouts { host: id(&format!("{machine}/{netns}")), machine: id(&machine), cores }
    }
}

/// Removes ring names when dropped: on every way out of the setup, including errors.
struct Unlink<'a>(&'a [&'a Path]);

impl Drop for Unlink<'_> {
    fn drop(&mut self) {
        for p in self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn shared_memory(
    s: &mut TcpStream,
    me: usize,
    peer: usize,
    tag: u64,
    config: &Config,
    ranks: usize,
) -> Result<Option<Link>, CommError> {
    let io = |e| CommError::io(peer, "transport setup", e);
    let dir = Path::new("/dev/shm");
    let (lo, hi) = (me.min(peer), me.max(peer));
    let (lo_hi, hi_lo) = crate::shm::pair_paths(dir, tag, lo, hi);
    let (to_peer, from_peer) = if me == lo { (&lo_hi, &hi_lo) } else { (&hi_lo, &lo_hi) };
    let cap = crate::shm::ring_bytes_for(config.shm_ring_bytes, ranks);
    let open = || -> io::Result<(ShmReader, ShmWriter)> {
        Ok((crate::shm::reader(from_peer, cap)?, crate::shm::writer(to_peer, cap)?))
    };
    let mut flag = [0u8; 1];
    let names = [lo_hi.as_path(), hi_lo.as_path()];
    let rings = if me == lo {
        // Both names go when this block is left, however (the peer has opened them by then,
        // or will not).
        let _names = Unlink(&names);
        let created = crate::shm::create(&lo_hi, cap).and_then(|_| crate::shm::create(&hi_lo, cap)).is_ok();
        let mine = if created { open().ok() } else { None };
        s.write_all(&[u8::from(mine.is_some())]).map_err(io)?;
        s.read_exact(&mut flag).map_err(io)?;
        if flag[0] == 1 {
            mine
        } else {
            None
        }
    } else {
        s.read_exact(&mut flag).map_err(io)?;
        // The creator has mapped both ends before saying 1: once opened here, the names
        // can go (removed by whichever side gets there first).
        let _names = Unlink(&names);
        let mine = if flag[0] == 1 { open().ok() } else { None };
        s.write_all(&[u8::from(mine.is_some())]).map_err(io)?;
        mine
    };
    let Some((mut rx, mut tx)) = rings else { return Ok(None) };
    let settled = crate::shm::settle(&mut rx, &mut tx);
    // Both must agree on falling back, so both say whether they settled.
    s.write_all(&[u8::from(settled)]).map_err(io)?;
    s.read_exact(&mut flag).map_err(io)?;
    if !settled || flag[0] != 1 {
        return Ok(None);
    }
    let cma = probe_cma(s, peer, tag, config.cma)?;
    Ok(Some(Link { transport: Transport::Shm, cma, lanes: vec![Lane::new(LaneIo::Shm { rx, tx })] }))
}

/// Both sides show each other a probe value in their memory (pid, address); each tries
/// to pull the other's; single copy is used only if both pulls worked and both want it.
fn probe_cma(s: &mut TcpStream, peer: usize, tag: u64, wanted: bool) -> Result<bool, CommError> {
    let io = |e| CommError::io(peer, "transport setup", e);
    if wanted {
        crate::cma::allow_peers();
    }
    let probe = Box::new(tag.to_le_bytes());
    let mut mine = [0u8; 17];
    mine[0] = u8::from(wanted);
    mine[1..9].copy_from_slice(&(std::process::id() as u64).to_le_bytes());
    mine[9..17].copy_from_slice(&(probe.as_ptr() as u64).to_le_bytes());
    s.write_all(&mine).map_err(io)?;
    let mut theirs = [0u8; 17];
    s.read_exact(&mut theirs).map_err(io)?;
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or_default());
    let pulled = wanted && theirs[0] == 1 && crate::cma::probe(word(&theirs[1..9]), word(&theirs[9..17]), &probe[..]);
    s.write_all(&[u8::from(pulled)]).map_err(io)?;
    let mut their_result = [0u8; 1];
    // The probe value stays alive until the peer has answered (it pulled before that).
    s.read_exact(&mut their_result).map_err(io)?;
    drop(probe);
    Ok(pulled && their_result[0] == 1)
}
