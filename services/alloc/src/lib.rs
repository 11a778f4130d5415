//! agentd's global allocator: mimalloc, called the way the standard library calls the C
//! allocator.
//!
//! The `mimalloc` crate's `GlobalAlloc` sends every allocation to `mi_malloc_aligned`, whatever
//! its alignment. mimalloc v3 serves that call from its plain path only while the size class's
//! page has a free block at hand, or when the block size is a power of two; otherwise it
//! over-allocates from a larger size class and marks the page as holding interior pointers
//! (which slows each later free on it). Rust asks for alignments of 1 to 16 almost always, and
//! those mimalloc's plain `mi_malloc` already guarantees: every block of 16 bytes or more is
//! 16-aligned, a smaller one 8-aligned (`MI_MAX_ALIGN_SIZE`; mimalloc asserts it in
//! `_mi_page_malloc_zero`). So, as `std::alloc::System` does with `malloc`, a layout whose
//! alignment is at most 16 and at most its size takes `mi_malloc`/`mi_zalloc`/`mi_realloc`; any
//! other takes the aligned entry points. Frees are `mi_free` either way.
//! (purpleprotocol/mimalloc_rust#170 proposes the same change upstream.)

use core::alloc::{GlobalAlloc, Layout};
use core::ffi::c_void;
use libmimalloc_sys as ffi;

/// The alignment every mimalloc block of at least this many bytes has (`MI_MAX_ALIGN_SIZE`).
const PLAIN_ALIGN: usize = 16;

/// mimalloc as the global allocator: `#[global_allocator] static A: Mimalloc = Mimalloc;`.
pub struct Mimalloc;

/// Whether `mi_malloc(size)` is aligned enough for `layout` (`std::alloc::System`'s rule).
fn plain(align: usize, size: usize) -> bool {
    align <= PLAIN_ALIGN && align <= size
}

// SAFETY: every method forwards to mimalloc, whose blocks stay valid until `mi_free`; a
// plain call is made only for layouts `plain` admits, whose alignment mimalloc's plain blocks
// meet (module docs); the rest go to the aligned entry points, which take the alignment.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        if plain(align, size) {
            // SAFETY: `mi_malloc` accepts any size.
            unsafe { ffi::mi_malloc(size).cast() }
        } else {
            // SAFETY: `align` is a power of two (a `Layout`'s is).
            unsafe { ffi::mi_malloc_aligned(size, align).cast() }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        if plain(align, size) {
            // SAFETY: as in `alloc`.
            unsafe { ffi::mi_zalloc(size).cast() }
        } else {
            // SAFETY: as in `alloc`.
            unsafe { ffi::mi_zalloc_aligned(size, align).cast() }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: the caller hands back a block this allocator gave (`GlobalAlloc`'s contract);
        // `mi_free` frees plain and aligned blocks alike.
        unsafe { ffi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let align = layout.align();
        if plain(align, new_size) {
            // SAFETY: `ptr` is a live block of this allocator (`GlobalAlloc`'s contract); the
            // moved block is plain and `plain` admits the new size.
            unsafe { ffi::mi_realloc(ptr.cast::<c_void>(), new_size).cast() }
        } else {
            // SAFETY: as above, with the alignment kept.
            unsafe { ffi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, align).cast() }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every size up to 4 KB at every alignment up to 4 KB, plain or not, comes back aligned,
    /// writable, zeroed when asked, and keeps its bytes through a `realloc`.
    #[test]
    fn blocks_are_aligned_zeroed_and_kept_through_realloc() {
        let a = Mimalloc;
        let mut held = Vec::new();
        for align in (0..=12).map(|s| 1usize << s) {
            for size in (1..=4096).step_by(7) {
                let Ok(layout) = Layout::from_size_align(size, align) else {
                    continue;
                };
                // SAFETY: `layout` has a non-zero size.
                let p = unsafe { a.alloc_zeroed(layout) };
                assert!(!p.is_null());
                assert_eq!(p as usize % align, 0, "size {size} align {align}");
                // SAFETY: `p` holds `size` bytes.
                let bytes = unsafe { core::slice::from_raw_parts_mut(p, size) };
                assert!(bytes.iter().all(|b| *b == 0));
                bytes.fill(0xa5);
                let grown = size * 2 + 3;
                // SAFETY: `p` came from `a` with `layout`; `grown` is non-zero.
                let q = unsafe { a.realloc(p, layout, grown) };
                assert_eq!(q as usize % align, 0, "realloc size {grown} align {align}");
                // SAFETY: the first `size` bytes of `q` are the block's old bytes.
                let kept = unsafe { core::slice::from_raw_parts(q, size) };
                assert!(kept.iter().all(|b| *b == 0xa5));
                // Some blocks stay allocated a while, so that pages fill and empty.
                held.push((q, Layout::from_size_align(grown, align).unwrap_or(layout)));
                if held.len() > 64 {
                    let (p, l) = held.remove(0);
                    // SAFETY: `p` came from `a` with layout `l`.
                    unsafe { a.dealloc(p, l) };
                }
            }
        }
        for (p, l) in held {
            // SAFETY: as above.
            unsafe { a.dealloc(p, l) };
        }
    }
}
