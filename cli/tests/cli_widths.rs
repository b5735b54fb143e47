//! Widths computed from stored data are bounded: `show` and `calls` print a 65,536-character
//! tool name and call id whole, `sessions` a session id of the longest length allowed, and every
//! other row and column stays narrow.

mod cli_support;

use cli_support::*;
use stepjournal_codec::{CallKind, Entry, Replay};

#[test]
fn a_tool_name_of_65536_characters_is_shown_whole_and_nothing_panics() {
    // The defect: `show` and `calls` exited 101 ("Formatting argument out of range"): a column
    // padded to the widest stored name passed the formatter's bound on widths.
    let tool = "t".repeat(65_536);
    let id = "c".repeat(70_000);
    let stuck: Batches = vec![
        vec![run_started("r1", Entry::NewTurn { message: "go".into() }), message("go")],
        vec![
            reply(1, "cp1", "calling", vec![call(&id, &tool, Replay::Safe, CallKind::Tool)]),
            dispatch(&id, "d1"),
        ],
        vec![attempt(&id, 1)],
    ];
    let place = file_place();
    append_session(&*place.open(), "wide", &stuck, 1_700_000_000_000);
    // Beside it a session whose id is as long as ids may be: the `sessions` table's other rows
    // are not padded to it.
    let long = "s".repeat(1024);
    append_session(&*place.open(), &long, &stuck, 1_700_000_000_000);
    for args in [
        vec!["show", &place.url, "wide"],
        vec!["calls", &place.url, "wide"],
        vec!["sessions", &place.url],
    ] {
        let out = bin_ok(&args, 0);
        if args[0] == "sessions" {
            assert!(out.contains(&long), "sessions shows the long id whole");
        } else {
            assert!(out.contains(&tool), "{args:?} shows the tool's name whole");
        }
        let wide = |l: &&str| l.contains(&tool) || l.contains(&id) || l.contains(&long);
        for line in out.lines().filter(|l| !wide(l)) {
            assert!(
                line.chars().count() < 400,
                "{args:?}: a line padded wide: {} chars",
                line.len()
            );
        }
    }
    // The timeline page keeps both whole in its data and cuts them where it draws them.
    let page = bin_ok(&["view", &place.url, "wide", "-o", "-"], 0);
    assert!(page.contains(&format!("data-tool=\"{tool}\"")), "the lane's data keeps the name");
    let label = page.split("<div class=\"call-id\">").nth(1).unwrap().split("</div>").next();
    let label = label.unwrap();
    assert!(label.contains("... (65536 bytes)") && label.len() < 1000, "{}", label.len());
}
