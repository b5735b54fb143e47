//! [`TornTail`]: what the bytes at the newest segment's end that opening cuts held, for the
//! operator to see what a torn tail took.

use std::path::{Path, PathBuf};

use stepjournal_codec::{Seq, SessionId};

use super::walk::{FrameKindInfo, Torn};

/// A torn tail: bytes at the newest segment's end that a crash left half-written, or that look
/// so (see `docs/backends.md` for the damage that cannot be told from it), with what they held.
///
/// A writable open cuts them (and keeps them aside first); a read-only open and
/// [`verify_dir`](crate::file::verify_dir) only report them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TornTail {
    /// The segment file.
    pub segment: PathBuf,
    /// Its first byte: the start of the first damaged group (0: the segment was left
    /// half-created, and is removed whole).
    pub offset: u64,
    /// The bytes it held: from `offset` to its last non-zero byte (the zeros the writer puts
    /// ahead of its data are not counted); for a half-created segment, the file's length.
    pub len: u64,
    /// The intact frames inside it, in order: what was cut with it. A batch there was written
    /// whole but never made durable, or acknowledged with only `Buffered` durability, or (for
    /// damage that only looks torn) acknowledged data.
    pub frames: Vec<TornFrame>,
    /// Where a writable open copied its bytes before cutting them (`None` when it held no byte
    /// that could not be rebuilt, or when nothing was cut).
    pub kept_in: Option<PathBuf>,
    /// The older copies of bytes cut at the same place that the open removed when it made
    /// `kept_in`, oldest first: it keeps at most
    /// [`TORN_COPIES_KEPT`](crate::file::TORN_COPIES_KEPT) of one place.
    pub copies_removed: Vec<PathBuf>,
}

/// An intact frame inside a torn tail.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TornFrame {
    /// A batch of `count` events of `session` from `first`.
    Events {
        /// The session.
        session: SessionId,
        /// The batch's first sequence number.
        first: Seq,
        /// How many events it holds.
        count: u32,
    },
    /// The deletion of `session` (cut, so the session's earlier events count again).
    Delete {
        /// The session.
        session: SessionId,
    },
}

impl TornTail {
    pub(crate) fn new(segment: &Path, torn: &Torn) -> TornTail {
        let frames = torn
            .frames
            .iter()
            .map(|f| {
                let session = SessionId::from_stored(f.session.as_str());
                match f.kind {
                    FrameKindInfo::Events { first, count } => {
                        TornFrame::Events { session, first: Seq(first), count }
                    }
                    FrameKindInfo::Delete => TornFrame::Delete { session },
                }
            })
            .collect();
        TornTail {
            segment: segment.to_path_buf(),
            offset: torn.damage.cut,
            len: torn.len,
            frames,
            kept_in: None,
            copies_removed: Vec::new(),
        }
    }

    /// The sessions whose frames it held, sorted, each once.
    pub fn sessions(&self) -> Vec<SessionId> {
        let mut out: Vec<SessionId> = self
            .frames
            .iter()
            .map(|f| match f {
                TornFrame::Events { session, .. } | TornFrame::Delete { session } => {
                    session.clone()
                }
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

impl std::fmt::Display for TornTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a torn tail of {} bytes at byte {} of segment {}",
            self.len,
            self.offset,
            self.segment.display()
        )?;
        if self.frames.is_empty() {
            f.write_str(", holding no intact frame")?;
        } else {
            f.write_str(", holding ")?;
            for (i, frame) in self.frames.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                match frame {
                    TornFrame::Events { session, first, count } => {
                        let end = first.get().saturating_add(u64::from(*count));
                        write!(f, "session {session} seq {first}..{end}")?;
                    }
                    TornFrame::Delete { session } => {
                        write!(f, "the deletion of session {session}")?
                    }
                }
            }
        }
        if let Some(kept) = &self.kept_in {
            write!(f, "; its bytes are kept in {}", kept.display())?;
        }
        if let (Some(oldest), Some(newest)) =
            (self.copies_removed.first(), self.copies_removed.last())
        {
            let n = self.copies_removed.len();
            if n == 1 {
                write!(f, "; the oldest copy of that place, {}, was removed", oldest.display())?;
            } else {
                write!(
                    f,
                    "; the {n} oldest copies of that place, {} to {}, were removed",
                    oldest.display(),
                    newest.display()
                )?;
            }
        }
        Ok(())
    }
}
