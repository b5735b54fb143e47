//! [`SalvagedStore`]: a damaged file journal read around its damage. The journal is checked
//! the way `verify` checks it (nothing is written, no lock is taken); every session no problem
//! names is readable, each damaged session is listed with where its damage is.

use std::ops::Range;
use std::path::Path;

use stepjournal_backends::file::{VerifyReport, verify_dir};
use stepjournal_backends::{AppendAck, AppendError, Durability, JournalStore, StoreError};
use stepjournal_codec::{Limits, Record, Seq, SessionId, Stamped};

/// Where a session (or a part of the journal no intact byte ties to a session) is damaged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damaged {
    /// The session, when intact bytes name it.
    pub session: Option<SessionId>,
    /// Where and what: the segment file and byte offset (file journals), or the store's own
    /// words (the session and seq a read failed at).
    pub what: String,
}

/// A file journal read through its check: the sessions no problem names, read from the
/// batches that passed every check. It is never written.
#[derive(Debug)]
pub struct SalvagedStore {
    report: VerifyReport,
    intact: Vec<SessionId>,
    location: String,
}

impl SalvagedStore {
    /// Checks the journal in `dir` and returns it with the damage found: every session a
    /// problem names is left out of [`JournalStore::sessions`] and listed.
    pub fn check(dir: &Path) -> Result<(Self, Vec<Damaged>), StoreError> {
        let report = verify_dir(dir, &Limits::default(), &mut |_, _| {})?;
        let mut damaged: Vec<Damaged> = Vec::new();
        for f in report.findings.iter().filter(|f| !f.torn_tail) {
            damaged.push(Damaged { session: f.session.clone(), what: f.to_string() });
        }
        let named: std::collections::HashSet<SessionId> =
            damaged.iter().filter_map(|d| d.session.clone()).collect();
        let mut intact = Vec::new();
        for s in report.sessions() {
            let (_, after_gap) = report.session_events(&s);
            if named.contains(&s) {
                continue;
            }
            if after_gap > 0 {
                damaged.push(Damaged {
                    session: Some(s.clone()),
                    what: format!("{after_gap} intact events follow a gap in its sequence"),
                });
                continue;
            }
            intact.push(s);
        }
        intact.sort();
        let location = dir.display().to_string();
        Ok((SalvagedStore { report, intact, location }, damaged))
    }

    /// The session's events from seq 0 up to its first damage (every event, for an intact
    /// session).
    pub fn prefix(&self, session: &SessionId) -> Result<Vec<Record>, StoreError> {
        Ok(self.report.read_session(session)?.into_iter().map(|l| l.record).collect())
    }

    /// Every session with at least one intact batch, damaged or not.
    pub fn all_sessions(&self) -> Vec<SessionId> {
        let mut all: Vec<SessionId> = self.report.sessions().collect();
        all.sort();
        all
    }

    fn read_only(&self) -> StoreError {
        StoreError::ReadOnly { location: self.location.clone() }
    }
}

impl JournalStore for SalvagedStore {
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

    fn read(&self, session: &SessionId, range: Range<Seq>) -> Result<Vec<Record>, StoreError> {
        if self.intact.binary_search(session).is_err() {
            return Ok(Vec::new());
        }
        let mut records = self.prefix(session)?;
        records.retain(|r| r.seq >= range.start && r.seq < range.end);
        Ok(records)
    }

    fn tail(&self, session: &SessionId) -> Result<Seq, StoreError> {
        if self.intact.binary_search(session).is_err() {
            return Ok(Seq(0));
        }
        Ok(Seq(self.report.session_events(session).0))
    }

    fn sessions(&self) -> Result<Vec<SessionId>, StoreError> {
        Ok(self.intact.clone())
    }

    fn delete(&self, _session: &SessionId) -> Result<bool, StoreError> {
        Err(self.read_only())
    }
}
