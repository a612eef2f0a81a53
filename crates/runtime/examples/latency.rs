//! Small-message all-reduce latency with two ranks as threads over loopback TCP.
use railyard_runtime::{Communicator, Config, RedOp, UniqueId};
fn main() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let id = UniqueId::new(addr).unwrap();
    let hs: Vec<_> = (0..2)
        .map(|r| {
            let id = id.clone();
            std::thread::spawn(move || {
                let mut c = Communicator::init(&id, r, 2, Config::default()).unwrap();
                let send = [1.0f32; 2];
                let mut recv = [0.0f32; 2];
                for _ in 0..10 {
                    c.all_reduce(&send, &mut recv, RedOp::Sum).unwrap();
                }
                let t = std::time::Instant::now();
                for _ in 0..200 {
                    c.all_reduce(&send, &mut recv, RedOp::Sum).unwrap();
                }
                t.elapsed().as_secs_f64() / 200.0 * 1e6
            })
        })
        .collect();
    for h in hs {
        println!("{:.1} us per 8 B all-reduce", h.join().unwrap());
    }
}
