//! Advice to the kernel for large buffers: transparent huge pages where the system offers
//! them on request (`madvise` mode, as on the development machine). Huge pages make
//! single-copy pulls (`cma.rs`) pin one 2 MiB folio instead of 512 small pages, and copies
//! miss the TLB less. numpy asks the same for its arrays of 4 MiB and more, so the peers'
//! benchmark buffers (mpi4py) get them too; `bench/compare.py` links
//! `bench/peer_huge_pages.c` into the C peer (`mpi_coll.c`) to give its buffers what
//! `HugePageBuffer` gives perf's.
//!
//! Advice only helps the 2 MiB-aligned stretches of a buffer: a `Vec` of 4 MiB starts
//! anywhere, and its first bytes up to the first 2 MiB boundary (all that a smaller call
//! on its prefix uses) stay small pages. `HugePageBuffer` starts on a boundary.

use std::ops::{Deref, DerefMut};

use memmap2::{Advice, MmapMut};

/// A transparent huge page (x86-64, and aarch64 with 4 KiB pages).
pub const HUGE_PAGE_BYTES: usize = 2 << 20;

/// Buffers at least this long are advised (numpy's threshold).
pub const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;

/// The same for `len` bytes at `at` (initialised or not: only addresses are used).
fn advise_range(at: *mut u8, len: usize) {
    if len < HUGE_PAGE_MIN_BYTES || cfg!(miri) {
        return;
    }
    // madvise needs a page-aligned start: advise the whole pages inside the buffer.
    let page = 4096usize;
    let start = (at as usize).div_ceil(page) * page;
    let end = (at as usize + len) / page * page;
    if end > start {
        // SAFETY: [start, end) lies inside the caller's allocation; MADV_HUGEPAGE changes
        // how the kernel backs the range, never its contents.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

/// A zeroed buffer of `len` bytes, advised before its pages are first touched.
pub fn zeroed(len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = Vec::with_capacity(len);
    // Advised through the raw pointer: no reference to the uninitialised bytes is made.
    advise_range(v.as_mut_ptr(), len);
    // SAFETY: the capacity is at least `len` bytes we own; all of them are zeroed before
    // the length covers them.
    unsafe {
        std::ptr::write_bytes(v.as_mut_ptr(), 0, len);
        v.set_len(len);
    }
    v
}

/// A zeroed buffer whose every page may be a huge one: from `HUGE_PAGE_MIN_BYTES` up, an
/// anonymous mapping of its own, used from its first 2 MiB boundary and advised for huge
/// pages; smaller (or where mapping fails), a `zeroed` vector. Its pages are touched once
/// here, as `zeroed`'s are, so no call on it takes the faults.
pub struct HugePageBuffer {
    backing: Backing,
    len: usize,
}

enum Backing {
    Vec(Vec<u8>),
    /// The mapping and where the buffer starts in it (a 2 MiB boundary).
    Map(MmapMut, usize),
}

impl HugePageBuffer {
    pub fn zeroed(len: usize) -> HugePageBuffer {
        if len >= HUGE_PAGE_MIN_BYTES && !cfg!(miri) {
            let span = len.div_ceil(HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES;
            if let Ok(mut map) = MmapMut::map_anon(span + HUGE_PAGE_BYTES) {
                let at = map.as_ptr().align_offset(HUGE_PAGE_BYTES);
                // Ignored where unsupported: the buffer is then small pages, as a Vec's.
                let _ = map.advise_range(Advice::HugePage, at, span);
                map[at..at + len].fill(0);
                return HugePageBuffer { backing: Backing::Map(map, at), len };
            }
        }
        HugePageBuffer { backing: Backing::Vec(zeroed(len)), len }
    }
}

impl Deref for HugePageBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.backing {
            Backing::Vec(v) => v,
            Backing::Map(map, at) => &map[*at..*at + self.len],
        }
    }
}

impl DerefMut for HugePageBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.backing {
            Backing::Vec(v) => v,
            Backing::Map(map, at) => &mut map[*at..*at + self.len],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_page_buffers_start_on_a_boundary_and_hold_what_is_written() {
        for len in [0, 5, HUGE_PAGE_MIN_BYTES - 1, HUGE_PAGE_MIN_BYTES, HUGE_PAGE_MIN_BYTES + 4097] {
            let mut b = HugePageBuffer::zeroed(len);
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0), "{len}: zeroed");
            if len >= HUGE_PAGE_MIN_BYTES {
                assert_eq!(b.as_ptr() as usize % HUGE_PAGE_BYTES, 0, "{len}: on a 2 MiB boundary");
            }
            for (i, x) in b.iter_mut().enumerate() {
                *x = (i % 251) as u8;
            }
            assert!(b.iter().enumerate().all(|(i, &x)| x == (i % 251) as u8), "{len}");
        }
    }

    #[test]
    fn zeroed_buffers_of_any_size() {
        for len in [0, 1, 4095, HUGE_PAGE_MIN_BYTES + 3] {
            let v = zeroed(len);
            assert_eq!(v.len(), len);
            assert!(v.iter().all(|&b| b == 0));
        }
        // Advice on a buffer too small for huge pages changes nothing.
        let mut small = vec![1u8; 10];
        advise_range(small.as_mut_ptr(), small.len());
        assert_eq!(small, vec![1u8; 10]);
    }
}
