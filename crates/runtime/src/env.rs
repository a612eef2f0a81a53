//! Joining from the variables launchers already set: torchrun (MASTER_ADDR, MASTER_PORT,
//! RANK, WORLD_SIZE, LOCAL_RANK), Open MPI (OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK),
//! PMI (PMI_RANK, PMI_SIZE), Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID), or ours
//! (RAILYARD_ID = HOST:PORT#SECRET, RAILYARD_RANK, RAILYARD_WORLD_SIZE). The rendezvous
//! secret comes from RAILYARD_ID (`railyard launch` draws it at random) or RAILYARD_SECRET;
//! without either, joining is refused: a secret derived from the job id, host and port
//! (as railyard once did) can be computed by anyone who sees them, and was.

use std::collections::HashMap;
use std::net::ToSocketAddrs;

use crate::bootstrap::UniqueId;
use crate::error::CommError;

/// Rank, world size, local rank and the rendezvous id, from a set of variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub rank: usize,
    pub size: usize,
    pub local_rank: usize,
    pub id: UniqueId,
    /// Which launcher's variables were used.
    pub source: &'static str,
}

fn num(vars: &HashMap<String, String>, key: &str) -> Result<Option<usize>, CommError> {
    match vars.get(key) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| CommError::Bootstrap { message: format!("{key}={v} is not a whole number") }),
    }
}

/// Read the launch from `vars` (the process environment in `from_env`).
pub fn launch_from(vars: &HashMap<String, String>) -> Result<Option<Launch>, CommError> {
    let candidates: [(&'static str, &str, &str, &str); 5] = [
        ("railyard", "RAILYARD_RANK", "RAILYARD_WORLD_SIZE", "RAILYARD_LOCAL_RANK"),
        ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"),
        ("open-mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
        ("pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
        ("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
    ];
    let Some((source, rank, size, local)) = candidates.iter().find_map(|(s, r, n, l)| {
        let rank = num(vars, r).transpose()?;
        let size = num(vars, n).transpose()?;
        Some((*s, rank, size, num(vars, l)))
    }) else {
        return Ok(None);
    };
    let (rank, size) = (rank?, size?);
    let local_rank = local?.unwrap_or(rank);
    if rank >= size {
        return Err(CommError::Bootstrap {
            message: format!("rank {rank} is not below the world size {size} ({source})"),
        });
    }
    let id = match vars.get("RAILYARD_ID") {
        Some(text) => text.parse()?,
        None => {
            let host = vars.get("MASTER_ADDR").cloned().unwrap_or_else(|| "127.0.0.1".into());
            let port: u16 = vars
                .get("MASTER_PORT")
                .ok_or_else(|| CommError::Bootstrap {
                    message: "no RAILYARD_ID and no MASTER_PORT: where is rank 0?".into(),
                })?
                .parse()
                .map_err(|_| CommError::Bootstrap { message: "MASTER_PORT is not a port".into() })?;
            // Our own port next to the launcher's store, so both can live on one host.
            let port =
                port.checked_add(1).ok_or_else(|| CommError::Bootstrap { message: "MASTER_PORT is 65535".into() })?;
            let addr = (host.as_str(), port)
                .to_socket_addrs()
                .map_err(|e| CommError::Bootstrap { message: format!("MASTER_ADDR {host}: {e}") })?
                .next()
                .ok_or_else(|| CommError::Bootstrap { message: format!("MASTER_ADDR {host} resolves to nothing") })?;
            let secret = match vars.get("RAILYARD_SECRET") {
                Some(s) => u128::from_str_radix(s.trim(), 16)
                    .map_err(|_| CommError::Bootstrap { message: "RAILYARD_SECRET is not hex".into() })?,
                None => {
                    return Err(CommError::Bootstrap {
                        message: format!(
                            "no rendezvous secret: {source} set no RAILYARD_ID, and RAILYARD_SECRET is unset. \
                             Export a random one that every rank inherits, e.g. \
                             `export RAILYARD_SECRET=$(head -c16 /dev/urandom | xxd -p)`, or start the \
                             ranks with `railyard launch`, which draws one (a secret derived from the \
                             job id, host and port could be computed by anyone who sees them)"
                        ),
                    })
                }
            };
            UniqueId { addr, secret }
        }
    };
    Ok(Some(Launch { rank, size, local_rank, id, source }))
}

pub fn from_env() -> Result<Option<Launch>, CommError> {
    launch_from(&std::env::vars().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn launchers() {
        let torch = launch_from(&vars(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "4"),
            ("LOCAL_RANK", "1"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "29500"),
            ("RAILYARD_SECRET", "0123456789abcdef0123456789abcdef"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((torch.rank, torch.size, torch.source, torch.id.addr.port()), (1, 4, "torchrun", 29501));
        assert_eq!(torch.id.secret, 0x0123456789abcdef0123456789abcdef);
        let ompi = launch_from(&vars(&[
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("RAILYARD_ID", "127.0.0.1:5000#ff"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((ompi.rank, ompi.size, ompi.source, ompi.id.secret), (0, 2, "open-mpi", 255));
        let slurm = launch_from(&vars(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_LOCALID", "1"),
            ("MASTER_PORT", "100"),
            ("RAILYARD_SECRET", "ab"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((slurm.rank, slurm.local_rank, slurm.source), (3, 1, "slurm"));
        // No secret to share: refused, never derived from what an outsider can read
        // (torchrun's run id, the host, the port).
        let e = launch_from(&vars(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "29500"),
            ("TORCHELASTIC_RUN_ID", "job7"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(e.contains("RAILYARD_SECRET") && e.contains("railyard launch"), "{e}");
        assert!(launch_from(&vars(&[])).unwrap().is_none());
        assert!(launch_from(&vars(&[("RANK", "4"), ("WORLD_SIZE", "4"), ("MASTER_PORT", "1")])).is_err());
        assert!(launch_from(&vars(&[("RANK", "x"), ("WORLD_SIZE", "4")])).is_err());
        assert!(launch_from(&vars(&[("RANK", "0"), ("WORLD_SIZE", "4")])).is_err());
    }
}
