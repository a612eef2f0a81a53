//! Rendezvous (like `ncclUniqueId`): rank 0 listens at an address known to all, with a
//! random 128-bit secret; every other rank connects, proves the secret and says where it
//! listens; rank 0 answers with everyone's address; then every pair connects (the higher
//! rank dials) as many sockets as asked ("lanes"), each connection again proving the
//! secret and naming its lane. A connection without the secret is closed and ignored.
//! Every wait has a deadline.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::str::FromStr;
use std::time::{Duration, Instant};

use crate::error::CommError;

const HELLO_MAGIC: u32 = 0x5259_4248; // "RYBH"
/// A refusal, in a hello's place: its rank field says why (`Refusal`).
const REFUSE_MAGIC: u32 = 0x5259_424e; // "RYBN"
/// Connections that have not yet said who they are, held at most (a flood of idle
/// connections costs no more than this many sockets).
const MAX_PENDING: usize = 256;
/// Ranks a rendezvous accepts at most (a bound on what a peer can make us allocate).
pub const MAX_RANKS: usize = 4096;

/// Where rank 0 listens and the shared secret: `HOST:PORT#SECRET` in text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UniqueId {
    pub addr: SocketAddr,
    pub secret: u128,
}

/// An address on this machine's loopback for rank 0 of a local job to listen at: a port
/// found free, below the kernel's ephemeral range. The port is free when checked and rank
/// 0 binds it a moment later; the other ranks' listeners (bound to port 0) and every
/// outgoing connection draw ports from the ephemeral range, and one of them once took the
/// port in between (rank 0 failed with "Address already in use"). Ports below the range
/// are only handed out on request.
pub fn loopback_rendezvous_addr() -> std::io::Result<SocketAddr> {
    free_port_on([127, 0, 0, 1].into())
}

/// Where rank 0 of a job whose ranks may span hosts listens, for a rendezvous published
/// through a store the ranks share (torch's): on `listen_ip` when given, else on the
/// address that routes towards `towards` (the host the store lives on, which the other
/// ranks reach), else on loopback; at a port found free as `loopback_rendezvous_addr`'s.
/// `listen_ip` comes from `config.socket_ifname`, as the other ranks' listeners' does.
pub fn rendezvous_addr(config: &crate::config::Config, towards: Option<&str>) -> Result<SocketAddr, CommError> {
    let listen_ip = match &config.socket_ifname {
        Some(spec) => Some(crate::interface::select(spec, &crate::interface::interfaces())?),
        None => None,
    };
    let ip = match (listen_ip, towards) {
        (Some(ip), _) => ip,
        (None, Some(host)) => {
            let to = (host, 1u16)
                .to_socket_addrs()
                .map_err(|e| boot_err(format!("{host}: {e}")))?
                .next()
                .ok_or_else(|| boot_err(format!("{host} resolves to nothing")))?;
            let ip = local_ip_towards(to);
            if ip.is_unspecified() {
                return Err(boot_err(format!(
                    "no local address routes towards {host}: name the interface the ranks reach each other on (RAILYARD_SOCKET_IFNAME)"
                )));
            }
            ip
        }
        (None, None) => [127, 0, 0, 1].into(),
    };
    free_port_on(ip).map_err(|e| boot_err(format!("no free port on {ip}: {e}")))
}

/// A port on `ip` found free, below the kernel's ephemeral range where it can be.
fn free_port_on(ip: std::net::IpAddr) -> std::io::Result<SocketAddr> {
    const TRIES: u64 = 64;
    let low = ephemeral_ports_from().unwrap_or(32768);
    let from = low.saturating_sub(12_768).max(1024);
    if low > from {
        // Where to start looking: differs between jobs started together.
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let seed = (u64::from(std::process::id()) << 32) ^ u64::from(nanos);
        for i in 0..TRIES {
            let port = from + seed.wrapping_add(i.wrapping_mul(7919)) % (low - from);
            if let Ok(l) = std::net::TcpListener::bind((ip, port as u16)) {
                return l.local_addr();
            }
        }
    }
    std::net::TcpListener::bind((ip, 0))?.local_addr()
}

/// The first port of the kernel's ephemeral range (Linux).
fn ephemeral_ports_from() -> Option<u64> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    range.split_whitespace().next()?.parse().ok()
}

impl UniqueId {
    /// A fresh secret for `addr`.
    pub fn new(addr: SocketAddr) -> Result<UniqueId, CommError> {
        let mut bytes = [0u8; 16];
        getrandom::getrandom(&mut bytes)
            .map_err(|e| CommError::Bootstrap { message: format!("no randomness for the secret: {e}") })?;
        Ok(UniqueId { addr, secret: u128::from_le_bytes(bytes) })
    }
}

impl UniqueId {
    /// The job's tag: names its shared-memory files (`shm.rs`), so only this job's ranks
    /// find them and its launcher can sweep them.
    pub fn tag(&self) -> u64 {
        crate::link::fnv(&[self.secret as u64, (self.secret >> 64) as u64, self.addr.port() as u64])
    }

    /// Remove whatever shared-memory files this job's ranks left (ranks killed during
    /// setup); the files removed. Launchers call it when the job has ended.
    pub fn remove_shm_files(&self) -> usize {
        crate::shm::remove_job_files(std::path::Path::new("/dev/shm"), self.tag())
    }
}

impl std::fmt::Display for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}#{:032x}", self.addr, self.secret)
    }
}

impl FromStr for UniqueId {
    type Err = CommError;
    fn from_str(text: &str) -> Result<Self, CommError> {
        let bad = || CommError::Bootstrap { message: format!("\"{text}\" is not HOST:PORT#SECRET") };
        let (addr, secret) = text.split_once('#').ok_or_else(bad)?;
        Ok(UniqueId {
            addr: addr.parse().map_err(|_| bad())?,
            secret: u128::from_str_radix(secret, 16).map_err(|_| bad())?,
        })
    }
}

fn boot_err(message: impl Into<String>) -> CommError {
    CommError::Bootstrap { message: message.into() }
}

/// hello = magic u32 | rank u32 | size u32 | secret u128 | port u16 | ip (16 bytes, v6-mapped) | lane u32
const HELLO_BYTES: usize = 4 + 4 + 4 + 16 + 2 + 16 + 4;

fn encode_hello(secret: u128, rank: usize, size: usize, listen: SocketAddr, lane: usize) -> [u8; HELLO_BYTES] {
    let mut b = [0u8; HELLO_BYTES];
    b[0..4].copy_from_slice(&HELLO_MAGIC.to_le_bytes());
    b[4..8].copy_from_slice(&(rank as u32).to_le_bytes());
    b[8..12].copy_from_slice(&(size as u32).to_le_bytes());
    b[12..28].copy_from_slice(&secret.to_le_bytes());
    b[28..30].copy_from_slice(&listen.port().to_le_bytes());
    let ip = match listen.ip() {
        std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        std::net::IpAddr::V6(v6) => v6,
    };
    b[30..46].copy_from_slice(&ip.octets());
    b[46..50].copy_from_slice(&(lane as u32).to_le_bytes());
    b
}

/// What a hello says: secret, rank, size, listening address, lane.
type Hello = (u128, usize, usize, SocketAddr, usize);

fn decode_hello(b: &[u8; HELLO_BYTES]) -> Option<Hello> {
    if u32::from_le_bytes(b[0..4].try_into().ok()?) != HELLO_MAGIC {
        return None;
    }
    let rank = u32::from_le_bytes(b[4..8].try_into().ok()?) as usize;
    let size = u32::from_le_bytes(b[8..12].try_into().ok()?) as usize;
    let secret = u128::from_le_bytes(b[12..28].try_into().ok()?);
    let port = u16::from_le_bytes(b[28..30].try_into().ok()?);
    let octets: [u8; 16] = b[30..46].try_into().ok()?;
    let v6 = std::net::Ipv6Addr::from(octets);
    let ip = v6.to_ipv4_mapped().map(std::net::IpAddr::V4).unwrap_or(std::net::IpAddr::V6(v6));
    let lane = u32::from_le_bytes(b[46..50].try_into().ok()?) as usize;
    Some((secret, rank, size, SocketAddr::new(ip, port), lane))
}

fn connect_until(addr: SocketAddr, deadline: Instant) -> Result<TcpStream, CommError> {
    loop {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(500)) {
            Ok(s) => return Ok(s),
            Err(e) => {
                if Instant::now() >= deadline {
                    return Err(boot_err(format!("cannot reach {addr}: {e}")));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Why rank 0 (or a peer) turned a connection away, told to it in a hello's place so the
/// joiner's error says what is wrong instead of "failed to fill whole buffer".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// Its secret is not this job's (a RAILYARD_ID of another job, or mistyped).
    Secret = 1,
    /// It counts another number of ranks.
    Size = 2,
    /// Its rank or lane is out of range, or already joined.
    Rank = 3,
}

impl Refusal {
    fn words(code: usize, size: usize) -> String {
        match code {
            1 => "the secret does not match (its RAILYARD_ID is not this job's: another job's, or mistyped)".into(),
            2 => format!("rank 0's job does not have {size} ranks (RAILYARD_WORLD_SIZE differs between ranks)"),
            3 => "its rank is out of range or already taken (two ranks with one RAILYARD_RANK?)".into(),
            c => format!("refused (code {c})"),
        }
    }
}

fn encode_refusal(why: Refusal) -> [u8; HELLO_BYTES] {
    let mut b = [0u8; HELLO_BYTES];
    b[0..4].copy_from_slice(&REFUSE_MAGIC.to_le_bytes());
    b[4..8].copy_from_slice(&(why as u32).to_le_bytes());
    b
}

/// A connection accepted but not yet heard from, and what it has sent of its hello.
struct Pending {
    stream: TcpStream,
    hello: [u8; HELLO_BYTES],
    got: usize,
}

/// The next connection to `listener` that says a valid hello with our secret: (its
/// stream, in blocking mode, rank, listening address, lane). Connections are read side
/// by side without blocking, so one that connects and says nothing (or slowly) delays no
/// other; one with another secret, size or rank is told why and closed; garbage is closed.
fn next_hello(
    listener: &TcpListener,
    pending: &mut Vec<Pending>,
    secret: u128,
    size: usize,
    lanes: usize,
    deadline: Instant,
) -> Result<(TcpStream, usize, SocketAddr, usize), CommError> {
    listener.set_nonblocking(true).map_err(|e| boot_err(e.to_string()))?;
    loop {
        let mut moved = false;
        loop {
            match listener.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(true).map_err(|e| boot_err(e.to_string()))?;
                    if pending.len() == MAX_PENDING {
                        // The oldest has had the longest to speak.
                        pending.remove(0);
                    }
                    pending.push(Pending { stream, hello: [0; HELLO_BYTES], got: 0 });
                    moved = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(boot_err(format!("accept: {e}"))),
            }
        }
        let mut i = 0;
        while i < pending.len() {
            let p = &mut pending[i];
            match p.stream.read(&mut p.hello[p.got..]) {
                Ok(0) => {
                    pending.swap_remove(i);
                    continue;
                }
                Ok(n) => {
                    p.got += n;
                    moved = true;
                }
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted) => {}
                Err(_) => {
                    pending.swap_remove(i);
                    continue;
                }
            }
            if pending[i].got < HELLO_BYTES {
                i += 1;
                continue;
            }
            let mut p = pending.swap_remove(i);
            let Some((got_secret, rank, got_size, addr, lane)) = decode_hello(&p.hello) else { continue };
            let refusal = if got_secret != secret {
                Some(Refusal::Secret)
            } else if got_size != size {
                Some(Refusal::Size)
            } else if rank >= size || lane >= lanes {
                Some(Refusal::Rank)
            } else {
                None
            };
            if let Some(why) = refusal {
                // Best effort: the joiner reads why instead of a closed connection.
                let _ = p.stream.set_nonblocking(false);
                let _ = p.stream.set_write_timeout(Some(Duration::from_millis(100)));
                let _ = p.stream.write_all(&encode_refusal(why));
                continue;
            }
            p.stream.set_nonblocking(false).map_err(|e| boot_err(e.to_string()))?;
            return Ok((p.stream, rank, addr, lane));
        }
        if Instant::now() >= deadline {
            return Err(boot_err("timed out waiting for the other ranks to connect"));
        }
        if !moved {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Connected links to every other rank: `links[peer]` holds `lanes` sockets (lane order),
/// empty for this rank. Ranks other than 0 listen on `listen_ip` when given, else on the
/// interface that routes towards rank 0. Every rank must pass the same `lanes`.
pub fn rendezvous(
    id: &UniqueId,
    rank: usize,
    size: usize,
    lanes: usize,
    listen_ip: Option<std::net::IpAddr>,
    timeout: Duration,
) -> Result<Vec<Vec<TcpStream>>, CommError> {
    if size == 0 || size > MAX_RANKS || rank >= size {
        return Err(boot_err(format!("rank {rank} of {size}: ranks must be 0..size and size 1..={MAX_RANKS}")));
    }
    if lanes == 0 || lanes > crate::config::MAX_SOCKETS_PER_PEER {
        return Err(boot_err(format!("{lanes} sockets per peer: must be 1..={}", crate::config::MAX_SOCKETS_PER_PEER)));
    }
    let deadline = Instant::now() + timeout;
    let mut slots: Vec<Vec<Option<TcpStream>>> = (0..size).map(|_| (0..lanes).map(|_| None).collect()).collect();
    if size == 1 {
        return Ok(vec![Vec::new()]);
    }
    // Rank 0 listens at the id's address; the others on an ephemeral port of the chosen interface.
    let bind = if rank == 0 { id.addr } else { SocketAddr::new(listen_ip.unwrap_or(local_ip_towards(id.addr)), 0) };
    let listener = TcpListener::bind(bind).map_err(|e| boot_err(format!("cannot listen on {bind}: {e}")))?;
    let listen = listener.local_addr().map_err(|e| boot_err(e.to_string()))?;
    let mut table: Vec<SocketAddr> = vec![id.addr; size];
    let mut pending = Vec::new();
    if rank == 0 {
        let mut joined = 0;
        while joined < size - 1 {
            // A connection that does not know the secret is turned away, and we keep waiting.
            let (mut s, peer, addr, _) = next_hello(&listener, &mut pending, id.secret, size, 1, deadline)?;
            if peer != 0 && slots[peer][0].is_none() {
                table[peer] = addr;
                slots[peer][0] = Some(s);
                joined += 1;
            } else {
                let _ = s.write_all(&encode_refusal(Refusal::Rank));
            }
        }
        table[0] = listen;
        let mut reply = Vec::with_capacity(size * HELLO_BYTES);
        for (r, &addr) in table.iter().enumerate() {
            reply.extend_from_slice(&encode_hello(id.secret, r, size, addr, 0));
        }
        for (peer, link) in slots.iter_mut().enumerate().skip(1) {
            let s = link[0].as_mut().ok_or_else(|| boot_err("lost a joined rank"))?;
            s.write_all(&reply).map_err(|e| CommError::io(peer, "bootstrap send", e))?;
        }
    } else {
        let mut s = connect_until(id.addr, deadline)?;
        s.write_all(&encode_hello(id.secret, rank, size, listen, 0))
            .map_err(|e| CommError::io(0, "bootstrap send", e))?;
        s.set_read_timeout(Some(deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1)))).ok();
        for (r, slot) in table.iter_mut().enumerate() {
            let mut b = [0u8; HELLO_BYTES];
            s.read_exact(&mut b).map_err(|e| match e.kind() {
                std::io::ErrorKind::UnexpectedEof => boot_err(format!(
                    "rank 0 at {} closed the connection without an answer (not a railyard rank 0, or it ended)",
                    id.addr
                )),
                _ => CommError::io(0, "bootstrap receive", e),
            })?;
            if r == 0 && u32::from_le_bytes([b[0], b[1], b[2], b[3]]) == REFUSE_MAGIC {
                let code = u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as usize;
                return Err(boot_err(format!(
                    "rank 0 at {} refused rank {rank}: {}",
                    id.addr,
                    Refusal::words(code, size)
                )));
            }
            let (secret, got, _, addr, _) =
                decode_hello(&b).ok_or_else(|| boot_err("rank 0 sent a garbled address table"))?;
            if secret != id.secret || got != r {
                return Err(boot_err("rank 0's address table does not match"));
            }
            *slot = addr;
        }
        slots[0][0] = Some(s);
    }
    // Every pair's remaining lanes: the higher rank dials, the lower accepts. (Lane 0 to
    // rank 0 is the bootstrap connection itself.)
    for (peer, &addr) in table.iter().enumerate().take(rank) {
        for (lane, slot) in slots[peer].iter_mut().enumerate().skip(usize::from(peer == 0)) {
            let mut s = connect_until(addr, deadline)?;
            s.write_all(&encode_hello(id.secret, rank, size, listen, lane))
                .map_err(|e| CommError::io(peer, "bootstrap send", e))?;
            *slot = Some(s);
        }
    }
    let mut expected = (size - 1 - rank) * lanes - if rank == 0 { size - 1 } else { 0 };
    while expected > 0 {
        let (s, peer, _, lane) = next_hello(&listener, &mut pending, id.secret, size, lanes, deadline)?;
        if peer > rank && slots[peer][lane].is_none() {
            slots[peer][lane] = Some(s);
            expected -= 1;
        }
    }
    let mut links = Vec::with_capacity(size);
    for (peer, lanes) in slots.into_iter().enumerate() {
        let lanes: Option<Vec<TcpStream>> = lanes.into_iter().collect();
        let lanes = match lanes {
            Some(l) => l,
            None if peer == rank => Vec::new(),
            None => return Err(boot_err(format!("no connection to rank {peer}"))),
        };
        for s in &lanes {
            s.set_nodelay(true).map_err(|e| boot_err(e.to_string()))?;
            s.set_read_timeout(None).ok();
        }
        links.push(lanes);
    }
    Ok(links)
}

/// The local address that routes towards `to` (loopback stays loopback).
fn local_ip_towards(to: SocketAddr) -> std::net::IpAddr {
    if to.ip().is_loopback() {
        return to.ip();
    }
    std::net::UdpSocket::bind(SocketAddr::new(
        if to.is_ipv4() { [0, 0, 0, 0].into() } else { std::net::Ipv6Addr::UNSPECIFIED.into() },
        0,
    ))
    .and_then(|u| u.connect(to).and_then(|_| u.local_addr()))
    .map(|a| a.ip())
    .unwrap_or(if to.is_ipv4() { [0, 0, 0, 0].into() } else { std::net::Ipv6Addr::UNSPECIFIED.into() })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rank 0's port lies below the kernel's ephemeral range (which the other ranks'
    /// listeners and every outgoing connection draw from) and is free to bind.
    #[test]
    fn rank0_gets_a_free_port_outside_the_ephemeral_range() {
        let low = ephemeral_ports_from().unwrap_or(32768);
        let addr = loopback_rendezvous_addr().unwrap();
        assert!(addr.ip().is_loopback());
        assert!((1024..low).contains(&u64::from(addr.port())), "port {} not below {low}", addr.port());
        // Listeners on port 0 take ports of the ephemeral range, never this one.
        let others: Vec<_> = (0..32).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
        assert!(others.iter().all(|l| u64::from(l.local_addr().unwrap().port()) >= low));
        assert!(std::net::TcpListener::bind(addr).is_ok(), "{addr} is free");
    }
}
