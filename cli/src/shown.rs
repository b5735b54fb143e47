//! How the command names things in what it prints: [`StoreName`], a store's URL with its
//! password hidden.

use std::fmt;

use stepjournal_backends::StoreUrl;

/// A store's URL as every message and output line names it: with any password hidden
/// (`postgres://user:***@host/db`). The only way to make one is [`StoreName::of`], so no
/// message can carry the URL as it was typed.
#[derive(Clone, PartialEq, Eq)]
pub struct StoreName(String);

impl StoreName {
    /// The name of the store `url` names.
    pub fn of(url: &str) -> Self {
        StoreName(StoreUrl::redacted(url))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for StoreName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

impl fmt::Debug for StoreName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}
