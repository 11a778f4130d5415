//! A private Redis Cluster per test — three masters and three replicas on free loopback ports,
//! each a [`RedisServer`] in a temporary directory, joined by `redis-cli --cluster create` —
//! stopped when dropped; and [`TestRedis`], the Redis a suite runs on: one server, or (with
//! `AGENTD_TEST_REDIS=cluster`) such a cluster.

use crate::RedisServer;
use crate::eventually::eventually_blocking;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The environment variable that runs the Redis suites on a cluster: `AGENTD_TEST_REDIS=cluster`.
pub const TEST_REDIS_VAR: &str = "AGENTD_TEST_REDIS";

/// A running Redis Cluster owned by a test.
pub struct RedisCluster {
    /// Its nodes; the first three were made masters, each of the next three a replica of one,
    /// any later one a further replica ([`Self::add_replica`]).
    nodes: Vec<RedisServer>,
    /// The arguments every node was started with.
    args: Vec<String>,
}

/// A master's port and the slot ranges it serves.
type MasterSlots = (u16, Vec<(u16, u16)>);

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone)]
pub struct ClusterNode {
    /// The node's id.
    pub id: String,
    /// Its client port.
    pub port: u16,
    /// Whether it is a master.
    pub master: bool,
    /// Slots it serves (masters), as ranges.
    pub slots: Vec<(u16, u16)>,
}

impl RedisCluster {
    /// Masters of a test cluster.
    pub const MASTERS: usize = 3;

    /// Starts three masters and three replicas, joins them and waits until every node says
    /// `cluster_state:ok`. A node's failure is noticed after 3 s (less gives spurious failovers
    /// on a loaded 2-core machine), and replicas never fail over by themselves.
    pub fn start() -> RedisCluster {
        Self::start_with(&[
            "--cluster-node-timeout",
            "3000",
            "--cluster-replica-no-failover",
            "yes",
        ])
    }

    /// Starts three masters and three replicas as [`Self::start`] does, but whose replicas fail
    /// over: a master that stops answering for the node timeout (3 s) is replaced by its
    /// replica (the failover tests).
    pub fn start_failing_over() -> RedisCluster {
        Self::start_with(&["--cluster-node-timeout", "3000"])
    }

    /// `SIGKILL` of the node on `port` (no shutdown, no last replication).
    pub fn kill9_node(&mut self, port: u16) {
        if let Some(node) = self.nodes.iter_mut().find(|n| n.port == port) {
            node.kill9();
        }
    }

    /// Starts the node on `port` again, on its port and directory (its `nodes.conf` kept): a
    /// master replaced by its replica meanwhile comes back as that replica's replica.
    pub fn restart_node(&mut self, port: u16) {
        if let Some(node) = self.nodes.iter_mut().find(|n| n.port == port) {
            node.restart();
        }
    }

    /// Waits until the master on `port` has a replica online (that a `WAIT 1` counts).
    pub fn wait_replica_online(&self, port: u16, within: Duration) {
        let mut con = self.node_client(port);
        eventually_blocking(within, "a replica online", || {
            redis::cmd("INFO")
                .arg("replication")
                .query::<String>(&mut con)
                .is_ok_and(|info| {
                    info.lines()
                        .any(|l| l.starts_with("slave") && l.contains("state=online"))
                })
        });
    }

    /// Waits until the slots the dead node on `port` served are served by a running node and
    /// every running node says `cluster_state:ok` (its replica was promoted).
    pub fn wait_failed_over(&self, port: u16, within: Duration) {
        eventually_blocking(within, "the dead master's replica to take over", || {
            self.nodes.iter().filter(|n| n.is_running()).all(|n| {
                let mut con = n.client();
                let ok = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query::<String>(&mut con)
                    .is_ok_and(|info| info.contains("cluster_state:ok"));
                ok && nodes_of(&mut con).is_some_and(|nodes| {
                    nodes
                        .iter()
                        .all(|node| node.port != port || node.slots.is_empty())
                })
            })
        });
    }

    /// The port of the replica of the master on `port`, as the first running node sees it.
    pub fn replica_of(&self, port: u16) -> Option<u16> {
        let node = self.nodes.iter().find(|n| n.is_running())?;
        let text: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query(&mut node.client())
            .ok()?;
        let master_id = self.nodes().into_iter().find(|n| n.port == port)?.id;
        text.lines().find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.get(3) == Some(&master_id.as_str()))
                .then(|| {
                    fields
                        .get(1)?
                        .split('@')
                        .next()?
                        .rsplit_once(':')?
                        .1
                        .parse()
                        .ok()
                })
                .flatten()
        })
    }

    /// Starts a cluster whose nodes get `args` (e.g. another node timeout).
    pub fn start_with(args: &[&str]) -> RedisCluster {
        let nodes: Vec<RedisServer> = (0..Self::MASTERS * 2)
            .map(|_| RedisServer::start_cluster_member(args))
            .collect();
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for node in &nodes {
            create.arg(format!("127.0.0.1:{}", node.port));
        }
        let out = create
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli must be installed (scripts/test.sh installs it)");
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let cluster = RedisCluster {
            nodes,
            args: args.iter().map(|a| a.to_string()).collect(),
        };
        cluster.wait_ok();
        cluster
    }

    /// Adds a node as a further replica of the master on `port` (`redis-cli --cluster add-node
    /// … --cluster-slave`), started with the cluster's arguments, and waits until the master
    /// counts `replicas` replicas online: a master with two replicas keeps one after a
    /// failover, so a `WAIT 1` is answered again without the dead master coming back. Answers
    /// the new node's port.
    pub fn add_replica(&mut self, port: u16, replicas: usize) -> u16 {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let node = RedisServer::start_cluster_member(&args);
        let master_id = self
            .nodes()
            .into_iter()
            .find(|n| n.port == port)
            .expect("the master is a node of the cluster")
            .id;
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("add-node")
            .arg(format!("127.0.0.1:{}", node.port))
            .arg(format!("127.0.0.1:{port}"))
            .args(["--cluster-slave", "--cluster-master-id", &master_id])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli --cluster add-node");
        assert!(
            out.status.success(),
            "redis-cli --cluster add-node: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let added = node.port;
        self.nodes.push(node);
        let mut con = self.node_client(port);
        eventually_blocking(Duration::from_secs(30), "the added replica online", || {
            redis::cmd("INFO")
                .arg("replication")
                .query::<String>(&mut con)
                .is_ok_and(|info| {
                    info.lines()
                        .filter(|l| l.starts_with("slave") && l.contains("state=online"))
                        .count()
                        >= replicas
                })
        });
        added
    }

    /// Waits until every node says `cluster_state:ok`, knows three masters, and the same slots
    /// of each.
    pub fn wait_ok(&self) {
        eventually_blocking(Duration::from_secs(20), "the cluster to be ok", || {
            let views: Vec<Option<Vec<MasterSlots>>> = self
                .nodes
                .iter()
                .filter(|n| n.is_running())
                .map(|n| {
                    let mut con = n.client();
                    let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut con).ok()?;
                    if !info.contains("cluster_state:ok") {
                        return None;
                    }
                    // Every node's role settled too: a node made a replica by `create` may
                    // still show as a master without slots for a moment.
                    let nodes = nodes_of(&mut con)?;
                    if nodes.iter().filter(|n| n.master).count() != Self::MASTERS {
                        return None;
                    }
                    let mut masters: Vec<MasterSlots> = nodes
                        .into_iter()
                        .filter(|m| m.master && !m.slots.is_empty())
                        .map(|m| (m.port, m.slots))
                        .collect();
                    masters.sort();
                    Some(masters)
                })
                .collect();
            views.iter().all(Option::is_some) && views.windows(2).all(|w| w[0] == w[1])
        });
    }

    /// The seed URLs (every node's).
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// A blocking cluster client (for tests that act as an outside service): routes by key,
    /// follows redirections.
    pub fn client(&self) -> redis::cluster::ClusterConnection {
        redis::cluster::ClusterClient::new(self.urls())
            .and_then(|c| c.get_connection())
            .expect("connect to the test cluster")
    }

    /// A plain connection to the node on `port` (for commands about that node, as `CLUSTER
    /// SETSLOT` or `MIGRATE`).
    pub fn node_client(&self, port: u16) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .and_then(|c| c.get_connection())
            .expect("connect to a node of the test cluster")
    }

    /// The nodes as the first running node sees them.
    pub fn nodes(&self) -> Vec<ClusterNode> {
        let node = self
            .nodes
            .iter()
            .find(|n| n.is_running())
            .expect("a running node");
        nodes_of(&mut node.client()).expect("CLUSTER NODES")
    }

    /// The masters (with their slots), as the first running node sees them.
    pub fn masters(&self) -> Vec<ClusterNode> {
        self.nodes()
            .into_iter()
            .filter(|n| n.master && !n.slots.is_empty())
            .collect()
    }

    /// The master serving `key`'s slot.
    pub fn master_of(&self, key: &str) -> ClusterNode {
        let slot = agentd_store::slot(key.as_bytes());
        self.nodes()
            .into_iter()
            .find(|n| n.master && n.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot)))
            .expect("a master serves every slot")
    }

    /// Moves `slots` slots from master `from` to master `to` with
    /// `redis-cli --cluster reshard` (keys and all, while clients go on), and waits until every
    /// node agrees again.
    pub fn reshard(&self, from: &ClusterNode, to: &ClusterNode, slots: usize) {
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("reshard")
            .arg(format!("127.0.0.1:{}", from.port))
            .args(["--cluster-from", &from.id, "--cluster-to", &to.id])
            .args(["--cluster-slots", &slots.to_string(), "--cluster-yes"])
            .args(["--cluster-pipeline", "100"])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli --cluster reshard");
        assert!(
            out.status.success(),
            "redis-cli --cluster reshard: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        self.wait_ok();
    }
}

/// `CLUSTER NODES` as `con`'s node sees it.
fn nodes_of(con: &mut redis::Connection) -> Option<Vec<ClusterNode>> {
    let text: String = redis::cmd("CLUSTER").arg("NODES").query(con).ok()?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let port = fields
                .get(1)?
                .split('@')
                .next()?
                .rsplit_once(':')?
                .1
                .parse()
                .ok()?;
            let master = fields.get(2)?.split(',').any(|f| f == "master");
            let slots = fields
                .iter()
                .skip(8)
                .filter(|s| !s.starts_with('['))
                .filter_map(|s| match s.split_once('-') {
                    Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                    None => s.parse().ok().map(|a| (a, a)),
                })
                .collect();
            Some(ClusterNode {
                id: fields.first()?.to_string(),
                port,
                master,
                slots,
            })
        })
        .collect()
}

/// The Redis a suite runs on: one server, or a cluster.
pub enum TestRedis {
    /// One redis-server.
    Single(RedisServer),
    /// A Redis Cluster of three masters and three replicas.
    Cluster(RedisCluster),
}

impl TestRedis {
    /// A cluster when `AGENTD_TEST_REDIS=cluster`, else one server.
    pub fn from_env() -> TestRedis {
        if Self::cluster_wanted() {
            TestRedis::Cluster(RedisCluster::start())
        } else {
            TestRedis::Single(RedisServer::start())
        }
    }

    /// Whether `AGENTD_TEST_REDIS=cluster` is set.
    pub fn cluster_wanted() -> bool {
        std::env::var(TEST_REDIS_VAR).is_ok_and(|v| v.trim().eq_ignore_ascii_case("cluster"))
    }

    /// The settings an agentd process needs to run on it (`AGENTD__REDIS__…`).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        match self {
            TestRedis::Single(server) => vec![("AGENTD__REDIS__URL", server.url())],
            TestRedis::Cluster(cluster) => {
                let urls = cluster.urls();
                vec![
                    ("AGENTD__REDIS__URL", urls[0].clone()),
                    ("AGENTD__REDIS__CLUSTER", "true".to_string()),
                    ("AGENTD__REDIS__CLUSTER_NODES", urls[1..].join(",")),
                ]
            }
        }
    }

    /// Where it is, for a store or bus made in the test.
    pub fn target(&self) -> agentd_store::RedisTarget {
        match self {
            TestRedis::Single(server) => agentd_store::RedisTarget::single(server.url()),
            TestRedis::Cluster(cluster) => agentd_store::RedisTarget::cluster(cluster.urls()),
        }
    }

    /// A blocking client connection (for tests that act as an outside service).
    pub fn client(&self) -> TestConnection {
        match self {
            TestRedis::Single(server) => TestConnection::Single(server.client()),
            TestRedis::Cluster(cluster) => TestConnection::Cluster(Box::new(cluster.client())),
        }
    }

    /// A blocking connection for commands on `key` only: on a cluster, a plain connection to
    /// the master serving its slot (which, unlike a cluster client, pipelines).
    pub fn client_for(&self, key: &str) -> TestConnection {
        match self {
            TestRedis::Single(server) => TestConnection::Single(server.client()),
            TestRedis::Cluster(cluster) => {
                TestConnection::Single(cluster.node_client(cluster.master_of(key).port))
            }
        }
    }

    /// The cluster, if this is one.
    pub fn cluster(&self) -> Option<&RedisCluster> {
        match self {
            TestRedis::Single(_) => None,
            TestRedis::Cluster(cluster) => Some(cluster),
        }
    }
}

/// A blocking connection to a [`TestRedis`]: one server's, or a cluster client's.
pub enum TestConnection {
    /// To one server.
    Single(redis::Connection),
    /// To a cluster (boxed: it is much larger than a plain connection).
    Cluster(Box<redis::cluster::ClusterConnection>),
}

impl redis::ConnectionLike for TestConnection {
    fn req_packed_command(&mut self, cmd: &[u8]) -> redis::RedisResult<redis::Value> {
        match self {
            TestConnection::Single(c) => c.req_packed_command(cmd),
            TestConnection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> redis::RedisResult<Vec<redis::Value>> {
        match self {
            TestConnection::Single(c) => c.req_packed_commands(cmd, offset, count),
            TestConnection::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn req_command(&mut self, cmd: &redis::Cmd) -> redis::RedisResult<redis::Value> {
        match self {
            TestConnection::Single(c) => c.req_command(cmd),
            TestConnection::Cluster(c) => c.req_command(cmd),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            TestConnection::Single(c) => c.get_db(),
            TestConnection::Cluster(c) => c.get_db(),
        }
    }

    fn supports_pipelining(&self) -> bool {
        match self {
            TestConnection::Single(c) => c.supports_pipelining(),
            TestConnection::Cluster(c) => c.supports_pipelining(),
        }
    }

    fn check_connection(&mut self) -> bool {
        match self {
            TestConnection::Single(c) => c.check_connection(),
            TestConnection::Cluster(c) => c.check_connection(),
        }
    }

    fn is_open(&self) -> bool {
        match self {
            TestConnection::Single(c) => c.is_open(),
            TestConnection::Cluster(c) => c.is_open(),
        }
    }
}
