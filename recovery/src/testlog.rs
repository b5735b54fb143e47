//! A small builder of protocol-shaped logs for the unit tests.

use stepjournal_codec::*;

use crate::{Config, MemoryRegistry, NewRun, Plan, fold, plan};

/// A call of kind `tool`, unsafe, with no group.
pub fn call(id: &str, tool: &str) -> Call {
    Call {
        call: CallId::new(id),
        tool: ToolName::new(tool),
        args: RawJson::empty_object(),
        kind: CallKind::Tool,
        replay: Replay::Unsafe,
        group: None,
        sequential: false,
    }
}

pub trait CallExt {
    fn safe(self) -> Self;
    fn kind(self, kind: CallKind) -> Self;
    fn group(self, group: &str) -> Self;
    fn sequential(self) -> Self;
}

impl CallExt for Call {
    fn safe(mut self) -> Self {
        self.replay = Replay::Safe;
        self
    }
    fn kind(mut self, kind: CallKind) -> Self {
        self.kind = kind;
        self
    }
    fn group(mut self, group: &str) -> Self {
        self.group = Some(group.to_owned());
        self
    }
    fn sequential(mut self) -> Self {
        self.sequential = true;
        self
    }
}

#[derive(Debug, Clone, Default)]
pub struct Log {
    pub events: Vec<Event>,
}

impl Log {
    /// A session whose first run began with a new turn.
    pub fn new() -> Self {
        Log::default()
            .run("r1", Entry::NewTurn { message: "hello".into() })
            .push(Event::Message(Message { role: Role::User, text: "hello".into() }))
    }

    pub fn push(mut self, event: Event) -> Self {
        self.events.push(event);
        self
    }

    /// The snapshot of the log so far.
    pub fn snapshot(self) -> Self {
        let snapshot = crate::fold(&self.events).snapshot();
        match snapshot {
            Some(s) => self.push(Event::from(s)),
            None => panic!("no snapshot: the log has a saved step"),
        }
    }

    pub fn run(self, run: &str, entry: Entry) -> Self {
        self.push(Event::RunStarted(RunStarted { run: RunId::new(run), entry, by: None }))
    }

    /// A reply and each call's `dispatch_minted` (`d` + the call id).
    pub fn reply(mut self, step: u64, checkpoint: &str, calls: Vec<Call>) -> Self {
        let ids: Vec<CallId> = calls.iter().map(|c| c.call.clone()).collect();
        self = self.push(Event::ReplyCommitted(ReplyCommitted {
            step: StepNo(step),
            checkpoint: CheckpointId::new(checkpoint),
            text: String::new(),
            calls,
            metadata: None,
        }));
        for id in ids {
            let dispatch = DispatchId::new(format!("d{id}"));
            self = self.push(Event::DispatchMinted(DispatchMinted { call: id, dispatch }));
        }
        self
    }

    pub fn attempt(self, call: &str, attempt: u32) -> Self {
        self.push(Event::AttemptStarted(AttemptStarted {
            call: CallId::new(call),
            attempt: Attempt(attempt),
        }))
    }

    /// `n` bodies: attempts 1..=n.
    pub fn bodies(mut self, call: &str, n: u32) -> Self {
        for a in 1..=n {
            self = self.attempt(call, a);
        }
        self
    }

    pub fn chunk(self, call: &str, attempt: u32, text: &str) -> Self {
        self.push(Event::OutputChunk(OutputChunk {
            call: CallId::new(call),
            attempt: Attempt(attempt),
            text: text.into(),
        }))
    }

    pub fn result(self, call: &str, attempt: u32) -> Self {
        self.push(Event::ToolResult(ToolResult {
            call: CallId::new(call),
            attempt: Attempt(attempt),
            output: RawJson::parse(r#"{"ok":true}"#).unwrap(),
            is_error: false,
            metadata: None,
        }))
    }

    pub fn answer(self, call: &str) -> Self {
        self.push(Event::ClientAnswer(ClientAnswer {
            call: CallId::new(call),
            output: RawJson::parse(r#""picked""#).unwrap(),
        }))
    }

    pub fn approval(self, call: &str, approved: bool) -> Self {
        self.push(Event::ApprovalDecided(ApprovalDecided { call: CallId::new(call), approved }))
    }

    pub fn child(self, call: &str, child: &str) -> Self {
        self.push(Event::ChildAttached(ChildAttached {
            call: CallId::new(call),
            child: SessionId::new(child).unwrap(),
        }))
    }

    pub fn paired(self, call: &str, reason: PairReason) -> Self {
        self.push(Event::Paired(Paired {
            call: CallId::new(call),
            reason,
            message: String::new(),
            partial: String::new(),
            rule: None,
        }))
    }

    pub fn commit(self, step: u64, checkpoint: &str) -> Self {
        self.push(Event::StepCommit(StepCommit {
            step: StepNo(step),
            checkpoint: CheckpointId::new(checkpoint),
        }))
    }

    pub fn ended(self, run: &str, outcome: RunOutcome) -> Self {
        self.push(Event::RunEnded(RunEnded {
            run: RunId::new(run),
            outcome,
            error: None,
            by: None,
        }))
    }

    pub fn rewound(self, to: &str) -> Self {
        self.push(Event::Rewound(Rewound { to: CheckpointId::new(to) }))
    }

    /// Plans `entry` over this log with `max_bodies` 3.
    pub fn plan(&self, entry: Entry, registry: &MemoryRegistry) -> Plan {
        self.plan_with(entry, registry, Config::default())
    }

    pub fn plan_with(&self, entry: Entry, registry: &MemoryRegistry, config: Config) -> Plan {
        let new_run = NewRun {
            run: RunId::new("r-new"),
            entry,
            commit_checkpoint: CheckpointId::new("cp-new-commit"),
        };
        plan(&fold(&self.events), &new_run, registry, &config)
    }

    /// This log with a plan's appends written after it.
    pub fn with_appends(mut self, plan: &Plan) -> Self {
        self.events.extend(plan.appends.iter().cloned());
        self
    }
}

pub fn wake() -> Entry {
    Entry::Wake
}

pub fn resume() -> Entry {
    Entry::Resume(ResumeMode::Continue)
}

pub fn retry() -> Entry {
    Entry::Retry { checkpoint: None, message: None }
}

pub fn from_checkpoint(checkpoint: &str) -> Entry {
    Entry::Resume(ResumeMode::FromCheckpoint { checkpoint: CheckpointId::new(checkpoint) })
}

pub fn with_message(message: &str) -> Entry {
    Entry::Resume(ResumeMode::WithMessage { message: message.into() })
}

/// The registry: `safe_tool` safe, `unsafe_tool` unsafe, `strict` safe but rejecting arguments.
pub fn registry() -> MemoryRegistry {
    MemoryRegistry::new()
        .with_tool("safe_tool", Replay::Safe)
        .with_tool("unsafe_tool", Replay::Unsafe)
        .with_rejecting_tool("strict", Replay::Safe, "`scope` is required")
}

/// The decision for `call` as (action name, rule id).
pub fn decision(plan: &Plan, call: &str) -> (crate::Action, &'static str) {
    let c = plan
        .call(&CallId::new(call))
        .unwrap_or_else(|| panic!("no decision for {call} in {plan:#?}"));
    (c.action.clone(), c.rule.id)
}

/// The types of the plan's appends.
pub fn append_types(plan: &Plan) -> Vec<&'static str> {
    plan.appends.iter().map(|e| e.kind().name()).collect()
}

/// Every entry kind as a new run (`r-new-N`), and for each of `checkpoints` a `from_checkpoint`
/// (and, with `retries`, a `retry` with a message naming it): what the agreement properties'
/// tests plan.
pub fn entries_naming(checkpoints: &[&str], retries: bool) -> Vec<NewRun> {
    let mut entries = vec![
        Entry::Wake,
        resume(),
        retry(),
        with_message("again"),
        Entry::NewTurn { message: "next".into() },
        Entry::Stop,
        Entry::Retry { checkpoint: None, message: Some("m".into()) },
    ];
    for cp in checkpoints {
        entries.push(from_checkpoint(cp));
        if retries {
            entries.push(Entry::Retry {
                checkpoint: Some(CheckpointId::new(*cp)),
                message: Some("m".into()),
            });
        }
    }
    (entries.into_iter().enumerate())
        .map(|(i, entry)| NewRun {
            run: RunId::new(format!("r-new-{i}")),
            entry,
            commit_checkpoint: CheckpointId::new(format!("cp-new-{i}")),
        })
        .collect()
}
