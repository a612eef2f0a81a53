//! Naming the rank a stalled call really waits on. The peer a round waits for may itself
//! be waiting on a third rank: blaming it would blame a live rank. Shared-memory peers
//! publish, once a wait goes on, whom they wait for (`shm::WaitStatus`), and their process
//! state is in /proc; so the chain of waits is followed until a rank that is not waiting
//! (it never reached the call), is stopped (SIGSTOP, a debugger), is gone, or closes a
//! cycle (a deadlock). A peer on another host can only be named as the one waited on.

use crate::lane_io::LaneIo;
use crate::progress::Link;
use crate::shm::{process_state, ShmReader};

fn reader(link: &Link) -> Option<&ShmReader> {
    link.lanes.iter().find_map(|l| match &l.io {
        LaneIo::Shm { rx, .. } => Some(rx),
        LaneIo::Tcp { .. } => None,
    })
}

/// Starting from `first`, the peer this rank (`me`) waits on: the rank that does not
/// move and why, with the chain of waits that leads to it.
pub fn find_stuck(links: &[Option<Link>], me: usize, first: usize) -> (usize, String) {
    let mut chain = vec![me];
    let mut steps = Vec::new();
    let mut cur = first;
    // Each step visits a new rank, so at most one per rank.
    for _ in 0..=links.len() {
        let Some(link) = links.get(cur).and_then(|l| l.as_ref()) else {
            return (cur, format!("rank {cur} is not a peer of this communicator"));
        };
        let Some(rx) = reader(link) else {
            let why = format!("rank {cur} (on another host, over TCP) sends nothing");
            return (cur, with_chain(why, &steps));
        };
        let pid = rx.peer_pid();
        let why = match process_state(pid) {
            None | Some('Z' | 'X') => Some(format!("rank {cur}'s process (pid {pid}) is gone")),
            Some('T' | 't') => {
                Some(format!("rank {cur}'s process (pid {pid}) is stopped (state T: SIGSTOP, or a debugger)"))
            }
            Some(_) => None,
        };
        if let Some(why) = why {
            return (cur, with_chain(why, &steps));
        }
        match rx.peer_status() {
            None => {
                let why = format!(
                    "rank {cur} (pid {pid}) waits in no call: it has not reached this one (busy outside railyard, or in another call order)"
                );
                return (cur, with_chain(why, &steps));
            }
            Some(ws) => {
                steps.push(format!(
                    "rank {cur} waits in its call #{} at round {} for rank {}",
                    ws.call,
                    ws.round + 1,
                    ws.on
                ));
                chain.push(cur);
                if chain.contains(&ws.on) {
                    let cycle: Vec<String> = chain.iter().chain([&ws.on]).map(|r| r.to_string()).collect();
                    let why = format!(
                        "ranks wait on each other in a cycle ({}): a deadlock, as when ranks make calls in different orders",
                        cycle.join(" -> ")
                    );
                    return (cur, with_chain(why, &steps));
                }
                cur = ws.on;
            }
        }
    }
    (cur, with_chain("the chain of waits does not end".to_string(), &steps))
}

fn with_chain(why: String, steps: &[String]) -> String {
    if steps.is_empty() {
        why
    } else {
        format!("{why} ({})", steps.join("; "))
    }
}
