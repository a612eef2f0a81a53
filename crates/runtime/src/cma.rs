//! Single-copy transfers between processes of one host (cross-memory attach, what Open
//! MPI's `vader` uses for large messages): the sender posts a descriptor (address and
//! length in its own memory) through the shared-memory ring, the receiver copies the
//! bytes straight from the sender's memory into place with `process_vm_readv`, then
//! acknowledges, so the sender knows its buffer may change again. One copy instead of
//! two (into the ring, out of the ring). From 2 MiB (from 128 KiB for a rank that only
//! receives in the call) the copy is shared: the sender, which would only wait for the
//! acknowledgement, pushes pieces with `process_vm_writev` while the receiver pulls others (`shm.rs` has the claiming protocol): a 2-rank in-place
//! broadcast of 8–32 MiB went from 12–13 to 20–26 GB/s here.
//!
//! The kernel allows it only where the receiver may ptrace the sender (same user and
//! Yama's ptrace scope, or CAP_SYS_PTRACE); every pair probes it at setup and falls back
//! to the ring when it fails.

use std::io;

/// A sender's region: where it starts in the sender's memory and how long it is.
pub const DESCRIPTOR_BYTES: usize = 16;

pub fn encode(addr: u64, len: u64) -> [u8; DESCRIPTOR_BYTES] {
    let mut b = [0u8; DESCRIPTOR_BYTES];
    b[..8].copy_from_slice(&addr.to_le_bytes());
    b[8..].copy_from_slice(&len.to_le_bytes());
    b
}

pub fn decode(b: &[u8; DESCRIPTOR_BYTES]) -> (u64, u64) {
    let (a, l) = b.split_at(8);
    (u64::from_le_bytes(a.try_into().unwrap_or_default()), u64::from_le_bytes(l.try_into().unwrap_or_default()))
}

/// Let any process of ours read this one's memory (Yama's ptrace scope 1 otherwise allows
/// only ancestors). Failure is fine: the probe then decides.
pub fn allow_peers() {
    // SAFETY: prctl with these arguments only changes this process's Yama exception.
    unsafe {
        libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0);
    }
}

/// `process_vm_readv` or `process_vm_writev`: the same arguments, either direction.
type VmCopy = unsafe extern "C" fn(
    libc::pid_t,
    *const libc::iovec,
    libc::c_ulong,
    *const libc::iovec,
    libc::c_ulong,
    libc::c_ulong,
) -> libc::ssize_t;

/// Copy `len` bytes between `local` (this process) and `remote` (process `pid`), in the
/// direction `call` copies, resuming after short copies and interruptions.
fn vm_copy(call: VmCopy, pid: u64, local: u64, remote: u64, len: usize) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad peer pid"))?;
    let mut done = 0usize;
    while done < len {
        let at = |base: u64| libc::iovec { iov_base: (base as usize + done) as *mut libc::c_void, iov_len: len - done };
        let (local, remote) = (at(local), at(remote));
        // SAFETY: the kernel checks both ranges (ours as user memory, the peer's against
        // its mappings) and fails with EFAULT rather than touching anything else.
        let n = unsafe { call(pid, &local, 1, &remote, 1, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the peer's region ended early"));
        }
        done += n as usize;
    }
    Ok(())
}

/// Copy `dst.len()` bytes from `addr` in process `pid` into `dst`.
pub fn pull(pid: u64, addr: u64, dst: &mut [u8]) -> io::Result<()> {
    vm_copy(libc::process_vm_readv, pid, dst.as_mut_ptr() as u64, addr, dst.len())
}

/// Copy `len` bytes at `src` in this process to `dst` in process `pid` (the helping
/// side of a shared transfer, `shm.rs`). The kernel reads `src` as user memory, so a bad
/// address fails with EFAULT instead of touching anything. `process_vm_writev` needs the
/// same permission as `process_vm_readv` (ptrace attach), which the setup probe checked.
pub fn push(pid: u64, src: u64, dst: u64, len: usize) -> io::Result<()> {
    vm_copy(libc::process_vm_writev, pid, src, dst, len)
}

/// Whether `pull` works from `pid`: read `expect.len()` bytes at `addr` and compare.
pub fn probe(pid: u64, addr: u64, expect: &[u8]) -> bool {
    let mut got = vec![0u8; expect.len()];
    pull(pid, addr, &mut got).is_ok() && got == expect
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pulls_from_a_process_and_refuses_bad_addresses() {
        allow_peers();
        let src: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
        let me = std::process::id() as u64;
        let mut dst = vec![0u8; src.len()];
        // Reading our own memory through the kernel is what a peer does with ours.
        if !probe(me, src.as_ptr() as u64, &src[..16]) {
            eprintln!("cross-memory attach is not permitted here; the runtime falls back to rings");
            return;
        }
        pull(me, src.as_ptr() as u64, &mut dst).unwrap();
        assert_eq!(dst, src);
        let mut pushed = vec![0u8; src.len()];
        push(me, src.as_ptr() as u64, pushed.as_mut_ptr() as u64, src.len()).unwrap();
        assert_eq!(pushed, src);
        assert!(push(me, 8, pushed.as_mut_ptr() as u64, 8).is_err());
        assert!(pull(me, 8, &mut dst[..8]).is_err());
        assert!(!probe(u64::MAX, src.as_ptr() as u64, &src[..8]));
        assert_eq!(decode(&encode(0xdead_beef, 77)), (0xdead_beef, 77));
    }
}
