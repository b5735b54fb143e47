//! Every command line of docs/cli.md runs as written, in order, against the demo's journal: each
//! `$ ` line of a fenced block is run by `sh` in one scratch directory, with the `stepjournal`
//! cargo built for this test first on `PATH`. A line whose shown output has a `stepjournal:`
//! error line must fail; every other line must succeed; and each output's first word is the
//! page's.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A command of the page and the output it shows.
struct Example {
    line: String,
    shown: Vec<String>,
}

fn examples(page: &str) -> Vec<Example> {
    let mut out: Vec<Example> = Vec::new();
    let mut fenced = false;
    // Output lines belong to the command above them in the same block.
    let mut open = false;
    for line in page.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            open = false;
            continue;
        }
        if !fenced {
            continue;
        }
        if let Some(command) = line.strip_prefix("$ ") {
            out.push(Example { line: command.to_owned(), shown: Vec::new() });
            open = true;
        } else if let (true, Some(last)) = (open, out.last_mut()) {
            last.shown.push(line.to_owned());
        }
    }
    out
}

/// Runs `line` with `sh` in `dir`; killed (and the test failed) after two minutes.
fn run(line: &str, dir: &Path, path: &str) -> (i32, String) {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(line)
        .current_dir(dir)
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let readers = std::thread::spawn(move || {
        let mut o = String::new();
        let mut e = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut o).unwrap();
        std::io::Read::read_to_string(&mut stderr, &mut e).unwrap();
        o + &e
    });
    for _ in 0..1200 {
        if let Some(status) = child.try_wait().unwrap() {
            return (status.code().unwrap_or(-1), readers.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    panic!("`{line}` did not finish within two minutes");
}

/// The first word of the first line, at most 8 characters of it (what moves from run to run,
/// such as a JSON line's times, comes later).
fn first_word(text: &str) -> Option<String> {
    let word = text.lines().find(|l| !l.trim().is_empty())?.split_whitespace().next()?;
    Some(word.chars().take(8).collect())
}

#[test]
fn every_command_of_docs_cli_md_runs_as_written_against_the_demos_journal() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(manifest.join("../docs/cli.md")).unwrap();
    let examples = examples(&page);
    let commands = examples.iter().filter(|e| e.line.contains("stepjournal ")).count();
    assert!(commands >= 25, "only {commands} command lines found in docs/cli.md");
    assert!(examples[0].line.starts_with("stepjournal demo"), "the page starts with the demo");
    let bin = Path::new(env!("CARGO_BIN_EXE_stepjournal"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let dir = tempfile::tempdir().unwrap();
    for e in &examples {
        let (code, output) = run(&e.line, dir.path(), &path);
        let fails = e.shown.iter().any(|l| l.starts_with("stepjournal: "));
        if fails {
            assert_ne!(code, 0, "`{}` should fail as the page shows:\n{output}", e.line);
        } else {
            assert_eq!(code, 0, "`{}` failed:\n{output}", e.line);
        }
        let shown = e.shown.join("\n");
        if let Some(word) = first_word(&shown).filter(|w| w != "...") {
            assert_eq!(first_word(&output), Some(word), "`{}`:\n{output}", e.line);
        }
    }
}
