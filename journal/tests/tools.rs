//! Tools defined once: the registry recovery reads, the `tools` JSON, and the checks on the
//! model's calls before a reply is committed.
#![cfg(feature = "schema")]

use std::sync::Arc;

use serde_json::{Value, json};
use stepjournal::Refusal;
use stepjournal::backends::memory::MemoryStore;
use stepjournal::codec::{Call, CallKind, Entry, Replay, ToolName};
use stepjournal::recovery::ToolRegistry;
use stepjournal::registry::SchemaRegistry;
use stepjournal::{CallCtx, Journal, JournalOptions, Reply, ToolError, Tools};

fn tools() -> Tools {
    let noop = |_: Value, _: CallCtx| async { Ok::<_, ToolError>(json!(null)) };
    Tools::new()
        .tool(
            "set_preference",
            json!({"type": "object", "required": ["key"], "properties": {"key": {"type": "string"}}}),
            Replay::Safe,
            noop,
        )
        .approval_tool("send_email", json!({"type": "object"}), Replay::Unsafe, noop)
        .client_tool("pick_seat", json!({"type": "object"}))
        .local_agent("planner", json!({}), Replay::Safe, noop)
}

#[test]
fn a_call_takes_its_kind_and_policy_from_the_registry_never_from_the_caller() {
    let tools = tools();
    let call = tools.call("c1", "set_preference", json!({"key": "tz"})).unwrap();
    assert_eq!((call.kind, call.replay), (CallKind::Tool, Replay::Safe));
    // A call made by hand says otherwise; the registry's word is what is committed.
    let mut forged = Call::new("c2", "send_email", stepjournal::codec::RawJson::empty_object());
    forged.replay = Replay::Safe;
    forged.kind = CallKind::Tool;
    let reply = Reply::from_model(&tools, "", [forged.in_group("mail")]).unwrap();
    let checked = &reply.calls[0];
    assert_eq!((checked.kind, checked.replay), (CallKind::Approval, Replay::Unsafe));
    assert_eq!(checked.group.as_deref(), Some("mail"), "its place in the reply is kept");
    assert_eq!(tools.kind(&ToolName::from("pick_seat")), Some(CallKind::Client));
    assert_eq!(tools.kind(&ToolName::from("planner")), Some(CallKind::LocalAgent));
}

#[test]
fn an_unknown_tool_or_arguments_failing_the_schema_are_refused_before_anything_is_committed() {
    let tools = tools();
    let unknown = tools.call("c1", "launch_rocket", json!({})).unwrap_err();
    assert!(
        matches!(&unknown, Refusal::UnknownTool { tool, .. } if tool.as_str() == "launch_rocket")
    );
    let invalid = tools.call("c2", "set_preference", json!({"value": 1})).unwrap_err();
    let Refusal::InvalidArguments { call, reason, .. } = &invalid else { panic!("{invalid:?}") };
    assert_eq!(call.as_str(), "c2");
    assert!(reason.contains("key"), "{reason}");
    assert!(invalid.to_string().contains("`set_preference`"), "{invalid}");

    let store = Arc::new(MemoryStore::new());
    let journal =
        Journal::new(store.clone(), Arc::new(tools.clone()), JournalOptions::new()).unwrap();
    let session = stepjournal::codec::SessionId::new("s").unwrap();
    let run = journal.begin_run(&session, Entry::NewTurn { message: "hi".into() }).unwrap();
    let tail = run.tail();
    let bad = Call::new("c3", "set_preference", stepjournal::codec::RawJson::parse("[]").unwrap());
    assert!(matches!(tools.reply("", [bad]), Err(Refusal::InvalidArguments { .. })));
    assert_eq!(run.tail(), tail, "nothing was committed");
}

#[test]
fn the_tools_are_the_registry_recovery_reads_and_write_the_tools_json_plan_takes() {
    let tools = tools();
    let name = ToolName::from("set_preference");
    assert_eq!(tools.policy(&name), Some(Replay::Safe));
    assert_eq!(tools.policy(&ToolName::from("gone")), None);
    let good = stepjournal::codec::RawJson::parse(r#"{"key":"tz"}"#).unwrap();
    let bad = stepjournal::codec::RawJson::parse(r#"{"key":1}"#).unwrap();
    assert!(tools.check_args(&name, &good).passes());
    assert!(!tools.check_args(&name, &bad).passes());

    let written = tools.to_tools_json();
    assert_eq!(written["send_email"]["replay"], "unsafe");
    assert_eq!(written["set_preference"]["input_schema"]["required"], json!(["key"]));
    let read = SchemaRegistry::from_tools_json(&written).unwrap();
    assert_eq!(read.len(), 4);
    for tool in tools.names() {
        assert_eq!(read.policy(tool), tools.policy(tool), "{tool}");
    }
    assert_eq!(read.check_args(&name, &bad).passes(), tools.check_args(&name, &bad).passes());
}
