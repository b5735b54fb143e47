//! [`ReadAround`]: the check's read-only skip mode, a damaged file journal read around its
//! damage. The journal is checked as [`verify_dir`] checks it (nothing is written, no lock is
//! taken); every session no problem names is readable, read from the batches that passed every
//! check, and each damaged session is listed with where its damage is.
//!
//! Opening salvages by cutting ([`OnCorruption::TruncateAtCorruption`](crate::file::OnCorruption::TruncateAtCorruption)
//! drops everything after the first damage, for every session); reading around damage keeps
//! every intact session whole and changes nothing on disk.

use std::collections::HashSet;
use std::ops::Range;
use std::path::Path;

use stepjournal_codec::{Limits, Record, Seq, SessionId, Stamped};

use super::{VerifyReport, verify_dir};
use crate::{AppendAck, AppendError, Durability, JournalStore, StoreError};

/// Where a session (or a part of a journal that no intact byte ties to a session) is damaged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedSession {
    /// The session, when intact bytes name it.
    pub session: Option<SessionId>,
    /// Where and what, in words: for a file journal, the segment file and byte offset and what
    /// is wrong there (a finding of [`verify_dir`]); for a read that failed, the store's own
    /// words.
    pub what: String,
}

/// A file journal read through its check: the sessions no problem names, read from the batches
/// that passed every check. It is never written: appends and deletes return
/// [`StoreError::ReadOnly`].
#[derive(Debug)]
pub struct ReadAround {
    report: VerifyReport,
    /// The sessions no problem names, sorted.
    intact: Vec<SessionId>,
    location: String,
}

impl ReadAround {
    /// Checks the journal in `dir` (on the real file system) and returns it with the damage
    /// found: every session a problem names, or whose intact events stop at a gap, is left out
    /// of [`JournalStore::sessions`] and listed. A torn tail is no damage here: opening cuts
    /// it, and what precedes it reads. Only the directory's listing failing is an error.
    pub fn check(dir: &Path) -> Result<(ReadAround, Vec<DamagedSession>), StoreError> {
        let report = verify_dir(dir, &Limits::default(), &mut |_, _| {})?;
        let mut damaged: Vec<DamagedSession> = Vec::new();
        for f in report.findings.iter().filter(|f| !f.torn_tail) {
            damaged.push(DamagedSession { session: f.session.clone(), what: f.to_string() });
        }
        let named: HashSet<SessionId> = damaged.iter().filter_map(|d| d.session.clone()).collect();
        let mut intact = Vec::new();
        for s in report.sessions() {
            let (_, after_gap) = report.session_events(&s);
            if named.contains(&s) {
                continue;
            }
            if after_gap > 0 {
                damaged.push(DamagedSession {
                    session: Some(s.clone()),
                    what: format!("{after_gap} intact events follow a gap in its sequence"),
                });
                continue;
            }
            intact.push(s);
        }
        intact.sort();
        let location = dir.display().to_string();
        Ok((ReadAround { report, intact, location }, damaged))
    }

    /// The session's events from seq 0 up to its first damage (every event, for an intact
    /// session), damaged or not.
    pub fn prefix(&self, session: &SessionId) -> Result<Vec<Record>, StoreError> {
        Ok(self.report.read_session(session)?.into_iter().map(|l| l.record).collect())
    }

    /// Every session with at least one intact batch, damaged or not, sorted.
    pub fn all_sessions(&self) -> Vec<SessionId> {
        let mut all: Vec<SessionId> = self.report.sessions().collect();
        all.sort();
        all
    }

    fn read_only(&self) -> StoreError {
        StoreError::ReadOnly { location: self.location.clone() }
    }
}

impl JournalStore for ReadAround {
    fn max_durability(&self) -> Durability {
        Durability::Synced
    }

    fn append(
        &self,
        _session: &SessionId,
        _expected: Seq,
        _events: &[Stamped],
        _durability: Durability,
    ) -> Result<AppendAck, AppendError> {
        Err(AppendError::Store(self.read_only()))
    }

    /// A damaged session reads as empty.
    fn read(&self, session: &SessionId, range: Range<Seq>) -> Result<Vec<Record>, StoreError> {
        if self.intact.binary_search(session).is_err() {
            return Ok(Vec::new());
        }
        let mut records = self.prefix(session)?;
        records.retain(|r| r.seq >= range.start && r.seq < range.end);
        Ok(records)
    }

    /// A damaged session's tail is 0.
    fn tail(&self, session: &SessionId) -> Result<Seq, StoreError> {
        if self.intact.binary_search(session).is_err() {
            return Ok(Seq(0));
        }
        Ok(Seq(self.report.session_events(session).0))
    }

    /// The sessions no problem names.
    fn sessions(&self) -> Result<Vec<SessionId>, StoreError> {
        Ok(self.intact.clone())
    }

    fn delete(&self, _session: &SessionId) -> Result<bool, StoreError> {
        Err(self.read_only())
    }
}

#[cfg(test)]
mod tests {
    use stepjournal_codec::{Message, Role, UnixMillis};

    use super::*;
    use crate::file::{FileOptions, FileStore};

    fn events(from: u64, n: u64) -> Vec<Stamped> {
        let text = |i| format!("event {i}");
        (from..from + n)
            .map(|i| Stamped::at(UnixMillis(i), Message { role: Role::User, text: text(i) }))
            .collect()
    }

    /// A journal of two sessions: `bad`, one batch of one event, then one of two whose first
    /// record has a flipped byte in its payload; then `good`, three batches written after it
    /// (each synced, so the damage lies inside acknowledged data).
    fn journal(dir: &Path) -> SessionId {
        let (bad, good) = (SessionId::new("bad").unwrap(), SessionId::new("good").unwrap());
        {
            let store = FileStore::open(dir, FileOptions::new()).unwrap();
            store.append(&bad, Seq(0), &events(0, 1), Durability::Synced).unwrap();
            store.append(&bad, Seq(1), &events(1, 2), Durability::Synced).unwrap();
            for k in 0..3 {
                store.append(&good, Seq(k), &events(k, 1), Durability::Synced).unwrap();
            }
        }
        let report = verify_dir(dir, &Limits::default(), &mut |_, _| {}).unwrap();
        let second = report.read_session(&bad).unwrap().swap_remove(1);
        let mut bytes = std::fs::read(&second.segment).unwrap();
        // Past the prefix, the fixed fields and the session id: inside the payload.
        let at = second.offset as usize + 28 + "bad".len() + 2;
        bytes[at] ^= 0x40;
        std::fs::write(&second.segment, &bytes).unwrap();
        bad
    }

    #[test]
    fn a_damaged_session_is_listed_and_every_intact_one_reads_whole() {
        let dir = tempfile::tempdir().unwrap();
        let bad = journal(dir.path());
        let good = SessionId::new("good").unwrap();
        let (store, damaged) = ReadAround::check(dir.path()).unwrap();
        assert!(!damaged.is_empty());
        assert!(damaged.iter().all(|d| d.session.as_ref() == Some(&bad)), "{damaged:?}");
        assert!(damaged.iter().all(|d| d.what.contains(".seg at byte ")), "{damaged:?}");
        assert_eq!(store.sessions().unwrap(), vec![good.clone()]);
        assert_eq!(store.all_sessions(), vec![bad.clone(), good.clone()]);
        let read = store.read_all(&good).unwrap();
        assert_eq!(read.iter().map(|r| r.seq.get()).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(store.tail(&good).unwrap(), Seq(3));
        // The damaged session reads as empty; its events before the damage are its prefix.
        assert!(store.read_all(&bad).unwrap().is_empty());
        assert_eq!(store.tail(&bad).unwrap(), Seq(0));
        assert_eq!(store.prefix(&bad).unwrap().len(), 1);
    }

    #[test]
    fn a_journal_read_around_its_damage_refuses_every_write() {
        let dir = tempfile::tempdir().unwrap();
        let bad = journal(dir.path());
        let before = std::fs::read_dir(dir.path()).unwrap().count();
        let (store, _) = ReadAround::check(dir.path()).unwrap();
        let appended = store.append(&bad, Seq(0), &events(0, 1), Durability::Synced);
        assert!(matches!(appended, Err(AppendError::Store(StoreError::ReadOnly { .. }))));
        assert!(matches!(store.delete(&bad), Err(StoreError::ReadOnly { .. })));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), before);
    }
}
