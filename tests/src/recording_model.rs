//! A model that notes every request it is asked before another model answers it, so a test can
//! say which calls a turn made (and which it did not).

use agentd_actors::{
    ModelCapabilities, ModelClient, ModelError, ModelRequest, ModelResponse, Purpose,
};
use agentd_proto::Role;
use async_trait::async_trait;
use std::sync::{Arc, Mutex, PoisonError};

/// One request as the model saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    /// The calling agent.
    pub agent_id: String,
    /// Why it was asked.
    pub purpose: Purpose,
    /// The role and text of the thread's last entry.
    pub last: Option<(Role, String)>,
    /// The system prompt it was sent.
    pub system_prompt: String,
    /// The names of the tools it was shown, in order.
    pub tools: Vec<String>,
}

/// Notes each request, then lets `inner` answer it.
pub struct RecordingModel {
    inner: Arc<dyn ModelClient>,
    seen: Mutex<Vec<SeenRequest>>,
}

impl RecordingModel {
    /// A recorder in front of `inner`.
    pub fn new(inner: Arc<dyn ModelClient>) -> Self {
        RecordingModel {
            inner,
            seen: Mutex::new(Vec::new()),
        }
    }

    /// The requests `agent_id` made so far, in order.
    pub fn requests_of(&self, agent_id: &str) -> Vec<SeenRequest> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|r| r.agent_id == agent_id)
            .cloned()
            .collect()
    }
}

#[async_trait]
impl ModelClient for RecordingModel {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    fn capabilities(&self) -> ModelCapabilities {
        self.inner.capabilities()
    }

    fn capabilities_of(&self, provider: Option<&str>) -> ModelCapabilities {
        self.inner.capabilities_of(provider)
    }

    async fn complete(&self, request: ModelRequest) -> Result<ModelResponse, ModelError> {
        let seen = SeenRequest {
            agent_id: request.agent_id.to_string(),
            purpose: request.purpose,
            last: request.thread.last().map(|e| (e.role, e.text.clone())),
            system_prompt: request.system_prompt.to_string(),
            tools: request.tools.iter().map(|t| t.name.clone()).collect(),
        };
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(seen);
        self.inner.complete(request).await
    }

    fn control(&self, agent_id: &str, control: agentd_proto::Control) {
        self.inner.control(agent_id, control);
    }
}
