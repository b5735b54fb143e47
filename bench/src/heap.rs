//! Live heap bytes, counted by the bench's global allocator (the system allocator, wrapped)
//! while a [`Window`] is open: what a held value keeps allocated, exactly, where the resident
//! memory cannot tell it (the allocator hands out memory freed before without the process
//! growing, and counts in pages). While no window is open each allocation costs one relaxed
//! load more.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// The system allocator, counting the bytes allocated less those freed while [`ON`].
#[derive(Debug)]
pub struct Counting;

/// Whether allocations are counted now.
static ON: AtomicBool = AtomicBool::new(false);
/// Bytes allocated less bytes freed while counting (negative when more was freed).
static LIVE: AtomicI64 = AtomicI64::new(0);

fn count(delta: i64) {
    if ON.load(Ordering::Relaxed) {
        LIVE.fetch_add(delta, Ordering::Relaxed);
    }
}

fn size(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[expect(unsafe_code, reason = "a global allocator is an unsafe trait; each call is System's")]
// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the count
// is a side effect that never touches the memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc`, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(size(layout.size()));
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(size(layout.size()));
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { System.dealloc(ptr, layout) };
        count(-size(layout.size()));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract for `realloc`, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(size(new_size) - size(layout.size()));
        }
        p
    }
}

/// Counting on, from its start until dropped. One at a time: windows do not nest.
#[derive(Debug)]
pub struct Window {
    start: i64,
}

impl Window {
    /// Starts counting.
    pub fn open() -> Window {
        ON.store(true, Ordering::SeqCst);
        Window { start: LIVE.load(Ordering::SeqCst) }
    }

    /// Bytes allocated less bytes freed, by every thread, since the window opened.
    pub fn bytes(&self) -> i64 {
        LIVE.load(Ordering::SeqCst) - self.start
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        ON.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_allocation_is_counted() {
        let window = Window::open();
        let held = vec![0u8; 8 << 20];
        let bytes = window.bytes();
        drop(window);
        // Other test threads allocate and free too, but not 8 MiB of what this one holds.
        assert!(bytes >= 4 << 20, "{bytes}");
        assert_eq!(held.len(), 8 << 20);
    }
}
