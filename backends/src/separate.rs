//! [`SeparateProcess`]: a store handle that stands for another process, for tests that run
//! several processes in one.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use stepjournal_codec::{Record, RunId, Seq, SessionId, Stamped};

use crate::head::{LeaseTaken, OwnerId, SessionHead, StoreMetrics};
use crate::identity::StoreIdentity;
use crate::{
    AppendAck, AppendError, AppendFuture, Durability, JournalStore, StoreError, StoreFuture,
};

/// A store as another process would hold it: every call forwarded to the store inside, with
/// an identity of its own ([`StoreIdentity::OwnProcess`]), so that a second journal may run
/// over the same store in this process. For tests and simulations that stand for several
/// processes in one; a runtime shares one journal per store instead.
#[derive(Clone)]
pub struct SeparateProcess(pub Arc<dyn JournalStore>);

impl std::fmt::Debug for SeparateProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SeparateProcess").field(&self.0.identity()).finish()
    }
}

impl JournalStore for SeparateProcess {
    fn identity(&self) -> StoreIdentity {
        StoreIdentity::OwnProcess
    }
    fn max_durability(&self) -> Durability {
        self.0.max_durability()
    }
    fn append(
        &self,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        durability: Durability,
    ) -> Result<AppendAck, AppendError> {
        self.0.append(session, expected, events, durability)
    }
    fn read(&self, session: &SessionId, range: Range<Seq>) -> Result<Vec<Record>, StoreError> {
        self.0.read(session, range)
    }
    fn tail(&self, session: &SessionId) -> Result<Seq, StoreError> {
        self.0.tail(session)
    }
    fn sessions(&self) -> Result<Vec<SessionId>, StoreError> {
        self.0.sessions()
    }
    fn delete(&self, session: &SessionId) -> Result<bool, StoreError> {
        self.0.delete(session)
    }
    fn delete_at(&self, session: &SessionId, tail: Seq) -> Result<crate::DeleteAt, StoreError> {
        self.0.delete_at(session, tail)
    }
    fn read_all(&self, session: &SessionId) -> Result<Vec<Record>, StoreError> {
        self.0.read_all(session)
    }
    fn append_async(
        &self,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        durability: Durability,
    ) -> AppendFuture {
        self.0.append_async(session, expected, events, durability)
    }
    fn read_async(
        &self,
        session: &SessionId,
        range: Range<Seq>,
    ) -> StoreFuture<Result<Vec<Record>, StoreError>> {
        self.0.read_async(session, range)
    }
    fn read_from_snapshot(&self, session: &SessionId) -> Result<Vec<Record>, StoreError> {
        self.0.read_from_snapshot(session)
    }
    fn read_from_snapshot_async(
        &self,
        session: &SessionId,
    ) -> StoreFuture<Result<Vec<Record>, StoreError>> {
        self.0.read_from_snapshot_async(session)
    }
    fn tail_async(&self, session: &SessionId) -> StoreFuture<Result<Seq, StoreError>> {
        self.0.tail_async(session)
    }
    fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        self.0.heads()
    }
    fn heads_async(&self) -> StoreFuture<Result<Vec<SessionHead>, StoreError>> {
        self.0.heads_async()
    }
    fn close(&self) -> Result<(), StoreError> {
        self.0.close()
    }
    fn head(&self, session: &SessionId) -> Result<Option<SessionHead>, StoreError> {
        self.0.head(session)
    }
    fn head_async(
        &self,
        session: &SessionId,
    ) -> StoreFuture<Result<Option<SessionHead>, StoreError>> {
        self.0.head_async(session)
    }
    fn take_lease(
        &self,
        session: &SessionId,
        owner: &OwnerId,
        run: &RunId,
        ttl: Duration,
        force: bool,
    ) -> Result<LeaseTaken, StoreError> {
        self.0.take_lease(session, owner, run, ttl, force)
    }
    fn renew_leases(
        &self,
        owner: &OwnerId,
        runs: &[(SessionId, RunId)],
        ttl: Duration,
    ) -> Result<Vec<SessionId>, StoreError> {
        self.0.renew_leases(owner, runs, ttl)
    }
    fn release_lease(
        &self,
        session: &SessionId,
        owner: &OwnerId,
        run: &RunId,
    ) -> Result<(), StoreError> {
        self.0.release_lease(session, owner, run)
    }
    fn metrics(&self) -> StoreMetrics {
        self.0.metrics()
    }
}
