//! How a run begins: the entry.

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

use crate::CheckpointId;

/// The way a run enters a session (FORMAT.md's entries).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "EntryRepr")]
pub enum Entry {
    /// A Durable Object's wake: the same as `resume` / `continue`.
    Wake,
    /// `resume` in one of its modes.
    Resume(ResumeMode),
    /// `retry`, with an optional checkpoint and an optional message. Whether the combination is
    /// allowed is recovery's to decide (a checkpoint without a message is refused there).
    Retry {
        /// The checkpoint to retry from.
        checkpoint: Option<CheckpointId>,
        /// The message that redirects the turn.
        message: Option<String>,
    },
    /// A new turn opened by a user message.
    NewTurn {
        /// The user's message.
        message: String,
    },
    /// Stop the session's work.
    Stop,
}

/// The modes of `resume`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResumeMode {
    /// Carry on: recovery.
    Continue,
    /// Redirect the turn with a message.
    WithMessage {
        /// The message.
        message: String,
    },
    /// Recover from a checkpoint.
    FromCheckpoint {
        /// The checkpoint.
        checkpoint: CheckpointId,
    },
}

impl Entry {
    /// The entry's kind as the JSON form names it.
    pub fn kind_str(&self) -> &'static str {
        match self {
            Entry::Wake => "wake",
            Entry::Resume(_) => "resume",
            Entry::Retry { .. } => "retry",
            Entry::NewTurn { .. } => "new_turn",
            Entry::Stop => "stop",
        }
    }

    /// The message the entry carries, if any.
    pub fn message(&self) -> Option<&str> {
        match self {
            Entry::Resume(ResumeMode::WithMessage { message })
            | Entry::NewTurn { message }
            | Entry::Retry { message: Some(message), .. } => Some(message),
            _ => None,
        }
    }

    fn to_repr(&self) -> EntryRepr {
        let mut repr =
            EntryRepr { kind: EntryKindRepr::Wake, mode: None, message: None, checkpoint: None };
        match self {
            Entry::Wake => {}
            Entry::Resume(mode) => {
                repr.kind = EntryKindRepr::Resume;
                match mode {
                    ResumeMode::Continue => repr.mode = Some(ModeRepr::Continue),
                    ResumeMode::WithMessage { message } => {
                        repr.mode = Some(ModeRepr::WithMessage);
                        repr.message = Some(message.clone());
                    }
                    ResumeMode::FromCheckpoint { checkpoint } => {
                        repr.mode = Some(ModeRepr::FromCheckpoint);
                        repr.checkpoint = Some(checkpoint.clone());
                    }
                }
            }
            Entry::Retry { checkpoint, message } => {
                repr.kind = EntryKindRepr::Retry;
                repr.checkpoint = checkpoint.clone();
                repr.message = message.clone();
            }
            Entry::NewTurn { message } => {
                repr.kind = EntryKindRepr::NewTurn;
                repr.message = Some(message.clone());
            }
            Entry::Stop => repr.kind = EntryKindRepr::Stop,
        }
        repr
    }
}

/// The flat shape both forms share: JSON members by name, binary fields by position.
#[derive(Debug, Serialize, Deserialize)]
struct EntryRepr {
    kind: EntryKindRepr,
    #[serde(default)]
    mode: Option<ModeRepr>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    checkpoint: Option<CheckpointId>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum EntryKindRepr {
    Wake,
    Resume,
    Retry,
    NewTurn,
    Stop,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ModeRepr {
    Continue,
    WithMessage,
    FromCheckpoint,
}

impl TryFrom<EntryRepr> for Entry {
    type Error = String;

    fn try_from(r: EntryRepr) -> Result<Self, String> {
        Ok(match r.kind {
            EntryKindRepr::Wake => Entry::Wake,
            EntryKindRepr::Stop => Entry::Stop,
            EntryKindRepr::Retry => Entry::Retry { checkpoint: r.checkpoint, message: r.message },
            EntryKindRepr::NewTurn => {
                Entry::NewTurn { message: r.message.ok_or("a `new_turn` entry needs a `message`")? }
            }
            EntryKindRepr::Resume => match r.mode.ok_or("a `resume` entry needs a `mode`")? {
                ModeRepr::Continue => Entry::Resume(ResumeMode::Continue),
                ModeRepr::WithMessage => Entry::Resume(ResumeMode::WithMessage {
                    message: r.message.ok_or("`resume` `with_message` needs a `message`")?,
                }),
                ModeRepr::FromCheckpoint => Entry::Resume(ResumeMode::FromCheckpoint {
                    checkpoint: r
                        .checkpoint
                        .ok_or("`resume` `from_checkpoint` needs a `checkpoint`")?,
                }),
            },
        })
    }
}

impl Serialize for Entry {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let repr = self.to_repr();
        if !serializer.is_human_readable() {
            return repr.serialize(serializer);
        }
        // The JSON form carries only the members the entry has.
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("kind", &repr.kind)?;
        if let Some(mode) = &repr.mode {
            map.serialize_entry("mode", mode)?;
        }
        if let Some(checkpoint) = &repr.checkpoint {
            map.serialize_entry("checkpoint", checkpoint)?;
        }
        if let Some(message) = &repr.message {
            map.serialize_entry("message", message)?;
        }
        map.end()
    }
}
