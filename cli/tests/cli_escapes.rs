//! Identifiers stored in a journal never reach the terminal raw: every C0 and C1 control, DEL,
//! the line separators and the bidirectional controls in session, run, checkpoint, call, tool,
//! group, dispatch and child ids (and in free text) are shown escaped by `sessions`, `show`,
//! `plan`, `verify` and the error messages; JSON output stays exact.

mod cli_support;

use cli_support::*;
use stepjournal_cli::show::{Style, render};
use stepjournal_codec::{
    ApprovalDecided, CallId, CallKind, ChildAttached, ClientAnswer, Entry, Event, ModelAborted,
    PairReason, RawJson, Record, Replay, RunEnded, RunOutcome, Seq, SessionId, Suspended,
    ToolResult, UnixMillis,
};

/// Every character that must not reach a terminal raw: C0, DEL, C1, the line and paragraph
/// separators and the bidirectional controls.
fn dangerous() -> Vec<char> {
    let mut v: Vec<char> = (0u32..0x20).chain(0x7f..0xa0).filter_map(char::from_u32).collect();
    v.extend(['\u{61c}', '\u{200e}', '\u{200f}', '\u{2028}', '\u{2029}']);
    v.extend('\u{202a}'..='\u{202e}');
    v.extend('\u{2066}'..='\u{2069}');
    v
}

/// `c` as JSON text inside a string: escaped where JSON requires it, raw otherwise.
fn json_char(c: char) -> String {
    let quoted = serde_json::Value::String(c.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_owned()
}

/// A stuck session whose every id holds `c`: a safe call started once (its plan runs it again
/// under its dispatch id) ahead of an unsafe call of the same group and a remote agent with its
/// child attached.
fn stuck_with(c: char) -> Batches {
    let id = |p: &str| format!("{p}{c}x");
    let mut safe = call(&id("c"), &id("tool"), Replay::Safe, CallKind::Tool);
    safe.group = Some(id("g").as_str().into());
    safe.args = RawJson::parse(&format!(r#"{{"a":"{}"}}"#, json_char(c))).unwrap();
    let mut unsafe_ = call(&id("u"), &id("mail"), Replay::Unsafe, CallKind::Tool);
    unsafe_.group = Some(id("g").as_str().into());
    let agent = call(&id("k"), &id("agent"), Replay::Unsafe, CallKind::RemoteAgent);
    vec![
        vec![run_started(&id("run"), Entry::NewTurn { message: id("m") }), message(&id("hello"))],
        vec![
            reply(1, &id("cp"), &id("text"), vec![safe, unsafe_, agent]),
            dispatch(&id("c"), &id("d")),
            dispatch(&id("u"), &id("d2")),
            dispatch(&id("k"), &id("d3")),
        ],
        vec![attempt(&id("c"), 1), chunk(&id("c"), 1, &id("out"))],
        vec![
            attempt(&id("k"), 1),
            ChildAttached {
                call: CallId::from(id("k").as_str()),
                child: SessionId::from_stored(id("child")),
            }
            .into(),
        ],
    ]
}

/// A session with every kind of event, each naming ids holding `c`, and a result for a call no
/// reply made (a protocol problem `verify` reports, naming the call).
fn everything_with(c: char) -> Batches {
    let id = |p: &str| format!("{p}{c}x");
    let mut b = stuck_with(c);
    b.push(vec![
        ToolResult {
            call: CallId::from(id("c").as_str()),
            attempt: 1.into(),
            output: RawJson::parse(&format!(r#"["{}"]"#, json_char(c))).unwrap(),
            is_error: false,
            metadata: None,
        }
        .into(),
        ToolResult {
            call: CallId::from(id("ghost").as_str()),
            attempt: 1.into(),
            output: RawJson::null(),
            is_error: true,
            metadata: None,
        }
        .into(),
        ApprovalDecided { call: CallId::from(id("u").as_str()), approved: false }.into(),
        ClientAnswer { call: CallId::from(id("u").as_str()), output: RawJson::empty_object() }
            .into(),
        paired(&id("u"), PairReason::OutcomeUnknown, &id("partial")),
        Suspended { calls: vec![CallId::from(id("k").as_str())] }.into(),
        ModelAborted { partial: id("cut"), continuation: None }.into(),
        commit(1, &id("cp2")),
        RunEnded {
            run: id("run").as_str().into(),
            outcome: RunOutcome::Failed,
            error: Some(id("e")),
            by: None,
        }
        .into(),
        run_started(
            &id("run2"),
            Entry::Retry { checkpoint: Some(id("cp").as_str().into()), message: Some(id("msg")) },
        ),
        Event::from(stepjournal_codec::Rewound { to: id("cp").as_str().into() }),
    ]);
    b
}

/// Fails naming the character when `text` holds any dangerous character but the newlines that
/// end its lines.
fn assert_clean(what: &str, c: char, text: &str) {
    for line in text.split('\n') {
        if let Some(bad) = line.chars().find(|ch| dangerous().contains(ch)) {
            panic!(
                "{what} with U+{:04X}: U+{:04X} reached the output raw: {line:?}",
                c as u32, bad as u32
            );
        }
    }
}

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = bin(args);
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), stderr(&out))
}

#[test]
fn stored_ids_holding_controls_or_bidi_overrides_are_shown_escaped_everywhere() {
    // Defect: ids stored in a journal reached the terminal raw: a session id holding
    // `ESC ] 0; ... BEL` retitled the window, `ESC [2J` cleared the screen, a newline forged
    // table rows, U+202E reversed the text after it, in `sessions`, `show`, `plan`, `verify`
    // and the error messages.
    // The writer refuses such session ids now (the session-id rule): the journal is written
    // byte by byte, as one written before the rule may be.
    let place = file_place();
    let chars = dangerous();
    let mut sessions = Vec::new();
    for (i, &c) in chars.iter().enumerate() {
        sessions.push((format!("s{c}{i:03}"), stuck_with(c)));
        sessions.push((format!("v{c}{i:03}"), everything_with(c)));
    }
    // The same sessions with a plain letter: what is shown of the others must have as many
    // lines.
    sessions.push(("zs".to_owned(), stuck_with('Z')));
    sessions.push(("zv".to_owned(), everything_with('Z')));
    sessions.sort_by(|a, b| a.0.cmp(&b.0));
    write_file_journal_unchecked(&place.path(), &sessions, T0);
    let url = place.url.clone();
    let (code, table, err) = run(&["sessions", &url]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(table.lines().count(), 3 + 2 * chars.len(), "one line per session: {table}");
    assert_clean("sessions", '?', &table);
    let (_, json, _) = run(&["sessions", &url, "--json"]);
    let listed: Vec<String> = json
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["session"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(listed.contains(&format!("s\u{1b}{:03}", 27)), "JSON output keeps ids exact");
    let resume = r#"{"kind":"resume","mode":"from_checkpoint","checkpoint":"nowhere"}"#;
    let commands = |session: &str| -> Vec<Vec<String>> {
        let of = |args: &[&str]| args.iter().map(|a| (*a).to_owned()).collect();
        if session.starts_with(['s', 'z']) && session != "zv" {
            vec![
                of(&["show", &url, session]),
                of(&["plan", &url, session, "--entry", "wake"]),
                of(&["plan", &url, session, "--entry", resume]),
            ]
        } else {
            vec![of(&["show", &url, session]), of(&["verify", &url, session])]
        }
    };
    let lines = |cmd: &[String]| {
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        run(&args)
    };
    let plain: Vec<Vec<usize>> = ["zs", "zv"]
        .iter()
        .map(|s| commands(s).iter().map(|cmd| lines(cmd).1.lines().count()).collect())
        .collect();
    // A NUL cannot be passed as an argument: its sessions are in the table above and in the
    // coloured timeline below.
    for (i, &c) in chars.iter().enumerate().filter(|(_, c)| **c != '\0') {
        for (kind, plain) in ["s", "v"].iter().zip(&plain) {
            let session = format!("{kind}{c}{i:03}");
            for (cmd, plain_lines) in commands(&session).iter().zip(plain) {
                let (_, out, err) = lines(cmd);
                assert_clean(&format!("{cmd:?}"), c, &out);
                assert_clean(&format!("{cmd:?} (stderr)"), c, &err);
                assert_eq!(
                    out.lines().count(),
                    *plain_lines,
                    "{cmd:?} with U+{:04X}: a line was forged:\n{out}",
                    c as u32
                );
            }
        }
    }
}

#[test]
fn ids_named_in_error_messages_are_shown_escaped() {
    // Defect: error messages quoted stored and typed ids raw (`stepjournal: session `...` is
    // not in ...`, `... already exist there (...)`).
    let dir = tempfile::tempdir().unwrap();
    let place = file_place();
    let sessions: Vec<(String, Batches)> = ['\u{1b}', '\n', '\u{202e}', '\u{9b}', '\u{7}']
        .into_iter()
        .map(|c| (format!("s{c}x"), stuck_with(c)))
        .collect();
    write_file_journal_unchecked(&place.path(), &sessions, T0);
    let export = run(&["export", &place.url]).1;
    let file = dir.path().join("all.jsonl");
    std::fs::write(&file, &export).unwrap();
    let (code, _, err) = run(&["import", file.to_str().unwrap(), "--to", &place.url]);
    assert_eq!(code, Some(2), "{err}");
    // Their ids break the session-id rule: the import refuses the first, naming its line.
    assert!(err.contains("line 2: invalid session id"), "{err}");
    assert_clean("import's refusal", '?', &err);
    assert_eq!(err.lines().count(), 1, "{err}");
    for c in ['\u{1b}', '\n', '\u{202e}', '\u{9b}', '\u{7}', '\u{7f}'] {
        let session = format!("gone{c}]0;pwned\u{7}");
        for cmd in [
            vec!["show", place.url.as_str(), session.as_str()],
            vec!["plan", place.url.as_str(), session.as_str(), "--entry", "wake"],
            vec!["verify", place.url.as_str(), session.as_str()],
            vec!["export", place.url.as_str(), session.as_str()],
        ] {
            let (code, _, err) = run(&cmd);
            assert_eq!(code, Some(2), "{cmd:?}: {err}");
            assert!(err.contains("is not in"), "{cmd:?}: {err}");
            assert_clean(&format!("{cmd:?}"), c, &err);
            assert_eq!(err.lines().count(), 1, "{cmd:?}: {err}");
        }
    }
}

#[test]
fn a_coloured_timeline_holds_only_its_own_colour_codes() {
    // Defect: with colour on, `show` painted stored ids raw between its own escape sequences.
    for c in dangerous() {
        let records: Vec<Record> = everything_with(c)
            .concat()
            .into_iter()
            .enumerate()
            .map(|(i, event)| Record {
                session: SessionId::new("s").unwrap(),
                seq: Seq(i as u64),
                at: UnixMillis(T0 + i as u64 * 1000),
                event,
            })
            .collect();
        let mut out = Vec::new();
        render(&records, Style::COLOUR, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        // Take out the colour codes `show` writes (ESC [ digits and semicolons m); nothing
        // dangerous may be left.
        let mut rest = text.as_str();
        let mut bare = String::new();
        while let Some(i) = rest.find('\u{1b}') {
            bare.push_str(&rest[..i]);
            let tail = &rest[i + 1..];
            let end = tail.find('m').unwrap();
            let code = &tail[..end];
            assert!(
                code.starts_with('[')
                    && code[1..].chars().all(|ch| ch.is_ascii_digit() || ch == ';'),
                "U+{:04X}: an escape sequence that is not a colour: {code:?}",
                c as u32
            );
            rest = &tail[end + 1..];
        }
        bare.push_str(rest);
        assert_clean("show (colour)", c, &bare);
    }
}
