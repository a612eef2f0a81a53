//! A runnable example of the runtime API.
//!
//!   cargo run --release -p railyard-runtime --example all_reduce            # 4 ranks as threads
//!   railyard launch -n 2 -- target/release/examples/all_reduce             # 2 ranks as processes
//!
//! Each rank contributes its rank number; after the all-reduce every rank holds the sum.

use railyard_runtime::{from_env, Communicator, Config, RedOp, UniqueId};

fn rank_main(mut comm: Communicator) -> Result<(), railyard_runtime::CommError> {
    let mut grads = vec![comm.rank() as f32; 1 << 16];
    comm.all_reduce_in_place(&mut grads, RedOp::Sum)?;
    let want = (0..comm.size()).sum::<usize>() as f32;
    assert!(grads.iter().all(|&g| g == want));
    // Small calls measure the latency the transport adds.
    let t = std::time::Instant::now();
    let mut x = [1.0f32; 2];
    for _ in 0..200 {
        comm.all_reduce_in_place(&mut x, RedOp::Max)?;
    }
    let us = t.elapsed().as_secs_f64() / 200.0 * 1e6;
    println!("rank {} of {}: sum {want} everywhere; 8 B all-reduce {us:.1} us", comm.rank(), comm.size());
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = Config::from_env()?;
    if let Some(launch) = from_env()? {
        return Ok(rank_main(Communicator::init(&launch.id, launch.rank, launch.size, config)?)?);
    }
    let addr = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let id = UniqueId::new(addr)?;
    let ranks: Vec<_> = (0..4)
        .map(|r| {
            let (id, config) = (id.clone(), config.clone());
            std::thread::spawn(move || Communicator::init(&id, r, 4, config).and_then(rank_main))
        })
        .collect();
    for r in ranks {
        r.join().map_err(|_| "a rank panicked")??;
    }
    Ok(())
}
