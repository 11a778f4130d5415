//! Where Redis is ([`RedisTarget`]: one server, or a Redis Cluster by its seed nodes) and the
//! shared command connection to it ([`RedisConnection`]), which the store and the bus send
//! every non-blocking command, pipeline and script through.
//!
//! On a cluster the connection is redis-rs's `cluster_async::ClusterConnection`: it routes a
//! command, a pipeline (by its first key) or a script (`EVALSHA`, by its first declared key)
//! to the master of the key's slot and follows `MOVED`, `ASK` and `TRYAGAIN` (a reshard in
//! progress) by itself. That is sound because agentd sends nothing that spans slots (see
//! `redis_keys`). Commands it would broadcast to every master (`WAIT`, `SCRIPT LOAD`, …) are
//! sent to the node of one key with [`RedisConnection::query_on_slot_of`] where one node is
//! meant. Blocking reads never go through it: they hold a connection of their own
//! (`agentd_bus`'s blocking connections).

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, FromRedisValue, Pipeline, RedisFuture, RedisResult, Value, cmd};
use std::time::Duration;

/// How long a command may wait for its answer on the shared connection.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting to one node may take.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(3);

/// Where Redis is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisTarget {
    /// One Redis server (`redis://` or `rediss://`, with user and password if needed).
    Single {
        /// Its URL.
        url: String,
    },
    /// A Redis Cluster, found through any of its seed nodes (URLs of some of its masters or
    /// replicas; the others are learnt from them). User, password and TLS are the first seed's.
    Cluster {
        /// The seed nodes' URLs (at least one).
        seeds: Vec<String>,
    },
}

impl RedisTarget {
    /// One server at `url`.
    pub fn single(url: impl Into<String>) -> Self {
        RedisTarget::Single { url: url.into() }
    }

    /// A cluster found through `seeds`.
    pub fn cluster(seeds: impl IntoIterator<Item = impl Into<String>>) -> Self {
        RedisTarget::Cluster {
            seeds: seeds.into_iter().map(Into::into).collect(),
        }
    }

    /// Whether this is a cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self, RedisTarget::Cluster { .. })
    }

    /// The URLs to try, in order: the server's, or the seeds.
    pub fn urls(&self) -> &[String] {
        match self {
            RedisTarget::Single { url } => std::slice::from_ref(url),
            RedisTarget::Cluster { seeds } => seeds,
        }
    }

    /// Connects the shared command connection, after a `PING` that fails at once if Redis (every
    /// seed, for a cluster) is unreachable, instead of a series of reconnect attempts.
    pub async fn connect(&self) -> RedisResult<RedisConnection> {
        self.connect_with(Patience::COMMANDS).await
    }

    /// [`Self::connect`] with `patience` instead of the command connection's: a connection of
    /// its own for work that must not wait behind the shared connection's commands (a `WAIT`
    /// holds up what follows it) nor for longer than it can use an answer (lease renewals).
    pub async fn connect_with(&self, patience: Patience) -> RedisResult<RedisConnection> {
        match self {
            RedisTarget::Single { url } => {
                let client = redis::Client::open(url.as_str())?;
                let probe = redis::AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(CONNECTION_TIMEOUT));
                let mut first = client
                    .get_multiplexed_async_connection_with_config(&probe)
                    .await?;
                cmd("PING").query_async::<String>(&mut first).await?;
                let config = redis::aio::ConnectionManagerConfig::new()
                    .set_response_timeout(Some(patience.response))
                    .set_connection_timeout(Some(patience.connect))
                    .set_max_delay(Duration::from_secs(2))
                    .set_number_of_retries(6);
                Ok(RedisConnection::Single(
                    client.get_connection_manager_with_config(config).await?,
                ))
            }
            RedisTarget::Cluster { seeds } => {
                let client = ClusterClientBuilder::new(seeds.iter().map(String::as_str))
                    .connection_timeout(patience.connect)
                    .response_timeout(patience.response)
                    .overall_response_timeout(Some(patience.overall))
                    .retries(patience.retries)
                    .min_retry_wait(20)
                    .max_retry_wait(1_000)
                    .build()?;
                let mut con = client.get_async_connection().await?;
                cmd("PING").query_async::<String>(&mut con).await?;
                Ok(RedisConnection::Cluster(con))
            }
        }
    }
}

/// How long a connection waits for Redis ([`RedisTarget::connect_with`]).
#[derive(Debug, Clone, Copy)]
pub struct Patience {
    /// For one answer.
    pub response: Duration,
    /// For a request, its redirections and retries included (a cluster's reshard or failover).
    pub overall: Duration,
    /// Retries of a request on a cluster.
    pub retries: u32,
    /// For a connection to a node.
    pub connect: Duration,
}

impl Patience {
    /// The shared command connection's: the work of agents and the bus, which would rather
    /// wait out a failover than fail (a request that must answer sooner bounds its own wait).
    pub const COMMANDS: Patience = Patience {
        response: RESPONSE_TIMEOUT,
        // A request's redirections and retries (a reshard, a failover) may take longer than one
        // answer.
        overall: Duration::from_secs(30),
        retries: 16,
        connect: CONNECTION_TIMEOUT,
    };

    /// About `within` for anything: an answer later than that is of no use to the caller.
    pub fn within(within: Duration) -> Patience {
        Patience {
            response: within,
            overall: within,
            retries: 2,
            connect: within,
        }
    }
}

/// A connection of its own to the Redis at `url` (not shared, not reconnecting by itself: its
/// user keeps per-connection state, like a `WATCH`), with the shared connection's timeouts.
pub(crate) async fn connect_own(url: &str) -> RedisResult<redis::aio::MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECTION_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT));
    redis::Client::open(url)?
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

/// The shared, multiplexed command connection: to one server (reconnecting by itself), or to a
/// cluster (routing by key, following redirections, reconnecting by itself). Clones share it.
#[derive(Clone)]
pub enum RedisConnection {
    /// One server.
    Single(ConnectionManager),
    /// A Redis Cluster.
    Cluster(ClusterConnection),
}

impl RedisConnection {
    /// Whether this connection is to a cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self, RedisConnection::Cluster(_))
    }

    /// Sends `command` to the master of `key`'s slot only. Commands that redis-rs routes to
    /// every master by their name (`WAIT`, `SCRIPT LOAD`, …) go where one node is meant: on a
    /// cluster, `WAIT` after a write must reach the node (and connection) that took it.
    pub async fn query_on_slot_of<T: FromRedisValue>(
        &mut self,
        key: &str,
        command: &Cmd,
    ) -> RedisResult<T> {
        match self {
            RedisConnection::Single(con) => command.query_async(con).await,
            RedisConnection::Cluster(con) => {
                let route = Route::with_key(key.as_bytes(), SlotAddr::Master);
                let value = con
                    .route_command(
                        command.clone(),
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                    )
                    .await?;
                redis::from_redis_value(value).map_err(Into::into)
            }
        }
    }

    /// Sends `command` to node `host:port` of the cluster (to the one server otherwise): a
    /// command about a connection of that node (`CLIENT UNBLOCK`).
    pub async fn query_on_node<T: FromRedisValue>(
        &mut self,
        host: &str,
        port: u16,
        command: &Cmd,
    ) -> RedisResult<T> {
        match self {
            RedisConnection::Single(con) => command.query_async(con).await,
            RedisConnection::Cluster(con) => {
                let value = con
                    .route_command(
                        command.clone(),
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                            host: host.to_string(),
                            port,
                        }),
                    )
                    .await?;
                redis::from_redis_value(value).map_err(Into::into)
            }
        }
    }
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            RedisConnection::Single(con) => con.req_packed_command(cmd),
            RedisConnection::Cluster(con) => con.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            RedisConnection::Single(con) => con.req_packed_commands(pipeline, offset, count),
            RedisConnection::Cluster(con) => con.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisConnection::Single(con) => con.get_db(),
            RedisConnection::Cluster(con) => con.get_db(),
        }
    }
}
