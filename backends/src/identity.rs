//! Which store a handle is ([`StoreIdentity`]), so that a process runs one journal per store.

/// Which store a handle is ([`JournalStore::identity`](crate::JournalStore::identity)). Two handles with one identity are one
/// store: a process runs one journal over it (a second would take the first one's live runs
/// for crashed ones and recover them under it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreIdentity {
    /// Where the store keeps its data: a journal's directory, a database file, a PostgreSQL
    /// database and schema (never a password).
    Location(String),
    /// This handle's own data (a store in memory): its address.
    Instance(usize),
    /// A handle standing for a process of its own ([`SeparateProcess`](crate::SeparateProcess)): never taken for
    /// another.
    OwnProcess,
}

impl std::fmt::Display for StoreIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreIdentity::Location(location) => f.write_str(location),
            StoreIdentity::Instance(address) => write!(f, "the store in memory at {address:#x}"),
            StoreIdentity::OwnProcess => f.write_str("a store handle of its own process"),
        }
    }
}
