//! Idempotent spawns and messages (`Idempotency-Key`, the commands' `idempotency_key`): a
//! spawn retried with the same key in the same scope answers the agent the first one made and
//! never makes a second, and a message retried with the same key to the same agent is queued
//! once — across processes and restarts too.
//!
//! A message's id is derived from the agent and the key, so every attempt sends the same
//! envelope, and its claim (the first request's fingerprint, settled once the message is
//! queued) is an [`IdempotencyClaims`](crate::ports::IdempotencyClaims) claim kept in the
//! agent's own slot beside its inbox for [`KEPT_MS`]: a retry of a settled claim answers at
//! once, a retry of one under way (or of an attempt that died half-way, or was answered
//! `unavailable` though it landed) sends the envelope again, which the agent's inbox takes
//! once. Retention is by time, not by a count of recent ids: a key is remembered however many
//! messages the agent got since. (A message key is the agent's own de-duplication, not an
//! outside id naming an agent.)
//!
//! A spawn's key is an outside id ([`spawn_key`]: door `spawn/<parent>`, `spawn/` for a root;
//! tenant and owner empty until agentd has tenants) mapped to the agent it makes through the
//! store's [`ExternalIds`](crate::ports::ExternalIds), with the first request's fingerprint.
//! The agent's id is derived from that key ([`spawn_agent_id`]; the same id as before keys had
//! tenants, when they are empty), so every attempt names the same agent. A retry with the same
//! request answers the agent (once its record is written), the key with another request is
//! `idempotency_key_reused` (422, as the IETF `Idempotency-Key` draft says). The mapping is
//! made for [`IN_FLIGHT_MS`] and kept for [`KEPT_MS`] once the agent is written (settled), so a
//! spawn that died half-way frees its key soon; deleting the agent drops it. After that, a
//! retry claims the key afresh and still finds the agent by its derived id while it exists
//! (the mapping is settled again).
//!
//! The mapping lives where the store keeps the key (with Redis, in the slot of the key's
//! partition, not the agent's), so a failover may keep one of the two and lose the other: a
//! lost mapping is the case above; a settled mapping whose agent is missing (the agent lost,
//! or its deletion cut off before the mapping went) is dropped and the agent made again under
//! the same derived id, as a first attempt would.

use super::AgentSystem;
use crate::ports::{ClaimEnd, ExternalClaim, ExternalKey, Retention};
use agentd_proto::ids::derived_id;
use agentd_proto::{AgentRecord, AgentdError, ErrorCode, InboxItem, SpawnRequest};
use std::time::Duration;
use uuid::Uuid;

/// How long a claim lasts while its spawn or message runs: one that died before writing
/// what it guards holds the key this long.
const IN_FLIGHT_MS: u64 = 30_000;
/// How long a key is remembered once its agent is written or its message queued (24 h).
pub const KEPT_MS: u64 = 24 * 60 * 60 * 1000;
/// How long a retry waits for the agent of a first attempt still under way.
const FIRST_ATTEMPT_WAIT: Duration = Duration::from_secs(3);
/// How many times a spawn claims its key: a settled mapping found without its agent is
/// dropped and the key claimed again.
const SPAWN_CLAIMS: usize = 3;
/// The longest key taken.
const MAX_KEY_CHARS: usize = 255;
/// The door of spawns' keys: `spawn/<parent>`, `spawn/` for a root.
const SPAWN_DOOR: &str = "spawn/";
/// A settled message claim, kept [`KEPT_MS`].
const KEEP: ClaimEnd = ClaimEnd::Settled { keep_ms: KEPT_MS };
/// A spawn's key while its first attempt runs.
const SPAWN_IN_FLIGHT: Retention = Retention::For { ms: IN_FLIGHT_MS };
/// A spawn's key once its agent is written.
const SPAWN_KEPT: Retention = Retention::For { ms: KEPT_MS };

/// The id of the message key `key` sends to `agent_id`.
pub fn idempotent_message_id(agent_id: &str, key: &str) -> Uuid {
    derived_id(Uuid::nil(), &format!("message\u{1f}{agent_id}\u{1f}{key}"))
}

/// The outside id of spawn key `key` under `parent` (`None`: a root): door `spawn/<parent>`
/// (`spawn/` for a root), no tenant or owner yet.
pub fn spawn_key(parent: Option<&str>, key: &str) -> ExternalKey {
    ExternalKey::new(format!("{SPAWN_DOOR}{}", parent.unwrap_or_default()), key)
}

/// The id of the agent spawn key `key` ([`spawn_key`]) makes. Without tenant or owner it is
/// the id spawn keys derived before they had them (a retry across an upgrade finds its agent);
/// with either, another one, from the whole key.
pub fn spawn_agent_id(key: &ExternalKey) -> String {
    let seed = if key.tenant.is_empty() && key.owner.is_empty() {
        let scope = key.door.strip_prefix(SPAWN_DOOR).unwrap_or(&key.door);
        format!("spawn\u{1f}{scope}\u{1f}{}", key.id)
    } else {
        // One separator (the encoded key escapes its own): never a seed of the kind above.
        format!("spawn\u{1f}{}", key.encoded())
    };
    derived_id(Uuid::nil(), &seed).to_string()
}

/// The id of the agent spawn key `key` makes under `parent` (`None`: a root).
pub fn idempotent_agent_id(parent: Option<&str>, key: &str) -> String {
    spawn_agent_id(&spawn_key(parent, key))
}

/// What tells two requests with one key apart: a digest of the whole request but its key.
fn fingerprint(req: &impl serde::Serialize) -> Result<String, AgentdError> {
    let body = serde_json::to_string(req)
        .map_err(|e| AgentdError::new(ErrorCode::Internal, format!("encoding a request: {e}")))?;
    Ok(derived_id(Uuid::nil(), &body).to_string())
}

/// Checks an idempotency key: 1 to 255 visible ASCII characters (spaces inside allowed).
fn check_key(key: &str) -> Result<(), AgentdError> {
    let ok = !key.trim().is_empty()
        && key.len() <= MAX_KEY_CHARS
        && key.bytes().all(|b| (0x20..0x7f).contains(&b));
    if ok {
        Ok(())
    } else {
        Err(AgentdError::new(
            ErrorCode::InvalidArgument,
            format!(
                "an idempotency key is 1 to {MAX_KEY_CHARS} visible ASCII characters, not blank"
            ),
        ))
    }
}

impl AgentSystem {
    /// [`Self::spawn`] of `req` under idempotency key `key` (see the module doc).
    pub(super) async fn spawn_once(
        &self,
        req: SpawnRequest,
        key: &str,
    ) -> Result<AgentRecord, AgentdError> {
        check_key(key)?;
        let outside = spawn_key(req.parent_id.as_deref(), key);
        let id = spawn_agent_id(&outside);
        let claim = ExternalClaim {
            agent_id: id.clone(),
            fingerprint: fingerprint(&req)?,
            settled: false,
        };
        let store = &self.system.deps.store;
        for _ in 0..SPAWN_CLAIMS {
            let first = store
                .external_id_claim(&outside, &claim, SPAWN_IN_FLIGHT)
                .await?;
            let Some(first) = first else {
                if let Some(rec) = store.get_agent(&id).await? {
                    // The key's mapping expired (or a failover lost it); its agent lives on.
                    store.external_id_settle(&outside, &id, SPAWN_KEPT).await?;
                    store.replicated(&id).await?;
                    return Ok(rec);
                }
                return self.spawn_claimed(req, &outside, &claim).await;
            };
            if first.fingerprint != claim.fingerprint {
                return Err(AgentdError::new(
                    ErrorCode::IdempotencyKeyReused,
                    format!("idempotency key `{key}` was used with another spawn request"),
                ));
            }
            // A retry: the first attempt's agent, once it is written.
            if let Some(rec) = self.first_attempts_agent(&id, !first.settled).await? {
                self.first_message_again(&rec, &req).await?;
                store.replicated(&id).await?;
                return Ok(rec);
            }
            if !first.settled {
                break;
            }
            // Settled, and its agent is missing (lost in a failover that kept the mapping, or
            // its deletion cut off): the stale mapping goes, and the key is claimed again. Of
            // retries racing here, one drops it and claims; the others find that claim.
            store.external_id_release(&outside, &first).await?;
        }
        Err(AgentdError::new(
            ErrorCode::Unavailable,
            format!("a spawn with idempotency key `{key}` is still under way; retry"),
        ))
    }

    /// Spawns agent `claim.agent_id` of `req`, whose key `outside` this call claimed (`claim`):
    /// settled once the agent is written, released if the spawn is refused before anything is
    /// written.
    async fn spawn_claimed(
        &self,
        req: SpawnRequest,
        outside: &ExternalKey,
        claim: &ExternalClaim,
    ) -> Result<AgentRecord, AgentdError> {
        let store = &self.system.deps.store;
        let id = &claim.agent_id;
        match self.spawn_as(req, Some(id.clone())).await {
            Ok(rec) => {
                store.external_id_settle(outside, id, SPAWN_KEPT).await?;
                Ok(rec)
            }
            Err(e) if !crate::ports::is_transient(&e) => {
                // Refused before anything was written: the key is free again.
                if let Err(release) = store.external_id_release(outside, claim).await {
                    tracing::warn!(error = %release, agent_id = %id, "an idempotency key stays claimed until it expires");
                }
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Queues `item` for `agent_id` under idempotency key `key` (see the module doc): `Ok` once
    /// it is in the agent's durable inbox, by this call or by an earlier one with the key.
    pub(super) async fn post_once_by_key(
        &self,
        agent_id: &str,
        item: InboxItem,
        key: &str,
    ) -> Result<(), AgentdError> {
        check_key(key)?;
        let id = idempotent_message_id(agent_id, key);
        let fingerprint = fingerprint(&item)?;
        let claim = format!("message {id}");
        let store = &self.system.deps.store;
        let first = store
            .idempotency_claim(agent_id, &claim, &fingerprint, IN_FLIGHT_MS)
            .await?;
        match &first {
            Some(first) if first.fingerprint != fingerprint => {
                return Err(AgentdError::new(
                    ErrorCode::IdempotencyKeyReused,
                    format!("idempotency key `{key}` was used with another message"),
                ));
            }
            // The first attempt queued it: its outcome is this one's.
            Some(first) if first.settled => return Ok(()),
            _ => {}
        }
        match crate::ops::post_as(&self.system, super::external(), agent_id, id, item, None).await {
            Ok(_) => {
                store.idempotency_claim_end(agent_id, &claim, KEEP).await?;
                Ok(())
            }
            Err(e) if first.is_none() && !crate::ports::is_transient(&e) => {
                // Refused before anything was queued: the key is free again.
                let release = store
                    .idempotency_claim_end(agent_id, &claim, ClaimEnd::Released)
                    .await;
                if let Err(release) = release {
                    tracing::warn!(error = %release, agent_id, "a message's idempotency key stays claimed until it expires");
                }
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Routes the first message of `rec`, made by `req`, once more: the attempt that made the
    /// agent may have failed after writing its record and before its first message was
    /// queued (a store or a master lost in between), and the spawn a retry acknowledges has its
    /// prompt ([`crate::ops::first_message_again`]).
    async fn first_message_again(
        &self,
        rec: &AgentRecord,
        req: &SpawnRequest,
    ) -> Result<(), AgentdError> {
        let deps = &self.system.deps;
        let prompt =
            crate::context_files::first_message(deps, req.prompt.as_deref(), &req.context_files)?;
        if let Some(prompt) = prompt {
            crate::ops::first_message_again(
                &self.system,
                rec,
                prompt,
                agentd_observe::telemetry::current(),
            )
            .await?;
        }
        Ok(())
    }

    /// The record of idempotent spawn `id`, waiting up to [`FIRST_ATTEMPT_WAIT`] for a first
    /// attempt still under way to write it if `wait` (a settled one wrote it already).
    async fn first_attempts_agent(
        &self,
        id: &str,
        wait: bool,
    ) -> Result<Option<AgentRecord>, AgentdError> {
        let deadline = tokio::time::Instant::now() + FIRST_ATTEMPT_WAIT;
        loop {
            if let Some(rec) = self.system.deps.store.get_agent(id).await? {
                return Ok(Some(rec));
            }
            if !wait || tokio::time::Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `idempotent_agent_id(None, "k1")` before spawn keys were outside ids.
    const PINNED_ROOT: &str = "3b33f992-3d5e-8e4e-80de-e4ba76825381";
    /// `idempotent_agent_id(Some("p"), "k1")` before spawn keys were outside ids.
    const PINNED_CHILD: &str = "8012fa57-758b-820d-9157-49c446ec9e31";

    #[test]
    fn a_key_names_the_agent_it_named_before_keys_had_tenants() {
        // The ids spawn keys derived before they were outside ids: a retry across the
        // upgrade names the agent its first attempt made.
        assert_eq!(idempotent_agent_id(None, "k1"), PINNED_ROOT);
        assert_eq!(idempotent_agent_id(Some("p"), "k1"), PINNED_CHILD);
    }

    #[test]
    fn a_key_with_a_tenant_or_an_owner_names_another_agent() {
        let plain = spawn_key(None, "k1");
        let tenant = ExternalKey {
            tenant: "t1".into(),
            ..plain.clone()
        };
        let owner = ExternalKey {
            owner: "o1".into(),
            ..plain.clone()
        };
        let ids = [&plain, &tenant, &owner].map(spawn_agent_id);
        assert_ne!(ids[0], ids[1]);
        assert_ne!(ids[0], ids[2]);
        assert_ne!(ids[1], ids[2]);
        assert_eq!(spawn_agent_id(&tenant), spawn_agent_id(&tenant.clone()));
        assert!(ids.iter().all(|id| Uuid::parse_str(id).is_ok()));
    }

    #[test]
    fn a_key_names_one_agent_per_scope() {
        let a = idempotent_agent_id(None, "k1");
        assert_eq!(a, idempotent_agent_id(None, "k1"));
        assert_ne!(a, idempotent_agent_id(None, "k2"));
        assert_ne!(a, idempotent_agent_id(Some("p"), "k1"));
        assert!(Uuid::parse_str(&a).is_ok());
    }

    #[test]
    fn keys_are_short_visible_ascii() {
        assert!(check_key("order-42 retry").is_ok());
        for bad in ["", "  ", "é", "a\nb", &"k".repeat(256)] {
            assert!(check_key(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_fingerprint_tells_requests_apart_but_not_their_keys() {
        let one = SpawnRequest {
            prompt: Some("hi".into()),
            ..SpawnRequest::default()
        };
        let other = SpawnRequest {
            prompt: Some("ho".into()),
            ..SpawnRequest::default()
        };
        assert_eq!(fingerprint(&one).ok(), fingerprint(&one.clone()).ok());
        assert_ne!(fingerprint(&one).ok(), fingerprint(&other).ok());
    }
}
