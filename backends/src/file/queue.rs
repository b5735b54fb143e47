//! The requests appenders queue for the group commit, and the slot each waits on: its own state
//! and its own thread to unpark, so waking one caller wakes no one else.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::Thread;

use std::io;

use crate::StoreError;

/// Why a request's group failed.
#[derive(Debug)]
pub(crate) enum GroupError {
    /// Nothing of the group reached the segment (or the store was poisoned before it).
    Store(StoreError),
    /// The group's write or sync failed after its bytes may have reached the segment.
    Unknown { context: String, source: io::Error },
}

/// What a request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestKind {
    /// Append `count` events from `first`.
    Events { first: u64, count: u32 },
    /// Delete the session.
    Delete,
}

/// One caller's batch, waiting for a group.
#[derive(Debug)]
pub(crate) struct Request {
    pub session: String,
    pub kind: RequestKind,
    /// The encoded frame.
    pub frame: Vec<u8>,
    /// Whether the caller asked for `fdatasync` before its acknowledgement.
    pub sync: bool,
    pub slot: Arc<Slot>,
}

impl Request {
    pub(crate) fn new(session: &str, kind: RequestKind, frame: Vec<u8>, sync: bool) -> Request {
        Request { session: session.to_owned(), kind, frame, sync, slot: Arc::new(Slot::default()) }
    }
}

/// Why a waiting caller woke.
#[derive(Debug)]
pub(crate) enum Wake {
    /// It leads the next group.
    Lead,
    /// Its group is done.
    Done(Result<(), GroupError>),
}

const WAITING: u8 = 0;
const LEAD: u8 = 1;
const DONE: u8 = 2;

/// Where one caller waits: its own state, and its own thread to unpark, so waking it wakes no one
/// else.
#[derive(Debug)]
pub(crate) struct Slot {
    /// WAITING, LEAD (lead the next group) or DONE (`result` is set).
    state: AtomicU8,
    result: Mutex<Option<Result<(), GroupError>>>,
    /// The caller's thread.
    thread: Thread,
}

impl Default for Slot {
    fn default() -> Self {
        Slot {
            state: AtomicU8::new(WAITING),
            result: Mutex::new(None),
            thread: std::thread::current(),
        }
    }
}

impl Slot {
    /// Blocks until the slot is told to lead or is done. Called only by the slot's own thread.
    pub(crate) fn wait(&self) -> Wake {
        loop {
            match self.state.load(Ordering::Acquire) {
                DONE => {
                    let result = self.result.lock().unwrap_or_else(PoisonError::into_inner).take();
                    return Wake::Done(result.unwrap_or(Ok(())));
                }
                LEAD => {
                    if self
                        .state
                        .compare_exchange(LEAD, WAITING, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                    {
                        return Wake::Lead;
                    }
                }
                // Parking may wake spuriously: the loop looks again.
                _ => std::thread::park(),
            }
        }
    }

    pub(crate) fn lead(&self) {
        self.state.store(LEAD, Ordering::Release);
        self.thread.unpark();
    }

    pub(crate) fn finish(&self, result: Result<(), GroupError>) {
        *self.result.lock().unwrap_or_else(PoisonError::into_inner) = Some(result);
        self.state.store(DONE, Ordering::Release);
        self.thread.unpark();
    }
}
