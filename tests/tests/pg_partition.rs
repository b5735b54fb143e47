//! Two runtime hosts against one PostgreSQL, each in a network namespace of its own: host A runs
//! a body and is cut off in the middle of it; host B wakes the session and recovers it; when A's
//! link comes back, its late output and result are refused (`Fenced`) and nothing of A's lands
//! after B's `run_started`. The server listens on loopback only, which inside a namespace is the
//! namespace's own: each host reaches it through a forwarder (the tests' proxy) bound on the
//! root end of its veth pair. Traffic flows only between these namespaces and the local server.
//! Needs root and iproute2's `ip` (else reported ignored, with the reason) and
//! `STEPJOURNAL_PG_URL`.
#![cfg(feature = "postgres")]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use stepjournal_backends::JournalStore;
use stepjournal_backends::postgres::PostgresOptions;
use stepjournal_codec::{Event, SessionId};
use stepjournal_tests::watchdog::hung;
use support::pg::{self, PgFixture};
use support::proxy::Proxy;

/// Runs `ip ARGS`, failing the test with its error output.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// A network namespace joined to the root namespace by a veth pair: `root` is the address of
/// the root end, the namespace's end is `root + 1`, on a /30 of link-local addresses.
struct Host {
    ns: String,
    inner: String,
    root: Ipv4Addr,
}

/// The namespaces and veths this test made; every one is removed when dropped, whatever the
/// test's outcome (deleting a namespace deletes its veth end, and with it the root end).
struct Net {
    hosts: Vec<Host>,
}

impl Drop for Net {
    fn drop(&mut self) {
        for host in &self.hosts {
            let _ = Command::new("ip").args(["netns", "del", &host.ns]).status();
            let root = format!("{}r", host.inner);
            let _ = Command::new("ip").args(["link", "del", &root]).stderr(Stdio::null()).status();
        }
    }
}

impl Net {
    /// Makes hosts `a` and `b`.
    fn make() -> Net {
        let pid = std::process::id();
        let octet = 16 + (pid % 200) as u8;
        let mut net = Net { hosts: Vec::new() };
        for (i, name) in ["a", "b"].into_iter().enumerate() {
            let host = Host {
                ns: format!("sjpart-{pid}-{name}"),
                inner: format!("sj{}{name}", pid % 100_000),
                root: Ipv4Addr::new(169, 254, octet, 4 * i as u8 + 1),
            };
            let root_end = format!("{}r", host.inner);
            let inner_addr = Ipv4Addr::from(u32::from(host.root) + 1);
            // Registered before it is made, so that a failure half-way is cleaned up too.
            net.hosts.push(Host {
                ns: host.ns.clone(),
                inner: host.inner.clone(),
                root: host.root,
            });
            ip(&["netns", "add", &host.ns]);
            ip(&["link", "add", &root_end, "type", "veth", "peer", "name", &host.inner]);
            ip(&["link", "set", &host.inner, "netns", &host.ns]);
            ip(&["addr", "add", &format!("{}/30", host.root), "dev", &root_end]);
            ip(&["link", "set", &root_end, "up"]);
            let inside = |args: &[&str]| {
                let mut all = vec!["netns", "exec", &host.ns, "ip"];
                all.extend_from_slice(args);
                ip(&all);
            };
            inside(&["addr", "add", &format!("{inner_addr}/30"), "dev", &host.inner]);
            inside(&["link", "set", &host.inner, "up"]);
            inside(&["link", "set", "lo", "up"]);
        }
        net
    }

    fn host(&self, i: usize) -> &Host {
        &self.hosts[i]
    }
}

impl Host {
    /// Takes the namespace's end of the link down (`false`) or up (`true`).
    fn link(&self, up: bool) {
        let state = if up { "up" } else { "down" };
        ip(&["netns", "exec", &self.ns, "ip", "link", "set", &self.inner, state]);
    }

    /// Whether a connection of the namespace to `to` is trying to send across the dead link:
    /// bytes written and not acknowledged (an append in flight), or a connection being opened.
    fn sending_to(&self, to: Ipv4Addr) -> bool {
        let dst = to.to_string();
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns, "ss", "-tnH", "state", "all", "dst", &dst])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).lines().any(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let unacked = cols.get(2).and_then(|q| q.parse::<u64>().ok()).is_some_and(|q| q > 0);
            unacked || cols.first() == Some(&"SYN-SENT")
        })
    }

    /// Starts `pg_host ROLE URL SESSION` inside the namespace.
    fn spawn(&self, role: &str, url: &str, session: &str) -> (Child, Receiver<String>) {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.ns, env!("CARGO_BIN_EXE_pg_host"), role, url, session])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let lines = lines_of(child.stdout.take().unwrap());
        (child, lines)
    }
}

fn lines_of(stdout: ChildStdout) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The next line from a host, within a hang watchdog's limit.
fn next_line(lines: &Receiver<String>, what: &str) -> String {
    let limit = Duration::from_secs(120);
    lines.recv_timeout(limit).unwrap_or_else(|e| panic!("{} ({e})", hung(what, limit)))
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
#[cfg_attr(
    not(stepjournal_netns),
    ignore = "network namespaces cannot be made here: the test needs root and iproute2's `ip`"
)]
fn a_partitioned_hosts_late_output_and_result_are_refused_after_another_host_recovers() {
    let net = Net::make();
    let schema = pg::fresh_schema("partition");
    let direct = PgFixture::at(&pg::url(), &schema, PostgresOptions::default());
    let (a, b) = (net.host(0), net.host(1));
    let proxy_a = Proxy::start_on(IpAddr::V4(a.root), pg::server_addr());
    let proxy_b = Proxy::start_on(IpAddr::V4(b.root), pg::server_addr());
    // Host A gives the database a minute to come back before calling an append's outcome
    // unknown: the partition below is shorter.
    let url_of = |proxy: &Proxy| {
        let url = pg::with_param(&pg::url_via(proxy.addr()), "schema", &schema);
        pg::with_param(&url, "resolve_timeout", "60000")
    };
    let session = "partitioned";

    let (mut host_a, from_a) = a.spawn("a", &url_of(&proxy_a), session);
    assert_eq!(next_line(&from_a, "host A's body starting"), "body-started");

    // The partition: A's link goes down, and its connections end (as a dead link's time out).
    a.link(false);
    proxy_a.cut_all();
    proxy_a.set_down(true);

    let (host_b, from_b) = b.spawn("b", &url_of(&proxy_b), session);
    let plan = next_line(&from_b, "host B's wake");
    assert!(plan.starts_with("plan: Run"), "B reruns the safe call: {plan}");
    assert_eq!(next_line(&from_b, "host B's recovery"), "recovered");
    assert!(host_b.wait_with_output().unwrap().status.success(), "host B failed");

    // A finishes its body late, still cut off: its link comes back once its late write is seen
    // trying to cross the dead link.
    host_a.stdin.as_mut().unwrap().write_all(b"finish\n").unwrap();
    assert_eq!(next_line(&from_a, "host A finishing"), "finishing");
    let limit = Duration::from_secs(60);
    let watching = std::time::Instant::now();
    while !a.sending_to(a.root) {
        assert!(watching.elapsed() < limit, "{}", hung("host A's late write", limit));
        std::thread::sleep(Duration::from_millis(5));
    }
    a.link(true);
    proxy_a.set_down(false);
    assert_eq!(next_line(&from_a, "host A's late output"), "output: fenced");
    assert_eq!(next_line(&from_a, "host A's late result"), "result: fenced");
    assert!(host_a.wait().unwrap().success(), "host A failed");

    let log = direct.read_all(&SessionId::new(session).unwrap()).unwrap();
    let starts: Vec<usize> = log
        .iter()
        .enumerate()
        .filter(|(_, r)| matches!(r.event, Event::RunStarted(_)))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(starts.len(), 2, "A's run and B's wake: {log:?}");
    let a_run = match &log[starts[0]].event {
        Event::RunStarted(e) => e.run.clone(),
        _ => unreachable!(),
    };
    for r in &log[starts[1]..] {
        match &r.event {
            Event::OutputChunk(c) => panic!("an output chunk after B's run began: {c:?}"),
            Event::ToolResult(t) => {
                assert_eq!(t.output.get(), r#""b's result""#, "only B's result lands");
            }
            Event::RunEnded(e) => assert_ne!(e.run, a_run, "A's run did not end after B's start"),
            _ => {}
        }
    }
    let events: Vec<Event> = log.into_iter().map(|r| r.event).collect();
    let problems = stepjournal::recovery::verify(&events);
    assert!(problems.is_empty(), "{problems:?}");
    drop((proxy_a, proxy_b, direct));
    drop(net);
}
