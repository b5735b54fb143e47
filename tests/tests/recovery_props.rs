//! Properties of the recovery fold over generated protocol-shaped logs.

use proptest::prelude::*;
use stepjournal_codec::{
    CallId, CheckpointId, Entry, Event, Replay, ResumeMode, RunId, RunOutcome,
};
use stepjournal_recovery::{
    Action, NewRun, Plan, SessionState, ToolRegistry, fold, fold_owned, forks_agree, plan,
    trims_agree,
};
use stepjournal_tests::protocol_gen::{ProtocolCase, every_entry, protocol_case};

fn config() -> ProptestConfig {
    ProptestConfig { cases: 256, max_shrink_iters: 64, ..ProptestConfig::default() }
}

fn new_run(entry: &Entry, n: usize) -> NewRun {
    NewRun {
        run: RunId::new(format!("r-gen-{n}")),
        entry: entry.clone(),
        commit_checkpoint: CheckpointId::new(format!("cp-gen-commit-{n}")),
    }
}

fn plan_case(case: &ProtocolCase) -> Plan {
    plan(&fold(&case.events), &new_run(&case.entry, 0), &case.registry, &case.config)
}

fn plan_entry(events: &[Event], entry: &Entry, case: &ProtocolCase, n: usize) -> Plan {
    plan(&fold(events), &new_run(entry, n), &case.registry, &case.config)
}

fn paired_calls(plan: &Plan) -> Vec<CallId> {
    plan.appends
        .iter()
        .filter_map(|e| match e {
            Event::Paired(p) => Some(p.call.clone()),
            _ => None,
        })
        .collect()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_fork_at_every_committed_step_plans_as_its_whole_fold_and_as_the_original(
        case in protocol_case(),
    ) {
        let entries: Vec<NewRun> =
            every_entry(&case.events).iter().enumerate().map(|(n, e)| new_run(e, n)).collect();
        let got = forks_agree(&case.events, &entries, &case.registry, &case.config, usize::MAX);
        prop_assert!(got.is_ok(), "{}", got.unwrap_err());
    }

    #[test]
    fn a_log_trimmed_where_a_trim_may_cut_it_plans_as_the_whole_log(case in protocol_case()) {
        let entries: Vec<NewRun> =
            every_entry(&case.events).iter().enumerate().map(|(n, e)| new_run(e, n)).collect();
        let got = trims_agree(&case.events, &entries, &case.registry, &case.config, usize::MAX);
        prop_assert!(got.is_ok(), "{}", got.unwrap_err());
    }

    #[test]
    fn the_fold_and_the_plan_are_deterministic(case in protocol_case()) {
        prop_assert_eq!(fold(&case.events), fold(&case.events));
        prop_assert_eq!(plan_case(&case), plan_case(&case));
    }

    #[test]
    fn feeding_events_one_at_a_time_equals_folding_them_at_once(
        case in protocol_case(),
        cut in any::<prop::sample::Index>(),
    ) {
        let all = fold(&case.events);
        let mut one_by_one = SessionState::default();
        for e in &case.events {
            one_by_one.apply(e);
        }
        prop_assert_eq!(&one_by_one, &all);
        prop_assert_eq!(&fold_owned(case.events.clone()), &all);
        let at = cut.index(case.events.len() + 1);
        let (head, rest) = case.events.split_at(at);
        let mut resumed = fold(head);
        for e in rest {
            resumed.apply(e);
        }
        prop_assert_eq!(&resumed, &all);
    }

    #[test]
    fn no_call_with_bodies_runs_unless_both_policies_are_safe_and_the_arguments_pass(
        case in protocol_case(),
    ) {
        let state = fold(&case.events);
        let plan = plan_case(&case);
        for decision in &plan.calls {
            let Action::Run { attempt, .. } = decision.action else { continue };
            let record = state.call(&decision.call).expect("a planned call is in the log");
            prop_assert_eq!(attempt.get(), record.bodies() + 1, "{:?}", decision);
            if record.bodies() > 0 {
                let tool = &record.call().tool;
                prop_assert_eq!(record.call().replay, Replay::Safe, "{:?}", decision);
                prop_assert_eq!(case.registry.policy(tool), Some(Replay::Safe), "{:?}", decision);
                prop_assert!(case.registry.check_args(tool, &record.call().args).passes());
            }
        }
    }

    #[test]
    fn no_attempt_exceeds_max_bodies(case in protocol_case()) {
        let plan = plan_case(&case);
        for decision in &plan.calls {
            if let Action::Run { attempt, .. } = decision.action {
                prop_assert!(attempt.get() >= 1 && attempt.get() <= case.config.max_bodies());
            }
        }
    }

    #[test]
    fn every_call_of_the_saved_step_appears_once_in_reply_order(case in protocol_case()) {
        let state = fold(&case.events);
        let plan = plan_case(&case);
        if plan.error.is_some() {
            prop_assert!(plan.calls.is_empty() && plan.appends.is_empty() && plan.step.is_none());
            return Ok(());
        }
        let expected: Vec<CallId> = state
            .saved_step()
            .map(|r| state.calls_of(r).iter().map(|c| c.id().clone()).collect())
            .unwrap_or_default();
        let planned: Vec<CallId> = plan.calls.iter().map(|c| c.call.clone()).collect();
        prop_assert_eq!(planned, expected);
        prop_assert_eq!(plan.step, state.saved_step().map(|r| r.step));
        let paired = paired_calls(&plan);
        let decided_pair: Vec<CallId> = plan
            .calls
            .iter()
            .filter(|c| matches!(c.action, Action::Pair { .. }))
            .map(|c| c.call.clone())
            .collect();
        prop_assert_eq!(paired, decided_pair);
    }

    #[test]
    fn after_the_appends_a_second_resume_pairs_nothing_already_paired(case in protocol_case()) {
        let first = plan_case(&case);
        prop_assume!(first.error.is_none());
        let mut events = case.events.clone();
        events.extend(first.appends.iter().cloned());
        let state = fold(&events);
        let second = plan_entry(&events, &Entry::Resume(ResumeMode::Continue), &case, 1);
        prop_assert!(second.error.is_none());
        for call in paired_calls(&second) {
            prop_assert!(!paired_calls(&first).contains(&call), "{} paired twice", call);
            let record = state.call(&call).expect("paired calls are in the log");
            prop_assert!(!record.is_resolved(), "{} was already resolved", call);
        }
    }

    #[test]
    fn after_a_redirect_or_a_stop_no_entry_makes_a_call_of_that_step_run(
        case in protocol_case(),
        redirect in any::<bool>(),
        later in prop::collection::vec(any::<prop::sample::Index>(), 1..4),
    ) {
        let closing = if redirect {
            Entry::Resume(ResumeMode::WithMessage { message: "instead".into() })
        } else {
            Entry::Stop
        };
        let closed = plan_entry(&case.events, &closing, &case, 1);
        prop_assume!(closed.error.is_none() && closed.step.is_some());
        let step_calls: Vec<CallId> = closed.calls.iter().map(|c| c.call.clone()).collect();
        let mut events = case.events.clone();
        events.extend(closed.appends.iter().cloned());
        // The run that followed may fail, so that a `retry` is accepted.
        if let Some(run) = fold(&events).last_run().map(|r| r.run.clone()) {
            events.push(Event::RunEnded(stepjournal_codec::RunEnded {
                run,
                outcome: RunOutcome::Failed,
                error: None, by: None,
            }));
        }
        for (n, pick) in later.iter().enumerate() {
            let entries = every_entry(&events);
            let entry = pick.get(&entries);
            let next = plan_entry(&events, entry, &case, n + 2);
            for decision in &next.calls {
                prop_assert!(
                    !(step_calls.contains(&decision.call) && decision.action.starts_work()),
                    "{:?} after {:?}: {:?}", entry, closing, decision
                );
            }
            prop_assert!(!next.appends.iter().any(|e| matches!(e, Event::Rewound(_))));
            events.extend(next.appends.iter().cloned());
        }
    }

    #[test]
    fn appends_come_in_the_order_format_md_gives(case in protocol_case()) {
        let plan = plan_case(&case);
        let order = |e: &Event| match e {
            Event::RunStarted(_) => 0,
            Event::Rewound(_) => 1,
            Event::Paired(_) => 2,
            Event::StepCommit(_) => 3,
            Event::Message(_) => 4,
            Event::RunEnded(_) => 5,
            _ => 9,
        };
        let ranks: Vec<u8> = plan.appends.iter().map(order).collect();
        prop_assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{:?}", plan.appends);
        prop_assert!(!ranks.contains(&9));
        let starts = ranks.iter().filter(|r| **r == 0).count();
        prop_assert_eq!(starts, usize::from(plan.error.is_none() && case.entry != Entry::Stop));
    }
}
