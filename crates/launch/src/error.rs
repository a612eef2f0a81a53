use thiserror::Error;

/// Why a job could not be run (a job that ran and failed is an `Outcome`, not an error).
#[derive(Debug, Error)]
pub enum LaunchError {
    #[error("ranks: {np}: from 1 to {max}")]
    Ranks { np: usize, max: usize },
    #[error("cannot start {program} as rank {rank}")]
    Start { program: String, rank: usize, source: std::io::Error },
    #[error("waiting for a rank: {0}")]
    Wait(std::io::Error),
    #[error("no rendezvous address on loopback: {0}")]
    Address(std::io::Error),
    #[error(transparent)]
    Rendezvous(#[from] railyard_runtime::CommError),
}
