//! Advice to the kernel for large buffers: transparent huge pages where the system offers
//! them on request (`madvise` mode, as on the development machine). Huge pages make
//! single-copy pulls (`cma.rs`) pin one 2 MiB folio instead of 512 small pages, and copies
//! miss the TLB less. numpy asks the same for its arrays of 4 MiB and more, so the peers'
//! benchmark buffers (mpi4py, torch) get them too.

/// Buffers at least this long are advised (numpy's threshold).
pub const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;

/// Ask for huge pages on `buf` when it is large; harmless (ignored) where unsupported.
pub fn advise_huge_pages(buf: &mut [u8]) {
    advise_range(buf.as_mut_ptr(), buf.len());
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_buffers_of_any_size() {
        for len in [0, 1, 4095, HUGE_PAGE_MIN_BYTES + 3] {
            let v = zeroed(len);
            assert_eq!(v.len(), len);
            assert!(v.iter().all(|&b| b == 0));
        }
        let mut small = vec![1u8; 10];
        advise_huge_pages(&mut small);
        assert_eq!(small, vec![1u8; 10]);
    }
}
