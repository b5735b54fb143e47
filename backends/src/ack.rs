//! What an append promises ([`Durability`]) and what one that landed reports ([`AppendAck`]).

use stepjournal_codec::Seq;

/// What an `Ok` from [`JournalStore::append`](crate::JournalStore::append) promises about the
/// appended events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Durability {
    /// Gone with the process (the memory backend).
    Volatile,
    /// Survives a crash of the process, not a loss of power or of the machine.
    Buffered,
    /// On stable storage: survives a loss of power.
    Synced,
}

impl Durability {
    /// The level's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Volatile => "volatile",
            Durability::Buffered => "buffered",
            Durability::Synced => "synced",
        }
    }
}

/// What an append that landed reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendAck {
    /// The sequence number of the batch's first event (the `expected` the caller gave).
    pub first: Seq,
    /// The session's next sequence number after the batch: the new tail.
    pub next: Seq,
    /// What the store promises for the batch.
    pub durability: Durability,
}
