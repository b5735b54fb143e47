//! The lease rule the SQL backends share: who may take a session's lease, given the one its head
//! row holds and the store's clock.

use std::time::Duration;

use stepjournal_codec::{RunId, UnixMillis};

use crate::head::{Lease, OwnerId};

/// A lease as the columns of a `sessions` row: `lease_owner`, `lease_run`, `lease_expires`
/// (unix milliseconds by the store's clock). All three set, or none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LeaseColumns {
    pub owner: Option<String>,
    pub run: Option<String>,
    pub expires: Option<i64>,
}

impl LeaseColumns {
    /// The lease, if one is held (expired or not). Partial columns hold none.
    pub(crate) fn lease(self) -> Option<Lease> {
        let (Some(owner), Some(run), Some(expires)) = (self.owner, self.run, self.expires) else {
            return None;
        };
        Some(Lease {
            owner: OwnerId::new(owner),
            run: RunId::new(run),
            expires: UnixMillis(u64::try_from(expires).unwrap_or(0)),
        })
    }
}

/// What a take decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Write the caller's lease; `took_over` is the live lease of another owner it replaces.
    Take { took_over: Option<Lease> },
    /// Leave the row: this live lease is another owner's.
    Refuse(Lease),
}

/// Whether `owner` may take the lease over `held`, at `now` (unix ms, the store's clock): when
/// none is held, it expired (`expires <= now`), or it is `owner`'s; otherwise only if forced.
pub(crate) fn decide(held: Option<Lease>, owner: &OwnerId, now: i64, force: bool) -> Decision {
    match held {
        Some(lease) if lease.owner != *owner && millis(lease.expires) > now => {
            if force {
                Decision::Take { took_over: Some(lease) }
            } else {
                Decision::Refuse(lease)
            }
        }
        _ => Decision::Take { took_over: None },
    }
}

/// `now + ttl` in unix ms, saturating.
pub(crate) fn expiry(now: i64, ttl: Duration) -> i64 {
    now.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
}

fn millis(t: UnixMillis) -> i64 {
    i64::try_from(t.get()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(owner: &str, expires: u64) -> Lease {
        Lease { owner: OwnerId::new(owner), run: RunId::new("r"), expires: UnixMillis(expires) }
    }

    #[test]
    fn a_live_lease_of_another_owner_is_refused_unless_forced() {
        let me = OwnerId::new("me");
        assert_eq!(decide(None, &me, 100, false), Decision::Take { took_over: None });
        assert_eq!(
            decide(Some(lease("me", 500)), &me, 100, false),
            Decision::Take { took_over: None }
        );
        assert_eq!(
            decide(Some(lease("other", 100)), &me, 100, false),
            Decision::Take { took_over: None }
        );
        assert_eq!(
            decide(Some(lease("other", 101)), &me, 100, false),
            Decision::Refuse(lease("other", 101))
        );
        assert_eq!(
            decide(Some(lease("other", 101)), &me, 100, true),
            Decision::Take { took_over: Some(lease("other", 101)) }
        );
    }

    #[test]
    fn partial_columns_hold_no_lease_and_expiry_saturates() {
        let partial = LeaseColumns { owner: Some("o".into()), run: None, expires: Some(5) };
        assert_eq!(partial.lease(), None);
        assert_eq!(expiry(i64::MAX - 1, Duration::from_secs(1)), i64::MAX);
        assert_eq!(expiry(10, Duration::ZERO), 10);
    }
}
