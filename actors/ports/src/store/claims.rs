//! The concerns of what outside callers name: the claims of idempotency keys, and outside ids
//! mapped to agents.

use super::{StoreKind, StoreResult};
use async_trait::async_trait;

/// The first claim of an idempotency key ([`IdempotencyClaims::idempotency_claim`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The fingerprint of the request that claimed it: a retry has the same.
    pub fingerprint: String,
    /// What the key guards is done ([`ClaimEnd::Settled`]); until then, the first request may
    /// still be under way, or have died half-way.
    pub settled: bool,
}

/// How a claim ends ([`IdempotencyClaims::idempotency_claim_end`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimEnd {
    /// What the key guards is done: the claim is kept this long from now, settled.
    Settled {
        /// How long retries find it, ms.
        keep_ms: u64,
    },
    /// Nothing was done: the key is free again.
    Released,
}

impl Claim {
    /// The claim as one string, `<0|1>:<fingerprint>`, for stores that keep it as text.
    pub fn encode(&self) -> String {
        format!("{}:{}", u8::from(self.settled), self.fingerprint)
    }

    /// A claim [`Self::encode`]d; a bare fingerprint (a spawn claim of an earlier version)
    /// counts as settled.
    pub fn decode(text: &str) -> Claim {
        match text.split_once(':') {
            Some(("0", fingerprint)) => Claim {
                fingerprint: fingerprint.to_string(),
                settled: false,
            },
            Some(("1", fingerprint)) => Claim {
                fingerprint: fingerprint.to_string(),
                settled: true,
            },
            _ => Claim {
                fingerprint: text.to_string(),
                settled: true,
            },
        }
    }
}

/// Idempotency claims: a caller's `Idempotency-Key` claimed once, atomically, by the first
/// request (its fingerprint), until released, expired or kept settled for retries to find.
#[async_trait]
pub trait IdempotencyClaims: StoreKind {
    /// Claims idempotency key `key` (derived from a caller's `Idempotency-Key`) for the request
    /// whose fingerprint is `fingerprint`, for `ttl_ms`: `None` if the claim is new (this
    /// caller does what the key guards), else the [`Claim`] made first (a retry, or another
    /// request reusing the key: its fingerprint, and whether what it guards is done). One
    /// atomic step, kept in agent `home`'s slot where the store has slots — the agent the
    /// guarded work writes to — so that a failover keeps both or neither of what the master
    /// had not replicated. An expired claim is no claim. Kept durably where the store is
    /// durable: a claim outlives a restart.
    async fn idempotency_claim(
        &self,
        home: &str,
        key: &str,
        fingerprint: &str,
        ttl_ms: u64,
    ) -> StoreResult<Option<Claim>>;

    /// Ends claim `key` of agent `home` ([`Self::idempotency_claim`]): settled (what it guards is
    /// done; kept `keep_ms` from now, for retries to find), or released (nothing was done, so
    /// the key may be used again). A missing claim stays missing.
    async fn idempotency_claim_end(&self, home: &str, key: &str, end: ClaimEnd) -> StoreResult<()>;
}

/// An id an outside client gives one of agentd's agents (an A2A `contextId` it chose, …), as
/// the store keys it: the door it came through, the tenant and the owner it belongs to, and the
/// id itself, which may be any string. Tenant and owner are empty until agentd has tenants;
/// they are in the key already, so a key written now stays the same key then.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExternalKey {
    /// What the id came through and what it names there (`a2a/<agent type>`: a context of
    /// that A2A agent).
    pub door: String,
    /// The tenant (empty: none).
    pub tenant: String,
    /// The owner within the tenant (empty: none).
    pub owner: String,
    /// The id, as the client gave it.
    pub id: String,
}

impl ExternalKey {
    /// Id `id` of door `door`, without tenant or owner.
    pub fn new(door: impl Into<String>, id: impl Into<String>) -> Self {
        ExternalKey {
            door: door.into(),
            tenant: String::new(),
            owner: String::new(),
            id: id.into(),
        }
    }

    /// The key as one string, the same for the same parts and different for different ones
    /// whatever they hold: the JSON array of its parts.
    pub fn encoded(&self) -> String {
        serde_json::Value::from(vec![
            self.door.as_str(),
            self.tenant.as_str(),
            self.owner.as_str(),
            self.id.as_str(),
        ])
        .to_string()
    }
}

/// Outside ids: an [`ExternalKey`] maps to at most one agent, the first claim's, for as long
/// as that agent lives (deleting the agent drops the mappings to it).
#[async_trait]
pub trait ExternalIds: StoreKind {
    /// Maps outside id `key` to agent `agent_id` unless it maps to an agent already, in one atomic
    /// step, and answers the agent `key` maps to after the call: `agent_id`, or the agent of an
    /// earlier claim (so of two processes claiming one key at once, both learn the one agent that
    /// won). The mapping lasts as long as the agent:
    /// [`AgentRecords::delete_agent`](super::AgentRecords::delete_agent) drops the mappings to it,
    /// whatever process made them.
    async fn external_id_claim(&self, key: &ExternalKey, agent_id: &str) -> StoreResult<String>;

    /// The agent outside id `key` maps to, if any.
    async fn external_id_get(&self, key: &ExternalKey) -> StoreResult<Option<String>>;

    /// Drops the mapping of `key` if it maps to `agent_id` (a door that found the agent gone
    /// maps the key afresh); a mapping to another agent stays.
    async fn external_id_release(&self, key: &ExternalKey, agent_id: &str) -> StoreResult<()>;
}
