//! Pinning a rank to one core (RAILYARD_PIN=1). With no more ranks on a host than cores,
//! a rank that spins while it waits keeps its own core and caches, as Open MPI binds
//! ranks to cores when they fit; with more ranks than cores it is left to the scheduler.

/// The cores this process may run on, in order.
fn allowed_cores() -> Vec<usize> {
    // SAFETY: `set` is a plain bit set that sched_getaffinity fills; CPU_ISSET reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect()
    }
}

/// Pins the calling thread (and the threads it starts later) to the `local_rank`-th
/// allowed core when the host's `local_ranks` fit the allowed cores; returns that core.
pub fn pin(local_rank: usize, local_ranks: usize) -> Option<usize> {
    let cores = allowed_cores();
    if local_ranks > cores.len() {
        return None;
    }
    let core = *cores.get(local_rank)?;
    // SAFETY: as above; the set names one allowed core.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        (libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0).then_some(core)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_only_when_the_ranks_fit_the_cores() {
        let cores = allowed_cores();
        assert!(!cores.is_empty());
        assert_eq!(pin(0, cores.len() + 1), None);
        // In a thread of its own, so the test runner's threads keep their cores.
        let got = std::thread::spawn(move || (pin(cores.len() - 1, cores.len()), allowed_cores())).join().unwrap();
        let last = *allowed_cores().last().unwrap();
        assert_eq!(got, (Some(last), vec![last]));
    }
}
