//! Choosing the network interface to listen on (RAILYARD_SOCKET_IFNAME), with
//! NCCL_SOCKET_IFNAME's syntax (seed 000 §8.3): a comma-separated list of name prefixes
//! (`eth,ib`), `^` before the list to exclude instead (`^docker,lo`), `=` before it for
//! exact names (`=eth0`).

use std::net::IpAddr;

use crate::error::CommError;

/// Whether interface `name` is selected by `spec`.
pub fn matches(spec: &str, name: &str) -> bool {
    let (exclude, rest) = match spec.strip_prefix('^') {
        Some(r) => (true, r),
        None => (false, spec),
    };
    let (exact, list) = match rest.strip_prefix('=') {
        Some(r) => (true, r),
        None => (false, rest),
    };
    let hit = list.split(',').map(str::trim).filter(|p| !p.is_empty()).any(|p| {
        if exact {
            name == p
        } else {
            name.starts_with(p)
        }
    });
    hit != exclude
}

/// This host's interfaces with an address: (name, address), in the kernel's order.
pub fn interfaces() -> Vec<(String, IpAddr)> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut at = head;
    while !at.is_null() {
        // SAFETY: `at` is a node of the list getifaddrs returned, alive until freeifaddrs.
        let ifa = unsafe { &*at };
        at = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }.to_string_lossy().into_owned();
        // SAFETY: ifa_addr points to a sockaddr whose family says which struct it is.
        let family = unsafe { (*ifa.ifa_addr).sa_family } as i32;
        let ip = match family {
            libc::AF_INET => {
                // SAFETY: family AF_INET means a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                IpAddr::from(u32::from_be(sin.sin_addr.s_addr).to_be_bytes())
            }
            libc::AF_INET6 => {
                // SAFETY: family AF_INET6 means a sockaddr_in6.
                let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                IpAddr::from(sin6.sin6_addr.s6_addr)
            }
            _ => continue,
        };
        out.push((name, ip));
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// The address to listen on for `spec`: the first selected interface's IPv4 address,
/// else its IPv6 one (link-local IPv6 addresses need a scope, so they are skipped).
pub fn select(spec: &str, available: &[(String, IpAddr)]) -> Result<IpAddr, CommError> {
    let chosen: Vec<&(String, IpAddr)> = available
        .iter()
        .filter(|(name, ip)| {
            matches(spec, name) && !matches!(ip, IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80)
        })
        .collect();
    chosen.iter().find(|(_, ip)| ip.is_ipv4()).or_else(|| chosen.first()).map(|(_, ip)| *ip).ok_or_else(|| {
        let names: Vec<&str> = available.iter().map(|(n, _)| n.as_str()).collect();
        CommError::Bootstrap {
            message: format!("RAILYARD_SOCKET_IFNAME={spec} matches no interface with an address (have {names:?})"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_ifname_syntax() {
        assert!(matches("eth", "eth0") && matches("eth,ib", "ib1") && !matches("eth", "lo"));
        assert!(matches("^docker,lo", "eth0") && !matches("^docker,lo", "docker0") && !matches("^lo", "lo"));
        assert!(matches("=eth0", "eth0") && !matches("=eth0", "eth01") && !matches("^=eth0", "eth0"));
        assert!(matches("^=eth0", "eth01"));
    }

    #[test]
    fn selects_ipv4_of_the_first_match_and_names_what_exists() {
        let have = vec![
            ("lo".to_string(), IpAddr::from([127, 0, 0, 1])),
            ("veth-a".to_string(), "fe80::1".parse().unwrap()),
            ("veth-a".to_string(), "fd00::2".parse().unwrap()),
            ("veth-a".to_string(), IpAddr::from([10, 0, 0, 1])),
        ];
        assert_eq!(select("veth", &have).unwrap(), IpAddr::from([10, 0, 0, 1]));
        assert_eq!(select("^veth", &have).unwrap(), IpAddr::from([127, 0, 0, 1]));
        assert_eq!(select("veth", &have[..3]).unwrap(), "fd00::2".parse::<IpAddr>().unwrap());
        let e = select("ib", &have).unwrap_err().to_string();
        assert!(e.contains("matches no interface") && e.contains("veth-a"), "{e}");
        // This machine has a loopback interface.
        assert_eq!(select("lo", &interfaces()).unwrap(), IpAddr::from([127, 0, 0, 1]));
    }
}
