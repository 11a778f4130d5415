//! `ModelRouter`: several providers behind one [`ModelClient`]. Agent types and spawns name a
//! provider (`[providers.<name>]` in the config); a request goes to the provider its agent
//! names, or to the default one (`[model]`). Lifecycle controls reach every provider, so a
//! process-per-agent backend follows its agents whichever provider they use.

use agentd_ports::{ModelCapabilities, ModelClient, ModelError, ModelRequest, ModelResponse};
use agentd_proto::Control;
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Routes model calls by provider name.
pub struct ModelRouter {
    default: Arc<dyn ModelClient>,
    named: BTreeMap<String, Arc<dyn ModelClient>>,
}

impl ModelRouter {
    /// A router with `default` for agents that name no provider.
    pub fn new(default: Arc<dyn ModelClient>) -> Self {
        ModelRouter {
            default,
            named: BTreeMap::new(),
        }
    }

    /// Adds provider `name`.
    pub fn with(mut self, name: impl Into<String>, client: Arc<dyn ModelClient>) -> Self {
        self.named.insert(name.into(), client);
        self
    }

    /// The names of the non-default providers.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.named.keys().map(String::as_str)
    }

    fn pick(&self, provider: Option<&str>) -> Result<&Arc<dyn ModelClient>, ModelError> {
        match provider {
            None => Ok(&self.default),
            Some(name) => self
                .named
                .get(name)
                .ok_or_else(|| ModelError::Failed(format!("no model provider `{name}`"))),
        }
    }
}

#[async_trait]
impl ModelClient for ModelRouter {
    fn backend(&self) -> &'static str {
        self.default.backend()
    }

    fn backend_of(&self, provider: Option<&str>) -> &'static str {
        self.pick(provider)
            .map(|c| c.backend())
            .unwrap_or("unknown")
    }

    fn capabilities(&self) -> ModelCapabilities {
        self.default.capabilities()
    }

    /// An unknown provider's calls fail at once ([`Self::complete`]): it can do nothing.
    fn capabilities_of(&self, provider: Option<&str>) -> ModelCapabilities {
        self.pick(provider)
            .map(|c| c.capabilities())
            .unwrap_or_default()
    }

    fn default_model_of(&self, provider: Option<&str>) -> Option<&str> {
        self.pick(provider).ok()?.default_model_of(None)
    }

    async fn complete(&self, request: ModelRequest) -> Result<ModelResponse, ModelError> {
        let client = self.pick(request.provider.as_deref())?.clone();
        client.complete(request).await
    }

    fn control(&self, agent_id: &str, control: Control) {
        self.default.control(agent_id, control);
        for client in self.named.values() {
            client.control(agent_id, control);
        }
    }

    fn conversation_replaced(&self, agent_id: &str) {
        self.default.conversation_replaced(agent_id);
        for client in self.named.values() {
            client.conversation_replaced(agent_id);
        }
    }
}
