//! Space: what the store's reclaim thread does off the append path. `sidecar` writes (and
//! opening reads) the sidecar index of each sealed segment; `reclaim` is the thread itself,
//! removing segments that hold nothing needed and compacting those dead enough, and writing the
//! sidecars. `reclaim` uses `sidecar`, not the other way round.
//!
//! Outside the room they use the rooms and modules listed before `space` in the
//! [file backend's order](super): the format, the index (the sidecar feeds its builder) and the
//! append path (a compaction writes its copies as a group).

pub(crate) mod reclaim;
pub(crate) mod sidecar;
