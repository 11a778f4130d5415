//! Connections of their own for blocking reads (`XREAD`, `XREADGROUP` with `BLOCK`): a blocked
//! command holds up every command behind it on its connection, so it must not share the
//! command connection, and must not hit its response timeout.
//!
//! On a Redis Cluster a blocking read names keys of one slot, and a [`BlockingConnection`] is a
//! plain connection to the node that serves that slot, found and followed by the
//! redirections the nodes answer: `MOVED` (the slot lives elsewhere: connect there, and stay),
//! `ASK` (the slot is being moved and this key already went: ask the importing node once, with
//! `ASKING`), `TRYAGAIN` / `CLUSTERDOWN` / `MASTERDOWN` (a reshard step or a failover in
//! progress: try again shortly). A lost node (killed, failed over) is left for a seed, which
//! redirects to whoever serves the slot now. So each reader moves with its slot. One
//! connection is meant for the keys of one slot: reading keys of two slots through one
//! connection works, but reconnects at every switch.

use agentd_store::RedisTarget;
use futures::FutureExt;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, Pipeline,
    RedisError, RedisFuture, RedisResult, ServerErrorKind, Value, cmd,
};
use std::time::Duration;

/// Redirections and retries one request follows before it answers the last error.
const MAX_REDIRECTS: u32 = 16;

/// A connection of its own for blocking reads: to the one Redis, or to the cluster node that
/// serves the slot of the keys read through it.
pub(crate) enum BlockingConnection {
    /// One Redis.
    Single(MultiplexedConnection),
    /// A Redis Cluster.
    Cluster(SlotConnection),
}

impl BlockingConnection {
    /// A blocking connection to `target` (on a cluster: to the first seed that answers, until
    /// a read is redirected).
    pub(crate) async fn connect(target: &RedisTarget) -> RedisResult<Self> {
        match target {
            RedisTarget::Single { url } => Ok(BlockingConnection::Single(
                open(url.as_str().into_connection_info()?).await?,
            )),
            RedisTarget::Cluster { seeds } => {
                let seeds = seeds
                    .iter()
                    .map(|s| s.as_str().into_connection_info())
                    .collect::<RedisResult<Vec<_>>>()?;
                let mut con = SlotConnection { seeds, node: None };
                con.node().await?;
                Ok(BlockingConnection::Cluster(con))
            }
        }
    }

    /// The node this connection is on and its client id there (`CLIENT ID`), on a cluster:
    /// what `CLIENT UNBLOCK` needs to end a read blocked on it.
    pub(crate) fn blocked_client(&self) -> Option<(String, u16, i64)> {
        match self {
            BlockingConnection::Single(_) => None,
            BlockingConnection::Cluster(con) => con
                .node
                .as_ref()
                .map(|n| (n.host.clone(), n.port, n.client_id)),
        }
    }
}

/// One connection that follows one slot around a Redis Cluster.
pub(crate) struct SlotConnection {
    /// Where to start (and start again after losing the node).
    seeds: Vec<ConnectionInfo>,
    node: Option<Node>,
}

/// A connection to one cluster node.
struct Node {
    host: String,
    port: u16,
    con: MultiplexedConnection,
    client_id: i64,
}

/// A connection without a response timeout (reads block).
async fn open(info: ConnectionInfo) -> RedisResult<MultiplexedConnection> {
    let config = AsyncConnectionConfig::new()
        .set_response_timeout(None)
        .set_connection_timeout(Some(Duration::from_secs(3)));
    redis::Client::open(info)?
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

/// What one request sends: a command or a (non-atomic) pipeline.
#[derive(Clone, Copy)]
enum Request<'a> {
    Command(&'a Cmd),
    Pipeline(&'a Pipeline, usize, usize),
}

/// The redirection an answer asks for, if any.
enum Redirection {
    Moved(String, u16),
    Ask(String, u16),
    Retry,
}

impl SlotConnection {
    /// The node connected now, or the first seed that answers.
    async fn node(&mut self) -> RedisResult<&mut Node> {
        if self.node.is_none() {
            let mut last = None;
            for seed in self.seeds.clone() {
                match Self::connect_node(seed).await {
                    Ok(node) => {
                        self.node = Some(node);
                        break;
                    }
                    Err(e) => last = Some(e),
                }
            }
            if let Some(e) = last.filter(|_| self.node.is_none()) {
                return Err(e);
            }
        }
        self.node.as_mut().ok_or_else(|| {
            RedisError::from((redis::ErrorKind::Io, "no seed node of the cluster answers"))
        })
    }

    async fn connect_node(info: ConnectionInfo) -> RedisResult<Node> {
        let (host, port) = match info.addr() {
            ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                (host.clone(), *port)
            }
            _ => {
                return Err(RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "a cluster node is reached over TCP",
                )));
            }
        };
        let mut con = open(info).await?;
        let client_id: i64 = cmd("CLIENT").arg("ID").query_async(&mut con).await?;
        Ok(Node {
            host,
            port,
            con,
            client_id,
        })
    }

    /// How to reach node `host:port`: the first seed's settings (user, password, TLS) there.
    fn info_for(&self, host: &str, port: u16) -> RedisResult<ConnectionInfo> {
        let seed = self.seeds.first().ok_or_else(|| {
            RedisError::from((redis::ErrorKind::InvalidClientConfig, "no seed node"))
        })?;
        let addr = match seed.addr() {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host: host.to_string(),
                port,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            _ => ConnectionAddr::Tcp(host.to_string(), port),
        };
        Ok(seed.clone().set_addr(addr))
    }

    /// Sends `request`, following the redirections the cluster answers; answers the values
    /// (for a pipeline, those of `offset..offset + count`).
    async fn request(&mut self, request: Request<'_>) -> RedisResult<Vec<Value>> {
        let mut asking: Option<(String, u16)> = None;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let answer = match asking.take() {
                Some((host, port)) => self.ask(&host, port, request).await,
                None => {
                    let node = self.node().await?;
                    let sent = match request {
                        Request::Command(c) => {
                            node.con.req_packed_command(c).await.map(|v| vec![v])
                        }
                        Request::Pipeline(p, offset, count) => {
                            node.con.req_packed_commands(p, offset, count).await
                        }
                    };
                    if sent.as_ref().is_err_and(lost_connection) {
                        // The node is gone (killed, failed over) or unreachable: start again
                        // from a seed next time.
                        self.node = None;
                    }
                    sent
                }
            }?;
            let Some(redirection) = answer.iter().find_map(redirection) else {
                return Ok(answer);
            };
            if attempt >= MAX_REDIRECTS {
                return Ok(answer);
            }
            match redirection {
                Redirection::Moved(host, port) => {
                    let info = self.info_for(&host, port)?;
                    self.node = Some(Self::connect_node(info).await?);
                }
                Redirection::Ask(host, port) => asking = Some((host, port)),
                Redirection::Retry => {
                    tokio::time::sleep(Duration::from_millis(20 * u64::from(attempt))).await
                }
            }
        }
    }

    /// Sends `request` once to node `host:port` with `ASKING` before each command: the slot is
    /// being imported there and the key has moved already.
    async fn ask(&self, host: &str, port: u16, request: Request<'_>) -> RedisResult<Vec<Value>> {
        let mut con = open(self.info_for(host, port)?).await?;
        let mut pipe = redis::pipe();
        let (commands, offset, count): (Vec<&Cmd>, usize, usize) = match request {
            Request::Command(c) => (vec![c], 0, 1),
            Request::Pipeline(p, offset, count) => (p.cmd_iter().collect(), offset, count),
        };
        for c in &commands {
            pipe.cmd("ASKING");
            pipe.add_command((*c).clone());
        }
        let values = con
            .req_packed_commands(&pipe, 0, commands.len() * 2)
            .await?;
        Ok(values
            .into_iter()
            .skip(1)
            .step_by(2)
            .skip(offset)
            .take(count)
            .collect())
    }
}

/// Whether `e` means the connection to the node is gone.
fn lost_connection(e: &RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error()
}

/// The redirection value `v` asks for (a `MOVED`, `ASK`, `TRYAGAIN`, `CLUSTERDOWN`,
/// `MASTERDOWN` or `UNBLOCKED` error), if any.
fn redirection(v: &Value) -> Option<Redirection> {
    let Value::ServerError(e) = v else {
        return None;
    };
    if e.code() == "UNBLOCKED" {
        // A read blocked on a key that moved away (its slot resharded): it took nothing, and
        // the next one is redirected.
        return Some(Redirection::Retry);
    }
    let target = || {
        let (host, port) = e
            .details()?
            .split_ascii_whitespace()
            .nth(1)?
            .rsplit_once(':')?;
        Some((host.to_string(), port.parse().ok()?))
    };
    match e.kind()? {
        ServerErrorKind::Moved => target().map(|(h, p)| Redirection::Moved(h, p)),
        ServerErrorKind::Ask => target().map(|(h, p)| Redirection::Ask(h, p)),
        ServerErrorKind::TryAgain | ServerErrorKind::ClusterDown | ServerErrorKind::MasterDown => {
            Some(Redirection::Retry)
        }
        _ => None,
    }
}

impl ConnectionLike for BlockingConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            BlockingConnection::Single(con) => con.req_packed_command(cmd),
            BlockingConnection::Cluster(con) => async move {
                let mut values = con.request(Request::Command(cmd)).await?;
                Ok(values.pop().unwrap_or(Value::Nil))
            }
            .boxed(),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            BlockingConnection::Single(con) => con.req_packed_commands(pipeline, offset, count),
            BlockingConnection::Cluster(con) => con
                .request(Request::Pipeline(pipeline, offset, count))
                .boxed(),
        }
    }

    fn get_db(&self) -> i64 {
        0
    }
}
