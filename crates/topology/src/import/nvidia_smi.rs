//! `nvidia-smi topo -m` (docs/sources.md#nvidia-smi): a matrix of GPUs and NICs whose cells name
//! the connection: X (self), NV# (# bonded NVLinks), PIX (one PCIe bridge), PXB
//! (several bridges), PHB (a host bridge), NODE (host bridges in one NUMA node), SYS
//! (across sockets; SOC in old drivers).
//!
//! The topology built from it: NV# pairs get a direct link of # NVLinks — unless every
//! GPU pair shows the same NV#, which is an NVSwitch system (DGX A100: NV12 everywhere),
//! modelled as one NVSwitch with # NVLinks per GPU. Devices joined by PIX or PXB share a
//! PCIe switch tree (their traffic does not cross the host bridge); devices joined by
//! PCIe without crossing sockets (PIX/PXB/PHB/NODE) hang off one CPU; CPUs are joined by
//! the inter-socket link. With `servers > 1` the
//! machine is repeated and every NIC is wired to one fabric switch.

use std::collections::BTreeMap;

use super::LinkDefaults;
use crate::error::TopologyError;
use crate::graph::{DeviceId, DeviceKind, Topology, TopologyBuilder};
use crate::presets::server_name;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Conn {
    Own,
    Nv(u32),
    Pix,
    Pxb,
    Phb,
    Node,
    Sys,
}

fn parse_cell(cell: &str) -> Option<Conn> {
    Some(match cell {
        "X" => Conn::Own,
        "PIX" => Conn::Pix,
        "PXB" => Conn::Pxb,
        "PHB" => Conn::Phb,
        "NODE" => Conn::Node,
        "SYS" | "SOC" => Conn::Sys,
        _ => {
            let n: u32 = cell.strip_prefix("NV")?.parse().ok()?;
            if n == 0 || n > 64 {
                return None;
            }
            Conn::Nv(n)
        }
    })
}

fn is_device_column(token: &str) -> bool {
    let digits = |rest: &str| !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit());
    token.strip_prefix("GPU").is_some_and(digits)
        || token.strip_prefix("NIC").is_some_and(digits)
        || token.starts_with("mlx")
}

/// The parsed matrix: device names (GPUs first as in the file) and connections.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub devices: Vec<String>,
    conn: Vec<Vec<Conn>>,
}

fn err(line: usize, message: impl Into<String>) -> TopologyError {
    TopologyError::Parse { format: "nvidia-smi topo -m", message: format!("line {line}: {}", message.into()) }
}

pub fn parse_matrix(text: &str) -> Result<Matrix, TopologyError> {
    if text.len() > 1 << 20 {
        return Err(err(0, "more than 1 MiB of text; not an nvidia-smi matrix"));
    }
    let lines: Vec<&str> = text.lines().collect();
    let (header_line, header) = lines
        .iter()
        .enumerate()
        .find_map(|(i, l)| {
            let tokens: Vec<&str> = l.split_whitespace().collect();
            (tokens.first().is_some_and(|t| t.starts_with("GPU") && is_device_column(t))).then_some((i, tokens))
        })
        .ok_or_else(|| err(1, "no header line starting with GPU0 (run `nvidia-smi topo -m` and paste its output)"))?;
    let devices: Vec<String> = header.iter().take_while(|t| is_device_column(t)).map(|t| t.to_string()).collect();
    let n = devices.len();
    if n > 512 {
        return Err(err(header_line + 1, "more than 512 devices"));
    }
    let mut rows: BTreeMap<usize, Vec<Conn>> = BTreeMap::new();
    for (i, line) in lines.iter().enumerate().skip(header_line + 1) {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let Some(first) = tokens.first() else {
            if rows.len() == n {
                break;
            }
            continue;
        };
        if first.starts_with("Legend") || first.starts_with("NIC Legend") {
            break;
        }
        let Some(row) = devices.iter().position(|d| d == first) else {
            if rows.is_empty() {
                continue;
            }
            break;
        };
        if tokens.len() < n + 1 {
            return Err(err(i + 1, format!("row {first} has {} cells, the header has {n} devices", tokens.len() - 1)));
        }
        let cells = tokens[1..=n]
            .iter()
            .enumerate()
            .map(|(j, c)| {
                parse_cell(c).ok_or_else(|| {
                    err(
                        i + 1,
                        format!(
                            "column {}: unknown connection \"{c}\" (expected X, NV#, PIX, PXB, PHB, NODE, SYS)",
                            devices[j]
                        ),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if cells[row] != Conn::Own {
            return Err(err(i + 1, format!("row {first} should have X on its own column")));
        }
        if rows.insert(row, cells).is_some() {
            return Err(err(i + 1, format!("row {first} appears twice")));
        }
    }
    if rows.len() != n {
        let missing: Vec<&str> = (0..n).filter(|r| !rows.contains_key(r)).map(|r| devices[r].as_str()).collect();
        return Err(err(header_line + 1, format!("rows missing for {}", missing.join(", "))));
    }
    let conn: Vec<Vec<Conn>> = rows.into_values().collect();
    for a in 0..n {
        for b in 0..n {
            if conn[a][b] != conn[b][a] {
                return Err(err(
                    header_line + 1,
                    format!(
                        "{} to {} is {:?} but {} to {} is {:?}",
                        devices[a], devices[b], conn[a][b], devices[b], devices[a], conn[b][a]
                    ),
                ));
            }
        }
    }
    if !devices.iter().any(|d| d.starts_with("GPU")) {
        return Err(err(header_line + 1, "no GPU"));
    }
    Ok(Matrix { devices, conn })
}

fn find(parent: &mut [usize], x: usize) -> usize {
    let mut r = x;
    while parent[r] != r {
        r = parent[r];
    }
    parent[x] = r;
    r
}

fn groups(n: usize, joined: impl Fn(usize, usize) -> bool) -> Vec<usize> {
    let mut parent: Vec<usize> = (0..n).collect();
    for a in 0..n {
        for b in a + 1..n {
            if joined(a, b) {
                let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
                parent[ra] = rb;
            }
        }
    }
    (0..n).map(|x| find(&mut parent, x)).collect()
}

/// Build a topology from a matrix, `servers` copies of the machine.
pub fn build(m: &Matrix, name: &str, servers: usize, d: &LinkDefaults) -> Result<Topology, TopologyError> {
    if servers == 0 || servers > 64 {
        return Err(TopologyError::Invalid {
            field: "servers".into(),
            message: format!("{servers}: copies of the machine in {name} must be 1..=64"),
        });
    }
    let n = m.devices.len();
    let gpus: Vec<usize> = (0..n).filter(|&i| m.devices[i].starts_with("GPU")).collect();
    let pcie = |c: Conn| matches!(c, Conn::Pix | Conn::Pxb | Conn::Phb | Conn::Node);
    let socket = groups(n, |a, b| pcie(m.conn[a][b]));
    let switch = groups(n, |a, b| matches!(m.conn[a][b], Conn::Pix | Conn::Pxb));
    // NVSwitch: every GPU pair with the same NV#.
    let nv_all: Option<u32> = {
        let first = gpus.get(1).and_then(|&g| match m.conn[gpus[0]][g] {
            Conn::Nv(k) => Some(k),
            _ => None,
        });
        first.filter(|&k| {
            gpus.len() >= 3 && gpus.iter().all(|&a| gpus.iter().all(|&b| a == b || m.conn[a][b] == Conn::Nv(k)))
        })
    };
    let mut b = TopologyBuilder::new(name);
    b.description(format!(
        "imported from nvidia-smi topo -m: {} GPUs, {} NICs per server, {servers} server(s)",
        gpus.len(),
        n - gpus.len()
    ));
    b.round_startup_secs(d.round_startup_secs);
    let fabric = (servers > 1).then(|| {
        let f = b.device("fabric", DeviceKind::Switch, None);
        b.device_mut(f).tier = Some(1);
        f
    });
    for s in 0..servers {
        let server = if servers == 1 { "node".to_string() } else { server_name(s, servers) };
        let prefix = if servers == 1 { String::new() } else { format!("{server}.") };
        let ids: Vec<DeviceId> = (0..n)
            .map(|i| {
                let kind = if m.devices[i].starts_with("GPU") { DeviceKind::Gpu } else { DeviceKind::Nic };
                b.device(format!("{prefix}{}", m.devices[i]), kind, Some(&server))
            })
            .collect();
        let mut cpus: BTreeMap<usize, DeviceId> = BTreeMap::new();
        for &root in &socket {
            if !cpus.contains_key(&root) {
                let id = b.device(format!("{prefix}cpu{}", cpus.len()), DeviceKind::Cpu, Some(&server));
                cpus.insert(root, id);
            }
        }
        let cpu_list: Vec<DeviceId> = cpus.values().copied().collect();
        for (i, &a) in cpu_list.iter().enumerate() {
            for &c in &cpu_list[i + 1..] {
                b.duplex(a, c, d.inter_socket_bytes_per_sec, 0.0, &[]);
            }
        }
        let mut switches: BTreeMap<usize, DeviceId> = BTreeMap::new();
        for i in 0..n {
            let members = (0..n).filter(|&j| switch[j] == switch[i]).count();
            let up = if members > 1 {
                let root = switch[i];
                let next = switches.len();
                *switches.entry(root).or_insert_with(|| {
                    let sw = b.device(format!("{prefix}pcie{next}"), DeviceKind::PcieSwitch, Some(&server));
                    b.duplex(sw, cpus[&socket[i]], d.pcie_bytes_per_sec, 0.0, &[]);
                    sw
                })
            } else {
                cpus[&socket[i]]
            };
            b.duplex(ids[i], up, d.pcie_bytes_per_sec, 0.0, &[]);
            if let (Some(f), DeviceKind::Nic) = (fabric, b.kind_of(ids[i])) {
                b.duplex(ids[i], f, d.nic_bytes_per_sec, 0.0, &[]);
            }
        }
        match nv_all {
            Some(k) => {
                let nvs = b.device(format!("{prefix}nvswitch"), DeviceKind::NvSwitch, Some(&server));
                for &g in &gpus {
                    b.duplex(ids[g], nvs, k as f64 * d.nvlink_bytes_per_sec, 0.0, &[]);
                }
            }
            None => {
                for (x, &a) in gpus.iter().enumerate() {
                    for &c in &gpus[x + 1..] {
                        if let Conn::Nv(k) = m.conn[a][c] {
                            b.duplex(ids[a], ids[c], k as f64 * d.nvlink_bytes_per_sec, 0.0, &[]);
                        }
                    }
                }
            }
        }
    }
    b.build()
}

pub fn import(text: &str, name: &str, servers: usize, defaults: &LinkDefaults) -> Result<Topology, TopologyError> {
    build(&parse_matrix(text)?, name, servers, defaults)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BRIDGE: &str = "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\n\
GPU0\t X \tNV4\tNV4\tNV2\t0-31\t0\n\
GPU1\tNV4\t X \tNV2\tNV4\t0-31\t0\n\
GPU2\tNV4\tNV2\t X \tNV4\t0-31\t0\n\
GPU3\tNV2\tNV4\tNV4\t X \t0-31\t0\n\
\nLegend:\n\n  X    = Self\n";

    #[test]
    fn bridge_machine() {
        let t = import(BRIDGE, "bridge", 1, &LinkDefaults::default()).unwrap();
        assert_eq!(t.gpus().len(), 4);
        let (g0, g1, g3) = (t.device_id("GPU0").unwrap(), t.device_id("GPU1").unwrap(), t.device_id("GPU3").unwrap());
        assert_eq!(t.route(g0, g1).unwrap().bottleneck_bytes_per_sec, 100e9);
        assert_eq!(t.route(g0, g3).unwrap().bottleneck_bytes_per_sec, 50e9);
    }

    #[test]
    fn malformed_matrices_are_errors() {
        for bad in [
            "",
            "nothing here",
            "\tGPU0\tGPU1\nGPU0\t X \tNV4\n",
            "\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV2\t X\n",
            "\tGPU0\tGPU1\nGPU0\t X \tZZ\nGPU1\tZZ\t X\n",
            "\tGPU0\tGPU1\nGPU0\tNV4\tNV4\nGPU1\tNV4\t X\n",
            "\tGPU0\nGPU0\t X\nGPU0\t X\n",
        ] {
            assert!(parse_matrix(bad).is_err(), "{bad:?}");
        }
    }
}
