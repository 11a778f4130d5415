//! The concerns of what outside callers name: the claims of messages' idempotency keys (an
//! agent's own de-duplication), and outside ids mapped to agents (A2A `contextId`s, spawns'
//! idempotency keys: ids that name an agent).

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

/// Idempotency claims: a caller's `Idempotency-Key` for work on one agent (a message to it)
/// claimed once, atomically, by the first request (its fingerprint), until released, expired
/// or kept settled for retries to find. (A key that names an agent, a spawn's, is an outside
/// id: [`ExternalIds`].)
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

/// An id an outside client gives one of agentd's agents (an A2A `contextId` it chose, a
/// spawn's `Idempotency-Key`, …), as the store keys it: the door it came through, the tenant
/// and the owner it belongs to, and the id itself, which may be any string. Tenant and owner
/// are empty until agentd has tenants; they are in the key already, so a key written now
/// stays the same key then.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExternalKey {
    /// What the id came through and what it names there (`a2a/<agent type>`: a context of
    /// that A2A agent; `spawn/<parent id>`, `spawn/` for a root: the agent a spawn's
    /// `Idempotency-Key` made there).
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

/// What an [`ExternalKey`] maps to: an agent, with what the door that claimed it needs to tell
/// a retry from another request, and whether what the key guards is done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalClaim {
    /// The agent the key names.
    pub agent_id: String,
    /// The fingerprint of the request that claimed the key (a retry has the same); empty where
    /// the door has none (A2A's `contextId`s).
    pub fingerprint: String,
    /// What the key guards is done (a spawn's agent is written); until then the first request
    /// may still be under way, or have died half-way.
    pub settled: bool,
}

impl ExternalClaim {
    /// A settled claim of agent `agent_id` without a fingerprint (a door that has none).
    pub fn settled(agent_id: impl Into<String>) -> Self {
        ExternalClaim {
            agent_id: agent_id.into(),
            fingerprint: String::new(),
            settled: true,
        }
    }

    /// The claim as one string, for stores that keep it as text: the bare agent id for a
    /// settled claim without a fingerprint (what every mapping was before claims had more,
    /// so those stay readable), else `<agent id>\x1f<0|1>\x1f<fingerprint>` (agent ids hold no
    /// control character).
    pub fn encode(&self) -> String {
        if self.settled && self.fingerprint.is_empty() {
            return self.agent_id.clone();
        }
        format!(
            "{}\u{1f}{}\u{1f}{}",
            self.agent_id,
            u8::from(self.settled),
            self.fingerprint
        )
    }

    /// A claim [`Self::encode`]d.
    pub fn decode(text: &str) -> ExternalClaim {
        let mut parts = text.splitn(3, '\u{1f}');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(agent_id), Some(settled), Some(fingerprint)) => ExternalClaim {
                agent_id: agent_id.to_string(),
                fingerprint: fingerprint.to_string(),
                settled: settled != "0",
            },
            _ => ExternalClaim::settled(text),
        }
    }
}

/// How long a mapping of an [`ExternalKey`] is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retention {
    /// As long as its agent: until [`AgentRecords::delete_agent`](super::AgentRecords::delete_agent)
    /// drops it (A2A's `contextId`s).
    WithAgent,
    /// This long from the call that sets it (ms; a spawn's `Idempotency-Key`: while its first
    /// attempt runs, then a day once settled), or until its agent's deletion if sooner. An
    /// expired mapping is no mapping, and the store forgets it: nothing timed is kept for good.
    For {
        /// How long, ms.
        ms: u64,
    },
}

/// Outside ids: an [`ExternalKey`] maps to at most one agent, the first claim's
/// ([`ExternalClaim`]), for as long as its [`Retention`] says. Deleting the agent drops the
/// settled mappings to it and those kept [`Retention::WithAgent`], whatever process made them
/// (an unsettled timed one, a spawn's key while the spawn runs, may outlive the deletion until
/// its time). A mapping may live in another place than its agent (another Redis slot: a
/// failover may keep one and lose the other), so a door that finds a mapping must be ready
/// to find its agent missing.
#[async_trait]
pub trait ExternalIds: StoreKind {
    /// Maps outside id `key` as `claim` says, kept as `keep` says, unless it maps to an agent
    /// already, in one atomic step: `None` if this call's claim won, else the claim that maps
    /// it (so of processes claiming one key at once, exactly one wins and every other learns
    /// the winner's claim: its agent, its fingerprint, whether it is settled).
    async fn external_id_claim(
        &self,
        key: &ExternalKey,
        claim: &ExternalClaim,
        keep: Retention,
    ) -> StoreResult<Option<ExternalClaim>>;

    /// Marks the mapping of `key` settled if it maps to agent `agent_id`, kept as `keep` says
    /// from now on (a spawn's key: a day once its agent is written). A missing mapping, or
    /// one to another agent, is left as it is.
    async fn external_id_settle(
        &self,
        key: &ExternalKey,
        agent_id: &str,
        keep: Retention,
    ) -> StoreResult<()>;

    /// What outside id `key` maps to, if anything.
    async fn external_id_get(&self, key: &ExternalKey) -> StoreResult<Option<ExternalClaim>>;

    /// Drops the mapping of `key` if it is `claim` (its agent, fingerprint and settledness),
    /// as a door that found it (or made it) and must map the key afresh knows it: the agent
    /// is gone, or the work it guards was refused. A mapping that changed since (another
    /// caller's claim, even to the same agent) stays.
    async fn external_id_release(
        &self,
        key: &ExternalKey,
        claim: &ExternalClaim,
    ) -> StoreResult<()>;
}
