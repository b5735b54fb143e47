//! The lease rule every store that keeps leases decides by: who may take a session's lease,
//! given the one held and the store's clock, and when a lease taken now lapses. SQLite and
//! PostgreSQL decide through [`decide`] (PostgreSQL with the server's `now()` read in the
//! statement that locked the row), and so does any other store that keeps leases (the
//! simulator's store in memory): one rule, written once.

use std::time::Duration;

use stepjournal_codec::UnixMillis;

use crate::head::{Lease, OwnerId};

/// What a take decides.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// Write the caller's lease; `took_over` is the live lease of another owner it replaces
    /// (only when forced).
    Take {
        /// The live lease of another owner replaced, if any.
        took_over: Option<Lease>,
    },
    /// Leave the lease as it is: this live lease is another owner's.
    Refuse(Lease),
}

/// Whether `owner` may take the lease over `held`, at `now` (unix ms by the store's clock):
/// when none is held, the held one lapsed (`expires <= now`, as [`Lease::is_live_at`] says),
/// or it is `owner`'s; otherwise only if `force`d.
pub fn decide(held: Option<Lease>, owner: &OwnerId, now: UnixMillis, force: bool) -> Decision {
    match held {
        Some(lease) if lease.owner != *owner && lease.is_live_at(now) => {
            if force {
                Decision::Take { took_over: Some(lease) }
            } else {
                Decision::Refuse(lease)
            }
        }
        _ => Decision::Take { took_over: None },
    }
}

/// When a lease taken or renewed at `now` (the store's clock) for `ttl` lapses: `now + ttl`,
/// saturating.
pub fn expiry(now: UnixMillis, ttl: Duration) -> UnixMillis {
    UnixMillis(now.get().saturating_add(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)))
}

#[cfg(test)]
mod tests {
    use stepjournal_codec::RunId;

    use super::*;

    fn lease(owner: &str, expires: u64) -> Lease {
        Lease { owner: OwnerId::new(owner), run: RunId::new("r"), expires: UnixMillis(expires) }
    }

    #[test]
    fn a_live_lease_of_another_owner_is_refused_unless_forced() {
        let me = OwnerId::new("me");
        let now = UnixMillis(100);
        assert_eq!(decide(None, &me, now, false), Decision::Take { took_over: None });
        assert_eq!(
            decide(Some(lease("me", 500)), &me, now, false),
            Decision::Take { took_over: None }
        );
        assert_eq!(
            decide(Some(lease("other", 100)), &me, now, false),
            Decision::Take { took_over: None }
        );
        assert_eq!(
            decide(Some(lease("other", 101)), &me, now, false),
            Decision::Refuse(lease("other", 101))
        );
        assert_eq!(
            decide(Some(lease("other", 101)), &me, now, true),
            Decision::Take { took_over: Some(lease("other", 101)) }
        );
    }

    #[test]
    fn the_rule_and_a_head_s_judgement_agree_on_when_a_lease_lapses() {
        // A lease a take refuses is one a head read at the same time calls live, and back.
        let me = OwnerId::new("me");
        for expires in 98..103 {
            let held = lease("other", expires);
            let refused = matches!(
                decide(Some(held.clone()), &me, UnixMillis(100), false),
                Decision::Refuse(_)
            );
            assert_eq!(refused, held.is_live_at(UnixMillis(100)), "expires {expires}");
        }
    }

    #[test]
    fn expiry_saturates() {
        assert_eq!(expiry(UnixMillis(u64::MAX - 1), Duration::from_secs(1)), UnixMillis(u64::MAX));
        assert_eq!(expiry(UnixMillis(10), Duration::ZERO), UnixMillis(10));
        assert_eq!(expiry(UnixMillis(10), Duration::from_millis(30)), UnixMillis(40));
    }
}
