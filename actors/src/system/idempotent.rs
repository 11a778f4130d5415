//! Idempotent spawns and messages (`Idempotency-Key`, the commands' `idempotency_key`): a
//! spawn retried with the same key in the same scope answers the agent the first one made and
//! never makes a second, and a message retried with the same key to the same agent is queued
//! once — across processes and restarts too.
//!
//! A message's id is derived from the agent and the key, so every attempt sends the same
//! envelope, and its claim (the first request's fingerprint, settled once the message is
//! queued) is kept in the agent's own slot beside its inbox for [`KEPT_MS`]: a retry of a
//! settled claim answers at once, a retry of one under way (or of an attempt that died
//! half-way, or was answered `unavailable` though it landed) sends the envelope again, which the
//! agent's inbox takes once. Retention is by time, not by a count of recent ids: a key is
//! remembered however many messages the agent got since.
//!
//! The agent's id is derived from the scope (the parent, or none for a root) and the key, so
//! every attempt names the same agent, and a store with slots keeps the key's claim in that
//! agent's own slot: a failover keeps both or neither. The claim holds the first request's
//! fingerprint: a retry with the same request answers the agent (once its record is written),
//! the key with another request is `idempotency_key_reused` (422, as the IETF
//! `Idempotency-Key` draft says). A claim is made for [`IN_FLIGHT_MS`] and kept for
//! [`KEPT_MS`] once the agent is written, so a spawn that died half-way frees its key soon;
//! after that, a retry still finds the agent by its derived id while it exists.

use super::AgentSystem;
use crate::ports::ClaimEnd;
use agentd_proto::ids::derived_id;
use agentd_proto::{AgentRecord, AgentdError, ErrorCode, InboxItem, SpawnRequest};
use std::time::Duration;
use uuid::Uuid;

/// How long a claim lasts while its spawn runs: a spawn that died before writing its agent
/// holds the key this long.
const IN_FLIGHT_MS: u64 = 30_000;
/// How long a key is remembered once its agent is written (24 h).
pub const KEPT_MS: u64 = 24 * 60 * 60 * 1000;
/// How long a retry waits for the agent of a first attempt still under way.
const FIRST_ATTEMPT_WAIT: Duration = Duration::from_secs(3);
/// The longest key taken.
const MAX_KEY_CHARS: usize = 255;
/// The claim of an idempotent spawn, in the slot of the agent it makes.
const SPAWN_CLAIM: &str = "spawn";
/// A settled claim, kept [`KEPT_MS`].
const KEEP: ClaimEnd = ClaimEnd::Settled { keep_ms: KEPT_MS };

/// The id of the message key `key` sends to `agent_id`.
pub fn idempotent_message_id(agent_id: &str, key: &str) -> Uuid {
    derived_id(Uuid::nil(), &format!("message\u{1f}{agent_id}\u{1f}{key}"))
}

/// The id of the agent spawn key `key` makes under `parent` (`None`: a root).
pub fn idempotent_agent_id(parent: Option<&str>, key: &str) -> String {
    let scope = parent.unwrap_or_default();
    derived_id(Uuid::nil(), &format!("spawn\u{1f}{scope}\u{1f}{key}")).to_string()
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
        let id = idempotent_agent_id(req.parent_id.as_deref(), key);
        let fingerprint = fingerprint(&req)?;
        let store = &self.system.deps.store;
        match store
            .idempotency_claim(&id, SPAWN_CLAIM, &fingerprint, IN_FLIGHT_MS)
            .await?
            .map(|c| c.fingerprint)
        {
            Some(first) if first != fingerprint => {
                return Err(AgentdError::new(
                    ErrorCode::IdempotencyKeyReused,
                    format!("idempotency key `{key}` was used with another spawn request"),
                ));
            }
            Some(_) => {
                // A retry: the first attempt's agent, once it is written.
                return match self.first_attempts_agent(&id).await? {
                    Some(rec) => {
                        self.first_message_again(&rec, &req).await?;
                        store.replicated(&id).await?;
                        Ok(rec)
                    }
                    None => Err(AgentdError::new(
                        ErrorCode::Unavailable,
                        format!("a spawn with idempotency key `{key}` is still under way; retry"),
                    )),
                };
            }
            None => {
                if let Some(rec) = store.get_agent(&id).await? {
                    // The key's claim expired; its agent lives on.
                    store.idempotency_claim_end(&id, SPAWN_CLAIM, KEEP).await?;
                    store.replicated(&id).await?;
                    return Ok(rec);
                }
            }
        }
        match self.spawn_as(req, Some(id.clone())).await {
            Ok(rec) => {
                store.idempotency_claim_end(&id, SPAWN_CLAIM, KEEP).await?;
                Ok(rec)
            }
            Err(e) if !crate::ports::is_transient(&e) => {
                // Refused before anything was written: the key is free again.
                let release = store
                    .idempotency_claim_end(&id, SPAWN_CLAIM, ClaimEnd::Released)
                    .await;
                if let Err(release) = release {
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
    /// attempt still under way to write it.
    async fn first_attempts_agent(&self, id: &str) -> Result<Option<AgentRecord>, AgentdError> {
        let deadline = tokio::time::Instant::now() + FIRST_ATTEMPT_WAIT;
        loop {
            if let Some(rec) = self.system.deps.store.get_agent(id).await? {
                return Ok(Some(rec));
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
