//! Leases as the SQL backends store them: the columns of a `sessions` row, and the one lease rule
//! ([`crate::lease`]) read from and written to them.

use std::time::Duration;

use stepjournal_codec::{RunId, UnixMillis};

use crate::head::{Lease, OwnerId};
pub(crate) use crate::lease::Decision;

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

/// `now + ttl` in unix ms by the rule of [`crate::lease::expiry`], as a column's `i64`.
pub(crate) fn expiry(now: i64, ttl: Duration) -> i64 {
    let at = crate::lease::expiry(UnixMillis(u64::try_from(now).unwrap_or(0)), ttl);
    i64::try_from(at.get()).unwrap_or(i64::MAX)
}

/// [`crate::lease::decide`] at `now`, a column's unix ms (a time before the epoch reads as 0).
pub(crate) fn decide(held: Option<Lease>, owner: &OwnerId, now: i64, force: bool) -> Decision {
    crate::lease::decide(held, owner, UnixMillis(u64::try_from(now).unwrap_or(0)), force)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(owner: &str, expires: u64) -> Lease {
        Lease { owner: OwnerId::new(owner), run: RunId::new("r"), expires: UnixMillis(expires) }
    }

    #[test]
    fn the_columns_decide_by_the_one_rule() {
        let me = OwnerId::new("me");
        let held = || Some(lease("other", 101));
        assert_eq!(decide(held(), &me, 100, false), Decision::Refuse(lease("other", 101)));
        assert_eq!(decide(held(), &me, 101, false), Decision::Take { took_over: None });
        assert_eq!(decide(held(), &me, -5, false), Decision::Refuse(lease("other", 101)));
    }

    #[test]
    fn partial_columns_hold_no_lease_and_expiry_saturates() {
        let partial = LeaseColumns { owner: Some("o".into()), run: None, expires: Some(5) };
        assert_eq!(partial.lease(), None);
        assert_eq!(expiry(i64::MAX - 1, Duration::from_secs(1)), i64::MAX);
        assert_eq!(expiry(10, Duration::ZERO), 10);
    }
}
