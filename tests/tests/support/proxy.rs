//! A loopback TCP proxy that cuts a connection at a chosen moment, for lost-connection tests.
//!
//! The cut is armed with a marker: the first client-to-server chunk containing it is either
//! dropped (the server never sees it) or forwarded with the server's reply dropped (the server
//! ran it, the client never hears back). Either way both sides of that connection are then
//! closed. The proxy can also refuse every new connection ("down").

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// When to cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Drop the chunk with the marker: the server never receives it.
    BeforeServer,
    /// Forward the chunk, then drop the server's reply: the server ran it.
    AfterServer,
}

#[derive(Default)]
struct Shared {
    armed: Mutex<Option<(Cut, Vec<u8>, bool)>>,
    down: AtomicBool,
    stop: AtomicBool,
    cuts: AtomicU32,
    streams: Mutex<Vec<TcpStream>>,
}

/// The proxy; stops and closes every connection when dropped.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    listener: Option<JoinHandle<()>>,
}

impl Proxy {
    /// A proxy on a free loopback port forwarding to `upstream`.
    pub fn start(upstream: SocketAddr) -> Self {
        Self::start_on(IpAddr::V4(Ipv4Addr::LOCALHOST), upstream)
    }

    /// A proxy on a free port of the local address `bind` (a veth's, for a network namespace's
    /// traffic) forwarding to `upstream`.
    pub fn start_on(bind: IpAddr, upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind(SocketAddr::new(bind, 0)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let handle = std::thread::spawn(move || accept_loop(listener, upstream, s));
        Proxy { addr, shared, listener: Some(handle) }
    }

    /// The proxy's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Arms one cut: the next client chunk containing `marker`. With `then_down`, the proxy
    /// refuses new connections from the moment of the cut.
    pub fn arm(&self, cut: Cut, marker: &[u8], then_down: bool) {
        *self.shared.armed.lock().unwrap() = Some((cut, marker.to_vec(), then_down));
    }

    /// Refuses (`true`) or accepts (`false`) new connections.
    pub fn set_down(&self, down: bool) {
        self.shared.down.store(down, Ordering::SeqCst);
    }

    /// Closes both sides of every connection made so far, as a link that died would end them
    /// (the server's side at once; the client's once it next hears from this end).
    pub fn cut_all(&self) {
        for s in self.shared.streams.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// How many cuts were made.
    pub fn cuts(&self) -> u32 {
        self.shared.cuts.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.listener.take() {
            let _ = h.join();
        }
        for s in self.shared.streams.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

fn accept_loop(listener: TcpListener, upstream: SocketAddr, shared: Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) => {
                if shared.down.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let _ = client.set_nonblocking(false);
                let Ok(server) = TcpStream::connect_timeout(&upstream, Duration::from_secs(5))
                else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                connect_pumps(client, server, &shared);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

fn connect_pumps(client: TcpStream, server: TcpStream, shared: &Arc<Shared>) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    {
        let mut streams = shared.streams.lock().unwrap();
        streams.push(client.try_clone().unwrap());
        streams.push(server.try_clone().unwrap());
    }
    let drop_reply = Arc::new(AtomicBool::new(false));
    let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let (sh, dr) = (shared.clone(), drop_reply.clone());
    std::thread::spawn(move || client_to_server(client, server, sh, dr));
    let sh = shared.clone();
    std::thread::spawn(move || server_to_client(s2, c2, sh, drop_reply));
}

fn close(a: &TcpStream, b: &TcpStream) {
    let _ = a.shutdown(Shutdown::Both);
    let _ = b.shutdown(Shutdown::Both);
}

fn client_to_server(
    mut client: TcpStream,
    mut server: TcpStream,
    shared: Arc<Shared>,
    drop_reply: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut recent: Vec<u8> = Vec::new();
    loop {
        let n = match client.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        recent.extend_from_slice(chunk);
        let cut = {
            let mut armed = shared.armed.lock().unwrap();
            let hit = armed.as_ref().is_some_and(|(_, marker, _)| {
                recent.windows(marker.len()).any(|w| w == marker.as_slice())
            });
            if hit { armed.take() } else { None }
        };
        let keep = recent.len().min(4096);
        recent.drain(..recent.len() - keep);
        match cut {
            None => {
                if server.write_all(chunk).is_err() {
                    break;
                }
            }
            Some((mode, _, then_down)) => {
                if then_down {
                    shared.down.store(true, Ordering::SeqCst);
                }
                shared.cuts.fetch_add(1, Ordering::SeqCst);
                match mode {
                    Cut::BeforeServer => break,
                    Cut::AfterServer => {
                        drop_reply.store(true, Ordering::SeqCst);
                        if server.write_all(chunk).is_err() {
                            break;
                        }
                        // The server-to-client side closes both once the reply arrives.
                    }
                }
            }
        }
    }
    close(&client, &server);
}

fn server_to_client(
    mut server: TcpStream,
    mut client: TcpStream,
    _shared: Arc<Shared>,
    drop_reply: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match server.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if drop_reply.load(Ordering::SeqCst) {
            // The server answered the cut chunk: it has run it. The client never hears.
            break;
        }
        if client.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    close(&server, &client);
}
