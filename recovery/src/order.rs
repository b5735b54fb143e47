//! The order rule: which calls of a reply a call is behind, and which of them hold it back.
//!
//! A call is behind every earlier call of its reply in the same concurrency group, and, when it
//! is `sequential`, every earlier `sequential` call (the reply's sequential chain). Its body may
//! start only once each of them is resolved, and never behind one whose effect is in doubt or
//! never happened (a pairing that blocks, a denied approval). The planner (rules `order.group`
//! and `order.sequential`), the writer's `start_body` and the crash simulator's check read the
//! rule from here, so they cannot drift apart.

use std::fmt;

use stepjournal_codec::{Call, PairReason};

use crate::state::{ApprovalState, CallRecord};

/// A lane of a reply: a concurrency group, or the sequential chain. A call is behind the
/// earlier calls of each lane it is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane<'a> {
    /// The concurrency group of this name.
    Group(&'a str),
    /// The reply's sequential chain.
    Sequential,
}

impl<'a> Lane<'a> {
    /// The lanes `call` is in, in the order that names how it is behind another: its group
    /// first, then the sequential chain.
    pub fn of(call: &'a Call) -> impl Iterator<Item = Lane<'a>> + 'a {
        let group = call.group.as_deref().map(Lane::Group);
        group.into_iter().chain(call.sequential.then_some(Lane::Sequential))
    }

    /// Whether `call` is in this lane.
    pub fn holds(self, call: &Call) -> bool {
        match self {
            Lane::Group(group) => call.group.as_deref() == Some(group),
            Lane::Sequential => call.sequential,
        }
    }

    /// How `call` is behind `ahead`, an earlier call of its reply: the first of its lanes that
    /// `ahead` is in too; `None` if they share none.
    pub fn between(call: &'a Call, ahead: &Call) -> Option<Lane<'a>> {
        Lane::of(call).find(|lane| lane.holds(ahead))
    }
}

impl fmt::Display for Lane<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lane::Group(group) => write!(f, "group `{group}`"),
            Lane::Sequential => f.write_str("the sequential chain"),
        }
    }
}

/// Every earlier call of the reply that `calls[index]` is behind, in reply order, each with the
/// lane it is behind it in. `calls` are a reply's calls in reply order
/// ([`SessionState::calls_of`](crate::SessionState::calls_of)); an index past them has none.
pub fn behind<'s, 'a>(
    calls: &'s [CallRecord<'a>],
    index: usize,
) -> impl Iterator<Item = (&'s CallRecord<'a>, Lane<'a>)> + 's {
    let me = calls.get(index).map(|r| r.call());
    let ahead = calls.get(..index).unwrap_or_default();
    ahead.iter().filter_map(move |a| Some((a, Lane::between(me?, a.call())?)))
}

/// Why a call holds the calls behind it back for good: its effect is in doubt or never
/// happened, and they were written to follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocking {
    /// Its approval was denied.
    ApprovalDenied,
    /// It is paired with this reason (one [`reason_blocks`](crate::reason_blocks) names), and
    /// the pairing still counts.
    Paired(PairReason),
}

/// Whether `record` holds the calls behind it back for good, and why: a denied approval, or
/// the first pairing that still counts whose reason blocks. With `pairings_count` false (under
/// a rewind, no pairing of the step counts) only a denial does.
pub fn blocking(record: &CallRecord<'_>, pairings_count: bool) -> Option<Blocking> {
    if record.approval() == ApprovalState::Denied {
        return Some(Blocking::ApprovalDenied);
    }
    record.blocks_by_log(pairings_count).map(Blocking::Paired)
}

#[cfg(test)]
mod tests {
    use stepjournal_codec::{CallId, CallKind, RawJson, Replay};

    use super::*;
    use crate::fold;
    use crate::testlog::{CallExt, Log, call as logged};

    fn call(group: Option<&str>, sequential: bool) -> Call {
        Call {
            call: CallId::new("c"),
            tool: "t".into(),
            args: RawJson::empty_object(),
            kind: CallKind::Tool,
            replay: Replay::Safe,
            group: group.map(str::to_owned),
            sequential,
        }
    }

    #[test]
    fn a_call_is_behind_its_group_before_the_sequential_chain() {
        let me = call(Some("g"), true);
        assert_eq!(Lane::of(&me).collect::<Vec<_>>(), [Lane::Group("g"), Lane::Sequential]);
        assert_eq!(Lane::between(&me, &call(Some("g"), true)), Some(Lane::Group("g")));
        assert_eq!(Lane::between(&me, &call(Some("h"), true)), Some(Lane::Sequential));
        assert_eq!(Lane::between(&me, &call(None, true)), Some(Lane::Sequential));
        assert_eq!(Lane::between(&me, &call(Some("h"), false)), None);
    }

    #[test]
    fn calls_share_no_lane_without_a_common_group_or_both_being_sequential() {
        assert_eq!(Lane::between(&call(None, false), &call(None, false)), None);
        assert_eq!(Lane::between(&call(None, true), &call(None, false)), None);
        assert_eq!(Lane::between(&call(None, false), &call(None, true)), None);
        assert_eq!(Lane::between(&call(Some("g"), false), &call(None, true)), None);
        assert_eq!(
            Lane::between(&call(Some("g"), false), &call(Some("g"), false)),
            Some(Lane::Group("g"))
        );
    }

    #[test]
    fn a_lane_says_itself_as_refusals_and_rules_name_it() {
        assert_eq!(Lane::Group("io").to_string(), "group `io`");
        assert_eq!(Lane::Sequential.to_string(), "the sequential chain");
    }

    #[test]
    fn behind_names_every_earlier_call_sharing_a_lane_in_reply_order() {
        let log = Log::new().reply(
            1,
            "cp-1",
            vec![
                logged("c1", "t").sequential(),
                logged("c2", "t").group("g"),
                logged("c3", "t"),
                logged("c4", "t").group("g").sequential(),
                logged("c5", "t").group("g").sequential(),
            ],
        );
        let state = fold(&log.events);
        let Some(reply) = state.last_reply() else { panic!("the log has a reply") };
        let calls = state.calls_of(reply);
        let named = |i: usize| -> Vec<(String, Lane<'_>)> {
            behind(&calls, i).map(|(a, lane)| (a.id().to_string(), lane)).collect()
        };
        assert_eq!(named(0), []);
        assert_eq!(named(2), []);
        assert_eq!(named(3), [("c1".into(), Lane::Sequential), ("c2".into(), Lane::Group("g"))]);
        assert_eq!(
            named(4),
            [
                ("c1".into(), Lane::Sequential),
                ("c2".into(), Lane::Group("g")),
                ("c4".into(), Lane::Group("g")),
            ]
        );
        assert_eq!(named(5), [], "an index past the reply's calls is behind nothing");
    }

    #[test]
    fn a_denial_or_a_counting_pairing_that_blocks_holds_the_calls_behind_back() {
        let log = Log::new()
            .reply(
                1,
                "cp-1",
                vec![
                    logged("c1", "t").kind(CallKind::Approval),
                    logged("c2", "t"),
                    logged("c3", "t"),
                    logged("c4", "t"),
                ],
            )
            .approval("c1", false)
            .paired("c2", PairReason::OutcomeUnknown)
            .result("c4", 1);
        let state = fold(&log.events);
        let Some(reply) = state.last_reply() else { panic!("the log has a reply") };
        let calls = state.calls_of(reply);
        let of = |i: usize, count: bool| calls.get(i).and_then(|r| blocking(r, count));
        assert_eq!(of(0, true), Some(Blocking::ApprovalDenied));
        assert_eq!(of(0, false), Some(Blocking::ApprovalDenied), "a denial is never voided");
        assert_eq!(of(1, true), Some(Blocking::Paired(PairReason::OutcomeUnknown)));
        assert_eq!(of(1, false), None, "no pairing counts under a rewind");
        assert_eq!(of(2, true), None, "an unresolved call");
        assert_eq!(of(3, true), None, "a result");
    }
}
