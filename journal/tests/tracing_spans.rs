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

/// A subscriber that records every span made.
#[derive(Clone, Default)]
struct Recorder {
    spans: Arc<Mutex<Vec<Made>>>,
    next: Arc<AtomicU64>,
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
    fn event(&self, _: &Event<'_>) {}
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
