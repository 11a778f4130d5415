//! [`AgentSystem`] as the inbound port a transport holds ([`Inbound`]): the bus calls the agent
//! system through it, so it compiles against `agentd-ports`, not against this crate. Each
//! method is the facade's own, unchanged (`route_from_stream` queues its envelope when called,
//! as the port requires).

use super::AgentSystem;
use crate::ports::{AgentFilter, Inbound, Routed, StreamEntry};
use agentd_proto::{AgentdError, Command, Control, Envelope};
use async_trait::async_trait;
use serde_json::Value;
use std::sync::Arc;
use uuid::Uuid;

#[async_trait]
impl Inbound for AgentSystem {
    fn route_from_stream(&self, env: Envelope, entry: Option<Arc<StreamEntry>>) -> Routed {
        Box::pin(AgentSystem::route_from_stream(self, env, entry))
    }

    async fn execute(&self, cmd: Command, request: Option<Uuid>) -> Result<Value, AgentdError> {
        match request {
            Some(request) => self.execute_request(cmd, request).await,
            None => AgentSystem::execute(self, cmd).await,
        }
    }

    async fn take_output(&self, env: Envelope) -> Result<(), AgentdError> {
        AgentSystem::take_output(self, env).await
    }

    async fn settle_transport(&self) -> Result<(), AgentdError> {
        AgentSystem::settle_transport(self).await
    }

    async fn control(&self, agent_id: &str, control: Control) -> Result<(), AgentdError> {
        AgentSystem::control(self, agent_id, control)
            .await
            .map(|_| ())
    }

    async fn passivate(&self, filter: AgentFilter) -> usize {
        AgentSystem::passivate(self, filter).await
    }

    async fn recover_where(&self, filter: AgentFilter) -> Result<usize, AgentdError> {
        AgentSystem::recover_where(self, filter).await
    }
}
