//! The MCP servers the MCP tests run: the reference servers from npm (pinned by
//! `tests/mcp/package-lock.json`) and a Python SDK server (`tests/mcp/exiting_server.py`, in the
//! venv `scripts/test.sh` makes under `target/.venv-mcp`). A missing one fails the test with a
//! message saying to run `scripts/test.sh`; nothing is skipped.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::eventually::eventually_blocking;

/// `tests/mcp`.
pub fn mcp_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp")
}

/// The entry point of the npm reference server `package` (`server-everything`,
/// `server-filesystem`).
pub fn node_server(package: &str) -> PathBuf {
    let path = mcp_dir()
        .join("node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    assert!(
        path.is_file(),
        "{} is missing: run scripts/test.sh (it runs npm ci --prefix tests/mcp)",
        path.display()
    );
    path
}

/// The Python of the venv that has the `mcp` package.
pub fn python() -> PathBuf {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/.venv-mcp/bin/python");
    let ok = Command::new(&python)
        .args(["-c", "import mcp.server.mcpserver"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} with the mcp package is missing: run scripts/test.sh",
        python.display()
    );
    python
}

/// A loopback port nobody listens on now (bound, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A child process killed when dropped.
pub struct ServerProcess(Child);

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// server-everything over streamable HTTP on a free loopback port; its endpoint URL.
pub fn start_everything_http() -> (ServerProcess, String) {
    for _ in 0..5 {
        let port = free_port();
        if let Some(server) = start_everything_http_on(port) {
            return (server, format!("http://127.0.0.1:{port}/mcp"));
        }
        // The port was taken meanwhile: another one.
    }
    panic!("server-everything did not listen over streamable HTTP");
}

/// server-everything over streamable HTTP on `port` (its endpoint is
/// `http://127.0.0.1:{port}/mcp`), once it listens; `None` if it exited first (the port is
/// taken).
pub fn start_everything_http_on(port: u16) -> Option<ServerProcess> {
    let child = Command::new("node")
        .arg(node_server("server-everything"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start node");
    listening(ServerProcess(child), port)
}

/// `tests/mcp/exiting_server.py` over streamable HTTP on `port` (its endpoint is
/// `http://127.0.0.1:{port}/mcp`), once it listens; `None` if it exited first.
pub fn start_python_http_on(port: u16) -> Option<ServerProcess> {
    let child = Command::new(python())
        .arg(mcp_dir().join("exiting_server.py"))
        .arg("--http")
        .arg(port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start python");
    listening(ServerProcess(child), port)
}

/// `server` once it accepts connections on `port` (within 15 s); `None` if it exited first.
fn listening(mut server: ServerProcess, port: u16) -> Option<ServerProcess> {
    let listens = eventually_blocking(
        Duration::from_secs(15),
        &format!("the MCP server to listen on port {port}"),
        || {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                Some(true)
            } else if server.0.try_wait().ok().flatten().is_some() {
                Some(false)
            } else {
                None
            }
        },
    );
    listens.then_some(server)
}
