//! Newtypes for every id and position, so that no bare `u64` or `String` crosses a public signature.

use std::fmt;

use serde::{Deserialize, Serialize};

/// An id that is not acceptable (empty, too long).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdError {
    /// The id was empty.
    #[error("{what} must not be empty")]
    Empty {
        /// Which kind of id.
        what: &'static str,
    },
    /// The id was longer than the format allows.
    #[error("{what} is {len} bytes long; at most {max} are allowed")]
    TooLong {
        /// Which kind of id.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The largest length allowed.
        max: usize,
    },
}

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Wraps a string as this id. Ids are opaque: any text is accepted here; where an id
            /// must meet a bound (a session id on disk), the writer checks it.
            pub fn new(id: impl Into<String>) -> Self {
                Self(id.into())
            }

            /// The id's text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id's text, owned.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self(s)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl $name {
            #[allow(dead_code, reason = "used by the ids that are bounded")]
            pub(crate) const WHAT: &'static str = $what;
        }
    };
}

string_id!(
    /// A session: one append-only log. At most [`SessionId::MAX_LEN`] bytes of UTF-8, not empty.
    SessionId,
    "session id"
);
string_id!(
    /// A tool call's id within a reply (the provider's id; unique within one reply).
    CallId,
    "call id"
);
string_id!(
    /// The dedupe key of a call, minted once and the same on every attempt and every entry.
    DispatchId,
    "dispatch id"
);
string_id!(
    /// A run: one pass of the runtime over a session, begun through an entry.
    RunId,
    "run id"
);
string_id!(
    /// A checkpoint's id: a reply's append checkpoint or a step's commit checkpoint.
    CheckpointId,
    "checkpoint id"
);
string_id!(
    /// The name of a tool in the registry.
    ToolName,
    "tool name"
);

impl SessionId {
    /// The longest session id the binary form can carry, in bytes.
    pub const MAX_LEN: usize = 1024;

    /// Checks the id against the bounds of the binary form: not empty, at most [`Self::MAX_LEN`]
    /// bytes.
    pub fn validate(&self) -> Result<(), IdError> {
        if self.0.is_empty() {
            return Err(IdError::Empty { what: Self::WHAT });
        }
        if self.0.len() > Self::MAX_LEN {
            return Err(IdError::TooLong {
                what: Self::WHAT,
                len: self.0.len(),
                max: Self::MAX_LEN,
            });
        }
        Ok(())
    }
}

macro_rules! number_id {
    ($(#[$doc:meta])* $name:ident($inner:ty)) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub $inner);

        impl $name {
            /// The number.
            pub const fn get(self) -> $inner {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl From<$inner> for $name {
            fn from(n: $inner) -> Self {
                Self(n)
            }
        }
    };
}

number_id!(
    /// An event's position in its session's log: dense, from 0.
    Seq(u64)
);
number_id!(
    /// A step's number, as the reply that opens it names it.
    StepNo(u64)
);
number_id!(
    /// A body's attempt number for one call: 1, 2, 3, ...
    Attempt(u32)
);
number_id!(
    /// A wall-clock time in milliseconds since the Unix epoch. Recovery never reads it, and the
    /// codec reads no clock: the writer's `Clock` gives it.
    UnixMillis(u64)
);

impl Seq {
    /// The position after this one.
    pub const fn next(self) -> Seq {
        Seq(self.0.saturating_add(1))
    }

    /// This position moved on by `n`.
    pub const fn add(self, n: u64) -> Seq {
        Seq(self.0.saturating_add(n))
    }
}
