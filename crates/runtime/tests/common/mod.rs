//! Helpers shared by the runtime's integration tests.

use std::net::SocketAddr;

use railyard_runtime::{CommError, Communicator, Config, UniqueId};

pub fn free_addr() -> SocketAddr {
    railyard_runtime::loopback_rendezvous_addr().unwrap()
}

/// Run `f` on `p` ranks (threads), each with its own communicator.
pub fn with_ranks<R: Send + 'static>(
    p: usize,
    config: Config,
    f: impl Fn(Result<Communicator, CommError>) -> R + Send + Sync + Clone + 'static,
) -> Vec<R> {
    let id = UniqueId::new(free_addr()).unwrap();
    let handles: Vec<_> = (0..p)
        .map(|r| {
            let (id, config, f) = (id.clone(), config.clone(), f.clone());
            std::thread::spawn(move || f(Communicator::init(&id, r, p, config)))
        })
        .collect();
    handles.into_iter().map(|h| h.join().expect("rank thread")).collect()
}
