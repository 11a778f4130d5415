//! A TCP relay on a free loopback port in front of a server, which a test can cut: every
//! connection through it is closed at once and new ones are refused, as when a live process
//! loses its network to Redis — the process runs on, and the server sees its connections
//! close, as it would those of a process killed. [`TcpCut::restore`] lets connections through
//! again, on the same port.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// The relay; cut on drop.
pub struct TcpCut {
    /// Where clients connect.
    pub port: u16,
    target: SocketAddr,
    state: Arc<State>,
}

#[derive(Default)]
struct State {
    /// Connections are refused and closed.
    cut: AtomicBool,
    /// Both ends of every connection relayed, to close them when cut.
    open: Mutex<Vec<TcpStream>>,
}

impl TcpCut {
    /// A relay to `127.0.0.1:target_port`.
    pub fn to(target_port: u16) -> TcpCut {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = listener.local_addr().expect("local address").port();
        let relay = TcpCut {
            port,
            target: SocketAddr::from(([127, 0, 0, 1], target_port)),
            state: Arc::new(State::default()),
        };
        relay.serve(listener);
        relay
    }

    /// `redis://127.0.0.1:<port>/`: a Redis URL through the relay.
    pub fn redis_url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Closes every connection through the relay and refuses new ones.
    pub fn cut(&self) {
        self.state.cut.store(true, Ordering::SeqCst);
        // Refused from now on: the accept loop ends once woken by a connection of our own.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        for s in self.state.open.lock().expect("open connections").drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Lets connections through again, on the same port.
    pub fn restore(&self) {
        let listener = (0..100)
            .find_map(|_| {
                TcpListener::bind(("127.0.0.1", self.port))
                    .map_err(|_| thread::sleep(Duration::from_millis(50)))
                    .ok()
            })
            .expect("bind the relay's port again");
        self.state.cut.store(false, Ordering::SeqCst);
        self.serve(listener);
    }

    fn serve(&self, listener: TcpListener) {
        let state = self.state.clone();
        let target = self.target;
        thread::spawn(move || {
            for client in listener.incoming() {
                if state.cut.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(target) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                if let (Ok(c), Ok(s)) = (client.try_clone(), server.try_clone()) {
                    let mut open = state.open.lock().expect("open connections");
                    open.push(c);
                    open.push(s);
                }
                pipe(&client, &server);
                pipe(&server, &client);
            }
            // The listener closes here: connecting is refused until restored.
        });
    }
}

/// Copies what `from` receives to `to` on a thread of its own, until either closes.
fn pipe(from: &TcpStream, to: &TcpStream) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}

impl Drop for TcpCut {
    fn drop(&mut self) {
        self.cut();
    }
}
