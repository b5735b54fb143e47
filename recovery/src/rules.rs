//! The stable ids of the explain trail: each call's decision names the rule that made it.
//!
//! The ids never change meaning; new rules get new ids. `docs/recovery.md` lists them.

/// The call is resolved (a result, a client answer, a denied approval, or a pairing that still
/// counts): it keeps what it has.
pub const KEEP_RESOLVED: &str = "keep.resolved";
/// Recovery: a `client` call waits for the client's answer.
pub const AWAIT_CLIENT: &str = "await.client";
/// Recovery: an `approval` call with no decision waits for it.
pub const AWAIT_APPROVAL: &str = "await.approval";
/// Recovery: behind a call of the same group that is in doubt or did not run.
pub const ORDER_GROUP: &str = "order.group";
/// Recovery: behind a call of the sequential chain that is in doubt or did not run.
pub const ORDER_SEQUENTIAL: &str = "order.sequential";
/// Recovery: a remote sub-agent with a child re-attaches to it.
pub const REMOTE_REATTACH: &str = "remote.reattach";
/// Recovery: a remote sub-agent with no child starts it under the dispatch id.
pub const REMOTE_START_CHILD: &str = "remote.start_child";
/// Recovery: a remote sub-agent with no child whose tool is removed or whose arguments fail.
pub const REMOTE_UNRUNNABLE: &str = "remote.unrunnable";
/// Recovery: a persistent companion re-enters its child phase.
pub const COMPANION_REENTER: &str = "companion.reenter";
/// Recovery: no body started; the tool is present and the arguments pass: run attempt 1.
pub const NO_BODY_RUN: &str = "recovery.no_body_run";
/// Recovery: no body started; the tool is removed or the arguments fail: `not_started`.
pub const NO_BODY_UNRUNNABLE: &str = "recovery.no_body_unrunnable";
/// Recovery: an in-process child died with its parent: `outcome_unknown`.
pub const LOCAL_AGENT: &str = "recovery.local_agent";
/// Recovery: safe then and now, arguments pass, under `max_bodies`: run again.
pub const SAFE_REPLAY: &str = "recovery.safe_replay";
/// Recovery: safe then and now, but `max_bodies` bodies already started.
pub const REPLAY_LIMIT: &str = "recovery.replay_limit";
/// Recovery: a body started and running it again is not allowed: `outcome_unknown`.
pub const OUTCOME_UNKNOWN: &str = "recovery.outcome_unknown";
/// Redirect: no body started and nothing outside could have run it: `not_started`.
pub const REDIRECT_NOT_STARTED: &str = "redirect.not_started";
/// Redirect: a body or a child may have run, or the client may have: `outcome_unknown`.
pub const REDIRECT_OUTCOME_UNKNOWN: &str = "redirect.outcome_unknown";
/// Stop: every unresolved call is paired `run_stopped`.
pub const STOP_RUN_STOPPED: &str = "stop.run_stopped";

/// The writer: a run that failed after the save pairs each open call (`not_started` where
/// nothing could have run it, `outcome_unknown` otherwise), so none is left unanswered.
pub const FAILED_AFTER_SAVE: &str = "run.failed_after_save";
/// The runtime: a call it answered as not run (`Step::skip`): `not_started`.
pub const SKIPPED: &str = "runtime.skipped";

/// Every rule id, in the order of the rules.
pub const ALL: &[&str] = &[
    KEEP_RESOLVED,
    AWAIT_CLIENT,
    AWAIT_APPROVAL,
    ORDER_GROUP,
    ORDER_SEQUENTIAL,
    REMOTE_REATTACH,
    REMOTE_START_CHILD,
    REMOTE_UNRUNNABLE,
    COMPANION_REENTER,
    NO_BODY_RUN,
    NO_BODY_UNRUNNABLE,
    LOCAL_AGENT,
    SAFE_REPLAY,
    REPLAY_LIMIT,
    OUTCOME_UNKNOWN,
    REDIRECT_NOT_STARTED,
    REDIRECT_OUTCOME_UNKNOWN,
    STOP_RUN_STOPPED,
    FAILED_AFTER_SAVE,
    SKIPPED,
];
