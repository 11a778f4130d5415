//! A private `redis-server` per test, on a free loopback port, that the test can stop, kill
//! (`SIGKILL`) and restart on the same port and directory.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::eventually::eventually_blocking;

/// A running (or stopped) redis-server owned by a test.
pub struct RedisServer {
    /// The port it listens on (127.0.0.1 only).
    pub port: u16,
    dir: tempfile::TempDir,
    extra: Vec<String>,
    child: Option<Child>,
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl RedisServer {
    /// Starts a server without persistence.
    pub fn start() -> RedisServer {
        Self::start_with(&["--save", "", "--appendonly", "no"])
    }

    /// Starts a server with extra arguments (e.g. `--appendonly yes --appendfsync always`).
    pub fn start_with(args: &[&str]) -> RedisServer {
        let mut server = RedisServer {
            port: free_port(),
            dir: tempfile::tempdir().expect("tempdir"),
            extra: args.iter().map(|a| a.to_string()).collect(),
            child: None,
        };
        server.launch();
        server
    }

    /// Starts a server without persistence that replicates `master` (`--replicaof`), once the
    /// master counts it as an online replica: a `WAIT 1` on the master is answered by it.
    pub fn start_replica_of(master: &RedisServer) -> RedisServer {
        let port = master.port.to_string();
        let replica = Self::start_with(&[
            "--save",
            "",
            "--appendonly",
            "no",
            "--replicaof",
            "127.0.0.1",
            &port,
        ]);
        let mut con = master.client();
        eventually_blocking(Duration::from_secs(20), "the replica to be online", || {
            redis::cmd("INFO")
                .arg("replication")
                .query::<String>(&mut con)
                .is_ok_and(|info| {
                    info.lines().any(|l| {
                        l.starts_with("slave")
                            && l.contains(&format!("port={}", replica.port))
                            && l.contains("state=online")
                    })
                })
        });
        replica
    }

    /// Starts a server in cluster mode that serves every slot alone: it refuses what a Redis
    /// Cluster refuses (`CROSSSLOT`: a command, a transaction or a script's declared keys in
    /// more than one slot), so the code that runs against it is checked to touch one slot per
    /// command, transaction and script.
    pub fn start_cluster_node() -> RedisServer {
        let server = Self::start_cluster_member(&[]);
        let mut con = server.client();
        let _: () = redis::cmd("CLUSTER")
            .arg("ADDSLOTSRANGE")
            .arg(0)
            .arg(16383)
            .query(&mut con)
            .expect("CLUSTER ADDSLOTSRANGE");
        eventually_blocking(
            Duration::from_secs(10),
            "the one-node cluster to be up",
            || {
                redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query::<String>(&mut con)
                    .is_ok_and(|info| info.contains("cluster_state:ok"))
            },
        );
        server
    }

    /// Starts a server in cluster mode that serves no slot yet (a node for
    /// [`crate::RedisCluster`]), with extra arguments, its cluster bus on a free port of its own.
    pub fn start_cluster_member(args: &[&str]) -> RedisServer {
        let mut server = RedisServer {
            port: free_port(),
            dir: tempfile::tempdir().expect("tempdir"),
            extra: [
                "--save",
                "",
                "--appendonly",
                "no",
                "--cluster-enabled",
                "yes",
            ]
            .iter()
            .chain(args)
            .map(|a| a.to_string())
            .collect(),
            child: None,
        };
        let conf = server.dir.path().join("nodes.conf");
        server.extra.push("--cluster-config-file".into());
        server.extra.push(conf.display().to_string());
        server.extra.push("--cluster-port".into());
        server.extra.push(free_port().to_string());
        server.launch();
        server
    }

    /// The URL clients connect to.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Whether it runs (not killed or stopped by the test).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// The server's working directory (AOF and RDB files).
    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// Starts the server on its port; one that exits at once (its port, picked free, was taken
    /// meanwhile by another test's server or connection) is started again on fresh ports.
    fn launch(&mut self) {
        for _ in 0..5 {
            if self.launch_here() {
                return;
            }
            self.port = free_port();
            if let Some(at) = self.extra.iter().position(|a| a == "--cluster-port") {
                self.extra[at + 1] = free_port().to_string();
            }
        }
        panic!("redis-server exited at start five times, on fresh ports each time");
    }

    /// Restarts the server on its own port: it must be free.
    fn relaunch(&mut self) {
        assert!(
            self.launch_here(),
            "redis-server did not start again on port {}",
            self.port
        );
    }

    /// Starts the server on its port and waits until it answers; `false` if it exited first.
    fn launch_here(&mut self) -> bool {
        let child = Command::new("redis-server")
            .arg("--port")
            .arg(self.port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--dir")
            .arg(self.dir.path())
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (scripts/test.sh installs it)");
        self.child = Some(child);
        let url = self.url();
        let child = &mut self.child;
        let pid = child.as_ref().map_or(0, |c| c.id());
        let up = eventually_blocking(Duration::from_secs(10), "redis-server to start", || {
            if child
                .as_mut()
                .is_some_and(|c| c.try_wait().ok().flatten().is_some())
            {
                return Some(false);
            }
            // This server, not another test's that took the port first.
            let process_id = format!("process_id:{pid}");
            redis::Client::open(url.as_str())
                .and_then(|client| client.get_connection())
                .is_ok_and(|mut con| {
                    redis::cmd("INFO")
                        .arg("server")
                        .query::<String>(&mut con)
                        .is_ok_and(|info| info.lines().any(|l| l.trim() == process_id))
                })
                .then_some(true)
        });
        if !up {
            self.child = None;
        }
        up
    }

    /// A blocking client connection (for tests that act as an outside service).
    pub fn client(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("connect to the test redis")
    }

    /// `SIGKILL`: no shutdown, no final fsync.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// A graceful stop (`SHUTDOWN`, which writes the AOF/RDB as configured).
    pub fn stop(&mut self) {
        let mut con = self.client();
        let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").query(&mut con);
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
    }

    /// Starts again on the same port and directory.
    pub fn restart(&mut self) {
        self.relaunch();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill9();
    }
}
