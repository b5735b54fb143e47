//! Newtypes for every id and position, so that no bare `u64` or `String` crosses a public signature.

use std::fmt;

use serde::{Deserialize, Serialize};

/// An id that is not acceptable (empty, too long, holding a character the rule forbids).
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
    /// The id holds a character that acts on text (see [`acts_on_text`]).
    #[error(
        "{what} holds U+{code:04X} at byte {at}: control characters, line separators and \
         bidirectional controls are not allowed in it",
        code = u32::from(*.ch)
    )]
    Forbidden {
        /// Which kind of id.
        what: &'static str,
        /// The character.
        ch: char,
        /// Its byte offset in the id.
        at: usize,
    },
}

impl crate::Coded for IdError {
    fn code(&self) -> crate::ErrorCode {
        match self {
            IdError::Empty { .. } | IdError::TooLong { .. } | IdError::Forbidden { .. } => {
                crate::ErrorCode::InvalidId
            }
        }
    }
}

/// Whether `c` acts on a terminal or on the text around it rather than standing for itself: the
/// C0 controls (NUL, tab and newline among them), DEL, the C1 controls, the line and paragraph
/// separators (U+2028, U+2029) and the bidirectional controls (U+061C, U+200E, U+200F, U+202A to
/// U+202E, U+2066 to U+2069). Session ids may not hold them, and the command line escapes them
/// wherever it shows stored text.
pub fn acts_on_text(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{61c}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
    )
}

/// Whether `text` holds no character that [acts on text](acts_on_text): the rule of session and
/// run ids, past their bounds.
pub(crate) fn keeps_the_rule(what: &'static str, text: &str) -> Result<(), IdError> {
    // Printable ASCII, the common case, holds no character the rule forbids: checked a byte at a
    // time without decoding characters.
    if text.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Ok(());
    }
    if let Some((at, ch)) = text.char_indices().find(|&(_, c)| acts_on_text(c)) {
        return Err(IdError::Forbidden { what, ch, at });
    }
    Ok(())
}

/// What every string id has: its text, `Display` and `AsRef<str>`.
macro_rules! id_text {
    ($name:ident) => {
        impl $name {
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

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        id_text!($name);

        impl $name {
            /// Wraps a string as this id. Ids of this kind are opaque: any text is accepted.
            pub fn new(id: impl Into<String>) -> Self {
                Self(id.into())
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
    };
}

/// A session: one append-only log, the key every backend stores it under.
///
/// **One rule on every backend**: 1 to [`SessionId::MAX_LEN`] bytes of UTF-8 holding no
/// character that [acts on text](acts_on_text) (no control character, NUL included, no line
/// separator, no bidirectional control). [`SessionId::new`] checks it, and every write path
/// checks it again (an append's encoder: every backend, `import`, the writer), so an id one
/// backend takes every backend takes, and an export moves anywhere.
///
/// Readers accept whatever is stored ([`SessionId::from_stored`]): a journal written before the
/// rule stays readable, and its sessions can be exported and deleted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionId(String);

id_text!(SessionId);

impl SessionId {
    /// The longest session id, in bytes.
    pub const MAX_LEN: usize = 1024;
    const WHAT: &'static str = "session id";

    /// The session id `id`, if it keeps the rule (see [`SessionId`]).
    pub fn new(id: impl Into<String>) -> Result<Self, IdError> {
        let id = SessionId(id.into());
        id.validate()?;
        Ok(id)
    }

    /// A session id as a store holds it, unchecked: for readers, which accept whatever was
    /// stored. An append under it is checked all the same.
    pub fn from_stored(id: impl Into<String>) -> Self {
        SessionId(id.into())
    }

    /// Checks the id against the rule (see [`SessionId`]).
    pub fn validate(&self) -> Result<(), IdError> {
        self.check_bounds()?;
        keeps_the_rule(Self::WHAT, &self.0)
    }

    /// Checks only the bounds of the binary form: not empty, at most [`Self::MAX_LEN`] bytes.
    /// What a stored id always meets, whether or not it keeps the rule; a deletion frame needs
    /// no more, so a session stored before the rule can be deleted.
    pub fn check_bounds(&self) -> Result<(), IdError> {
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

impl TryFrom<&str> for SessionId {
    type Error = IdError;

    fn try_from(s: &str) -> Result<Self, IdError> {
        SessionId::new(s)
    }
}

impl TryFrom<String> for SessionId {
    type Error = IdError;

    fn try_from(s: String) -> Result<Self, IdError> {
        SessionId::new(s)
    }
}

impl std::str::FromStr for SessionId {
    type Err = IdError;

    fn from_str(s: &str) -> Result<Self, IdError> {
        SessionId::new(s)
    }
}

string_id!(
    /// A tool call's id within a reply (the provider's id; unique within one reply).
    CallId
);
string_id!(
    /// The dedupe key of a call, minted once and the same on every attempt and every entry.
    DispatchId
);
string_id!(
    /// A run: one pass of the runtime over a session, begun through an entry.
    ///
    /// A run id keeps the session ids' rule ([`SessionId`]): 1 to [`RunId::MAX_LEN`] bytes,
    /// no character that [acts on text](acts_on_text) (a NUL cannot move to PostgreSQL). Every
    /// append refuses an event naming a run id that breaks it ([`validate`](RunId::validate));
    /// one stored before the rule is read as it is.
    RunId
);

impl RunId {
    /// The longest run id, in bytes.
    pub const MAX_LEN: usize = 1024;
    const WHAT: &'static str = "run id";

    /// Checks the id against the rule (see [`RunId`]).
    pub fn validate(&self) -> Result<(), IdError> {
        let text = self.as_str();
        if text.is_empty() {
            return Err(IdError::Empty { what: Self::WHAT });
        }
        if text.len() > Self::MAX_LEN {
            return Err(IdError::TooLong { what: Self::WHAT, len: text.len(), max: Self::MAX_LEN });
        }
        keeps_the_rule(Self::WHAT, text)
    }
}
string_id!(
    /// A checkpoint's id: a reply's append checkpoint or a step's commit checkpoint.
    CheckpointId
);
string_id!(
    /// The name of a tool in the registry.
    ToolName
);

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
