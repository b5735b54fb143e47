//! The `tracing` feature: a run, each step driven and each body have a span carrying the
//! session, the run, the step, the call, its dispatch id and attempt.
#![cfg(feature = "tracing")]

mod drive_support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use drive_support::*;
use serde_json::json;
use stepjournal::backends::memory::MemoryStore;
use stepjournal::codec::{Entry, SessionId};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// A span as the recorder saw it made.
#[derive(Debug, Clone)]
struct Made {
    id: u64,
    name: &'static str,
    parent: Option<u64>,
    fields: Vec<(String, String)>,
}

impl Made {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// An event's fields, name and value.
type Fieldset = Vec<(String, String)>;

/// A subscriber that records every span made and every event.
#[derive(Clone, Default)]
struct Recorder {
    spans: Arc<Mutex<Vec<Made>>>,
    events: Arc<Mutex<Vec<Fieldset>>>,
    next: Arc<AtomicU64>,
}

impl Recorder {
    /// The events whose message is `message`, each as its fields.
    fn events(&self, message: &str) -> Vec<Fieldset> {
        let events = self.events.lock().unwrap();
        events
            .iter()
            .filter(|fields| fields.iter().any(|(n, v)| n == "message" && v == message))
            .cloned()
            .collect()
    }
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

struct Fields<'a>(&'a mut Vec<(String, String)>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().to_owned(), value.to_owned()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let mut fields = Vec::new();
        span.record(&mut Fields(&mut fields));
        let parent = span.parent().map(Id::into_u64);
        self.spans.lock().unwrap().push(Made { id, name: span.metadata().name(), parent, fields });
        Id::from_u64(id)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Vec::new();
        event.record(&mut Fields(&mut fields));
        self.events.lock().unwrap().push(fields);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn a_run_its_driven_step_and_each_body_have_spans_carrying_their_ids() {
    let recorder = Recorder::default();
    let ledger = Ledger::default();
    let tools = tools(&ledger);
    let journal = journal(Arc::new(MemoryStore::new()), &tools, ids());
    let s = SessionId::new("s-1").unwrap();
    tracing::subscriber::with_default(recorder.clone(), || {
        run(async {
            let run =
                journal.begin_run_async(&s, Entry::NewTurn { message: "hi".into() }).await.unwrap();
            let call = tools.call("c1", "search", json!({"q": "x"})).unwrap();
            let step = run.commit_reply_async(tools.reply("", [call]).unwrap()).await.unwrap();
            step.drive(&tools).await.unwrap();
        })
    });
    let spans = recorder.spans.lock().unwrap().clone();
    let find = |name: &str| {
        spans
            .iter()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("no {name} span in {spans:?}"))
    };
    let (run, step, body) = (find("run"), find("step"), find("body"));
    assert_eq!(run.field("session"), Some("s-1"));
    assert_eq!(run.field("run"), Some("run-1"));
    assert_eq!(run.field("entry"), Some("new_turn"));
    assert_eq!((step.field("session"), step.field("step")), (Some("s-1"), Some("1")));
    assert_eq!(step.parent, Some(run.id));
    assert_eq!(body.field("call"), Some("c1"));
    assert_eq!(body.field("dispatch"), Some("d-1"));
    assert_eq!(body.field("attempt"), Some("1"));
    assert_eq!(body.parent, Some(run.id));
}

#[test]
fn fencing_refusals_recovery_decisions_and_letting_go_are_events_with_their_ids() {
    let recorder = Recorder::default();
    let ledger = Ledger::default();
    let tools = tools(&ledger);
    let store: Arc<dyn stepjournal::backends::JournalStore> = Arc::new(MemoryStore::new());
    let separate = |store: &Arc<dyn stepjournal::backends::JournalStore>| {
        let handle: Arc<dyn stepjournal::backends::JournalStore> =
            Arc::new(stepjournal::backends::SeparateProcess(store.clone()));
        handle
    };
    let first = journal(separate(&store), &tools, ids());
    let b_ids = Arc::new(stepjournal::writer::SequentialIds::with_prefix("b"));
    let second = journal(separate(&store), &tools, b_ids);
    let s = SessionId::new("s-1").unwrap();
    tracing::subscriber::with_default(recorder.clone(), || {
        run(async {
            let run =
                first.begin_run_async(&s, Entry::NewTurn { message: "hi".into() }).await.unwrap();
            let calls = [
                tools.call("c1", "send_email", json!({})).unwrap(),
                tools.call("c1", "send_email", json!({})).unwrap(),
            ];
            let repeated =
                stepjournal::Reply::new("twice").call(calls[0].clone()).call(calls[1].clone());
            assert!(run.commit_reply_async(repeated).await.is_err());
            let step = run.commit_reply_async(tools.reply("", [calls[0].clone()]).unwrap());
            let step = step.await.unwrap();
            drop(step.start_body_async(&"c1".into()).await.unwrap());
            // Another process wakes the session: the unsafe call is in doubt.
            let woken = second.begin_run_async(&s, Entry::Wake).await.unwrap();
            assert!(run.fail_async(None).await.is_err(), "the first run is fenced");
            let report = second.shutdown(std::time::Duration::ZERO).await;
            assert_eq!(report.abandoned, std::slice::from_ref(&s));
            drop(woken);
        })
    });
    let refused = recorder.events("write refused");
    let repeated = refused.iter().find(|e| field(e, "refusal") == Some("repeated_call"));
    assert!(repeated.is_some_and(|e| field(e, "session") == Some("s-1")), "{refused:?}");
    let decided = recorder.events("recovery decided");
    assert_eq!(field(&decided[0], "call"), Some("c1"), "{decided:?}");
    assert_eq!(field(&decided[0], "action"), Some("pair"));
    assert_eq!(field(&decided[0], "entry"), Some("wake"));
    let fenced = recorder.events("write fenced");
    assert_eq!(field(&fenced[0], "run"), Some("run-1"), "{fenced:?}");
    assert!(field(&fenced[0], "by").is_some_and(|b| b.contains("began through `wake`")));
    let let_go = recorder.events("run let go");
    assert_eq!(field(&let_go[0], "run"), Some("b-run-1"), "{let_go:?}");
    assert!(field(&let_go[0], "why").is_some_and(|w| w.contains("shut down")));
}
