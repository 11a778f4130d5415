//! Child outputs (a reply, a yield, a failure) on their way to the parent's router: what did not
//! leave with the child's store batch ([`outputs_into_batch`]) reaches the router as a
//! [`ChildOutput`] message and goes to the parent's router here, or to the process that owns the
//! parent.

use super::ChannelRouter;
use super::messages::RemoteOutput;
use crate::errors::mailbox;
use crate::messages::{ChildOutput, output_envelope};
use crate::supervisor::SystemHandle;
use crate::supervisor::messages::ParentRouterFor;
use actix::prelude::*;
use agentd_proto::{AgentdError, ErrorCode, Item};
use std::sync::Arc;

/// At most this many remote children's records are kept (then the cache starts over).
const REMOTE_CHILDREN_CACHED: usize = 4096;

/// Tries of forwarding one child output to its parent's process (~20 s with the backoff)
/// before it is given up. Most outputs leave with the child's own store batch instead
/// ([`StoreWrite::Forward`]), which is retried until it is written.
const FORWARD_ATTEMPTS: u32 = 14;

impl Handler<ChildOutput> for ChannelRouter {
    type Result = AtomicResponse<Self, ()>;

    fn handle(&mut self, out: ChildOutput, _: &mut Self::Context) -> Self::Result {
        // Every output reaches this router through `Shared::output_to_router`, counted: it is
        // uncounted once this handler's work is done, whichever way it took.
        let left = Left(self.system.clone());
        let Some(parent_id) = out.child.channel.parent_id().map(str::to_string) else {
            return AtomicResponse::new(Box::pin(actix::fut::ready(())));
        };
        if let Some(transport) = self
            .system
            .deps
            .transport
            .clone()
            // Outputs go to the parent's ParentRouter in the process that owns it; what that
            // router puts in the parent's inbox is routed (and ordered) like any message.
            .filter(|t| !t.owns(&parent_id))
        {
            let env = output_envelope(&out, &parent_id, self.system.deps.clock.now_ms());
            // Outputs keep their order, so the next one waits while this one is tried again
            // (Redis unreachable: nothing else gets through meanwhile either).
            let fut = async move {
                let _left = left;
                let mut backoff = std::time::Duration::from_millis(50);
                for attempt in 1..=FORWARD_ATTEMPTS {
                    match transport.forward(&env).await {
                        Ok(()) => return,
                        // The parent is gone (deleted): no attempt would land.
                        Err(e) if e.code == ErrorCode::AgentNotFound => {
                            tracing::warn!(agent_id = %out.child.id, message_id = %env.id, error = %e, "child output not forwarded: its parent no longer exists");
                            return;
                        }
                        Err(e) if attempt == FORWARD_ATTEMPTS => {
                            tracing::error!(agent_id = %out.child.id, message_id = %env.id, error = %e, "child output could not be forwarded to its parent's process; given up");
                        }
                        Err(e) => {
                            tracing::warn!(agent_id = %out.child.id, message_id = %env.id, error = %e, "forwarding a child output failed; trying again");
                            tokio::time::sleep(backoff).await;
                            backoff = (backoff * 2).min(std::time::Duration::from_secs(2));
                        }
                    }
                }
            };
            return AtomicResponse::new(Box::pin(fut.into_actor(self)));
        }
        if let Some(pr) = self.system.directory.parent_router(&parent_id) {
            pr.do_send(out);
            return AtomicResponse::new(Box::pin(actix::fut::ready(())));
        }
        let supervisor = self.system.supervisor.clone();
        let fut = async move { supervisor.send(ParentRouterFor(parent_id)).await };
        AtomicResponse::new(Box::pin(fut.into_actor(self).map(move |res, _, _| {
            match res {
                Ok(pr) => pr.do_send(out),
                Err(e) => tracing::error!(error = %e, "no parent router; child output dropped"),
            }
            drop(left);
        })))
    }
}

impl Handler<RemoteOutput> for ChannelRouter {
    type Result = ResponseActFuture<Self, Result<(), AgentdError>>;

    fn handle(&mut self, RemoteOutput(env): RemoteOutput, _: &mut Self::Context) -> Self::Result {
        let Item::Output(output) = env.item else {
            return Box::pin(actix::fut::ready(Err(AgentdError::new(
                ErrorCode::BadEnvelope,
                "not an output envelope",
            ))));
        };
        let child_id = env.from.agent_id().unwrap_or_default().to_string();
        let cause = env.causation_id.unwrap_or(env.id);
        let cached = self.remote_children.get(&child_id).cloned();
        let store = self.system.deps.store.clone();
        let to = env.to.agent_id().unwrap_or_default().to_string();
        // The parent's router here, if this process owns the parent: the output is answered
        // (and its stream entry acknowledged) only once that router has handled it — put it
        // in the parent's durable inbox, or handed it to a waiting call — so a crash before
        // that leaves the entry to be read again.
        let parent_router = match env.to.agent_id() {
            Some(parent)
                if self
                    .system
                    .deps
                    .transport
                    .as_ref()
                    .is_none_or(|t| t.owns(parent)) =>
            {
                let known = self.system.directory.parent_router(parent);
                Some((known, self.system.supervisor.clone(), parent.to_string()))
            }
            _ => None,
        };
        let fut = async move {
            let (mut child, fresh) = match cached {
                Some(child) => (child, false),
                None => {
                    let child = store
                        .get_agent(&child_id)
                        .await?
                        .ok_or_else(|| AgentdError::agent_not_found(&child_id))?;
                    (Arc::new(child), true)
                }
            };
            // The span that made the output is the envelope's (a cached record may be
            // older): the parent's turn on it links to that span.
            if env.trace.is_some() && env.trace != child.trace {
                Arc::make_mut(&mut child).trace = env.trace;
            }
            let out = ChildOutput {
                child: child.clone(),
                output,
                cause,
                kept: false,
            };
            match parent_router {
                Some((Some(pr), _, _)) => pr.send(out).await.map_err(mailbox)?,
                Some((None, supervisor, parent)) => {
                    let pr = supervisor
                        .send(ParentRouterFor(parent))
                        .await
                        .map_err(mailbox)?;
                    pr.send(out).await.map_err(mailbox)?;
                }
                // The parent's partition is not this process's any more: the entry stays
                // pending for its next owner, whose claim delivers it in its place (appended
                // again, it would go behind the outputs sent after it).
                None => {
                    return Err(AgentdError::new(
                        ErrorCode::Unavailable,
                        format!("agent `{to}`: this process no longer holds its partition"),
                    ));
                }
            }
            Ok::<_, AgentdError>(fresh.then_some(child))
        };
        Box::pin(fut.into_actor(self).map(|res, act: &mut Self, _| {
            if let Some(child) = res? {
                if act.remote_children.len() >= REMOTE_CHILDREN_CACHED {
                    act.remote_children.clear();
                }
                act.remote_children.insert(child.id.clone(), child);
            }
            Ok(())
        }))
    }
}

/// Takes an output handed to the router off the count of what it holds when dropped, i.e. once
/// the router's work on it is done, whichever way it went.
struct Left(SystemHandle);

impl Drop for Left {
    fn drop(&mut self) {
        self.0.in_router.output_passed_on();
    }
}
