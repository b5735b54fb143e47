//! What [`verify_dir`](super::verify_dir) reports: each problem, where it is, and what is wrong.

use std::path::{Path, PathBuf};

use stepjournal_codec::{DecodeError, Seq, SessionId};

use crate::file::format::torn::TornTail;

/// What is wrong at a [`FileFinding`]'s place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FileProblem {
    /// The segment's header is damaged: nothing in the file can be trusted to be this segment's.
    #[error("the segment header is damaged: {0}")]
    SegmentHeader(DecodeError),
    /// A group header is damaged (or is not where the previous group ends).
    #[error("the group header is damaged: {0}")]
    GroupHeader(DecodeError),
    /// A group's frames run past the end of the file.
    #[error("the group's {len} bytes of frames run past the end of the file ({available} there)")]
    GroupTruncated {
        /// Bytes of frames the header announces.
        len: u64,
        /// Bytes there are.
        available: u64,
    },
    /// A group's frames do not fill it exactly.
    #[error("the group's {frames} frames fill {filled} of its {len} bytes")]
    GroupFill {
        /// Frames the header announces.
        frames: u32,
        /// Bytes they fill.
        filled: u64,
        /// Bytes of frames the header announces.
        len: u64,
    },
    /// A batch frame is damaged and none of its records is: its header is.
    #[error("the batch frame is damaged: {0}")]
    Frame(DecodeError),
    /// A record is damaged (checksum, version, kind, length).
    #[error("the record is damaged: {0}")]
    Record(DecodeError),
    /// A record is intact but its event cannot be decoded.
    #[error("the record's event cannot be decoded: {0}")]
    Payload(DecodeError),
    /// An intact record in a batch of another session, or out of sequence in its batch.
    #[error(
        "misdirected record: the batch holds session {expected_session} from seq \
         {batch_first}, so this record should be seq {expected_seq}, but it says session \
         {found_session} seq {found_seq}"
    )]
    Misdirected {
        /// The session of the batch's first record.
        expected_session: SessionId,
        /// The batch's first sequence number.
        batch_first: Seq,
        /// The sequence number this record should have.
        expected_seq: Seq,
        /// The session the record names.
        found_session: SessionId,
        /// The sequence number the record names.
        found_seq: Seq,
    },
    /// A session's events stop and resume later: some sequence numbers are in no intact batch.
    #[error(
        "seq {from}..{to} of the session are in no intact batch: the events before end at seq {from}, this batch starts at seq {to}"
    )]
    SeqGap {
        /// The first missing sequence number.
        from: Seq,
        /// The first sequence number present again.
        to: Seq,
    },
    /// Two different batches of a session claim the same sequence numbers.
    #[error(
        "a batch of {count} events from seq {first} overlaps the session's events up to seq {tail}"
    )]
    Overlap {
        /// The batch's first sequence number.
        first: Seq,
        /// Its number of events.
        count: u32,
        /// Where the events before it end.
        tail: Seq,
    },
    /// A segment header or record of a format version newer than this build reads: written by a
    /// newer stepjournal, which reads it; not damage, and no repair cuts or removes it.
    #[error("written by a newer stepjournal: {0}")]
    NewerFormat(DecodeError),
    /// A sealed segment is shorter than its sidecar index recorded when the segment was sealed
    /// (a sealed segment never changes length): it was cut, at the finding's byte.
    #[error(
        "the sealed segment ends at byte {len}, but its sidecar index recorded {recorded} bytes: it was cut"
    )]
    SegmentCut {
        /// Its length now.
        len: u64,
        /// Its length when sealed.
        recorded: u64,
    },
    /// A sealed segment's sidecar index, which opening would read instead of the segment,
    /// does not describe it: an entry names another batch than the segment holds at its place,
    /// or a batch of the segment is missing from it. The finding names the sidecar file and the
    /// segment byte the first disagreement is at.
    #[error(
        "the sidecar index does not describe its segment (opening would read it instead of the          segment; remove it, and the next writable open scans the segment and the store writes          it again): {0}"
    )]
    Sidecar(String),
    /// The segment file could not be opened or read (what follows in it is not checked).
    #[error("the segment cannot be read: {0}")]
    Unreadable(String),
    /// The entry is named like a segment but is not a regular file (a named pipe, a directory, a
    /// symbolic link to nothing): it is not read, and opening the journal refuses it.
    #[error("the entry is {0}, not a segment file")]
    NotAFile(String),
}

/// One problem: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileFinding {
    /// The segment file.
    pub segment: PathBuf,
    /// The first byte of the damaged unit in the segment: the record where one can be told
    /// apart, else the frame, the group or the segment header.
    pub offset: u64,
    /// How many bytes the damaged unit spans, where its length could be read.
    pub len: Option<u64>,
    /// The session, where intact bytes name it.
    pub session: Option<SessionId>,
    /// The sequence number, where intact bytes tell it.
    pub seq: Option<Seq>,
    /// What is wrong.
    pub problem: FileProblem,
    /// The damage is where a crash leaves half-written bytes that were never made durable (the
    /// newest segment's end, with nothing after it claimed durable): opening the journal for
    /// writing cuts it, from there to the segment's end. Every other finding is damage inside
    /// acknowledged data, or data that contradicts itself.
    pub torn_tail: bool,
    /// Where the next valid group header after the damage is, when there is one in the same
    /// segment.
    pub valid_after: Option<u64>,
    /// For a torn tail (exactly when `torn_tail`): how many bytes it holds and its intact
    /// frames, what opening will cut.
    pub torn: Option<TornTail>,
}

impl std::fmt::Display for FileFinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "segment {} at byte {}", self.segment.display(), self.offset)?;
        if let Some(len) = self.len {
            write!(f, " ({len} bytes)")?;
        }
        match (&self.session, self.seq) {
            (Some(s), Some(q)) => write!(f, ", session {s} seq {q}")?,
            (Some(s), None) => write!(f, ", session {s}")?,
            _ => {}
        }
        write!(f, ": {}", self.problem)?;
        if self.torn_tail {
            f.write_str(" (a torn tail: never made durable; cut when the journal is next opened for writing)")?;
            if let Some(t) = &self.torn {
                write!(f, ": {t}")?;
            }
        } else if let Some(at) = self.valid_after {
            write!(f, " (valid data follows at byte {at})")?;
        }
        Ok(())
    }
}

/// A finding of `problem` at `offset` of `segment`, nothing else known yet.
pub(super) fn finding(segment: &Path, offset: u64, problem: FileProblem) -> FileFinding {
    FileFinding {
        segment: segment.to_path_buf(),
        offset,
        len: None,
        session: None,
        seq: None,
        problem,
        torn_tail: false,
        valid_after: None,
        torn: None,
    }
}
