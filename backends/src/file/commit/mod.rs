//! The append path: appenders' requests queued, written by one leader at a time as a group with
//! one write and one `fdatasync`, published to the index, and answered. Each module uses only
//! those listed before it:
//!
//! - `queue`: the requests appenders queue, and how each is answered (its `Completion`);
//! - `room`: the queue's bound, and the line of appenders waiting for room in it;
//! - `cohort`: when the next group waits for the appenders of the last;
//! - `segment`: creating a segment file, and the I/O failure every write path reports;
//! - `state`: what callers share (`Core`: index, pending tails and queue under one lock, the
//!   active segment under the leader's). It lives here because it holds the queue and the
//!   cohort; opening builds it, reclaiming space and the store use it;
//! - `write`: writing one group to the active segment (sealing it and starting the next when
//!   it is full);
//! - `group`: the group commit itself: who leads, publishing a group, the committer thread.
//!
//! Outside the room they use only the rooms and modules listed before `commit` in the
//! [file backend's order](super).

pub(crate) mod cohort;
pub(crate) mod group;
pub(crate) mod queue;
pub(crate) mod room;
pub(crate) mod segment;
pub(crate) mod state;
pub(crate) mod write;
