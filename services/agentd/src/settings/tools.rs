//! Tools agents may be given besides the built-in ones: MCP servers (`[mcp.servers.<name>]`)
//! and tools answered by other services or webhooks (`[tools.<name>]`).

use super::SettingsError;
use agentd_mcp::{McpServerConfig, McpServerSettings};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `[mcp]`: the MCP servers whose tools agents may be given.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpSettings {
    /// `[mcp.servers.<name>]`: each server by name.
    pub servers: BTreeMap<String, McpServerSettings>,
}

impl McpSettings {
    /// The servers resolved: names checked, `${VAR}` references expanded with `var`.
    pub fn resolve(
        &self,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Vec<McpServerConfig>, SettingsError> {
        self.servers
            .iter()
            .map(|(name, server)| {
                server
                    .resolve(name, var)
                    .map_err(|e| SettingsError::Invalid(e.to_string()))
            })
            .collect()
    }

    /// The settings as `check-config` prints them (`env` and `headers` values masked).
    pub fn masked(&self) -> McpSettings {
        McpSettings {
            servers: self
                .servers
                .iter()
                .map(|(name, s)| (name.clone(), s.masked()))
                .collect(),
        }
    }
}

/// A tool of `[tools.<name>]`: answered by another service (`kind = "service"`) or a webhook
/// (`kind = "http"`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSettings {
    /// `service` or `http`.
    pub kind: agentd_proto::ToolKind,
    /// What it does, for the model.
    #[serde(default)]
    pub description: String,
    /// The JSON schema of its arguments (an object with no properties if not given).
    #[serde(default = "ToolSettings::no_parameters")]
    pub parameters: serde_json::Value,
    /// How long a call may take, ms: a webhook's request, retries included, or a service's
    /// answer; then the model gets a tool error. 0 waits for ever (service tools only).
    #[serde(default = "ToolSettings::default_timeout_ms")]
    pub timeout_ms: u64,
    /// `always` (every call waits for a person's approval) or `never`.
    #[serde(default)]
    pub approval: agentd_actors::Approval,
    /// Where a webhook tool POSTs.
    #[serde(default)]
    pub url: String,
    /// The environment variable holding a webhook tool's signing secret (unset: start-up
    /// error).
    #[serde(default)]
    pub secret_env: String,
}

impl ToolSettings {
    fn no_parameters() -> serde_json::Value {
        serde_json::json!({"type": "object", "properties": {}})
    }

    fn default_timeout_ms() -> u64 {
        60_000
    }

    /// Checks the tool's settings (not its environment, which `wiring` reads).
    pub(super) fn validate(&self, name: &str) -> Result<(), SettingsError> {
        let bad = |why: String| Err(SettingsError::Invalid(format!("tools.{name}: {why}")));
        if let Err(e) = agentd_actors::ToolCatalogue::check_name(name) {
            return bad(e.message);
        }
        if !self.parameters.is_object() {
            return bad("parameters must be a JSON schema (a table)".into());
        }
        match self.kind {
            agentd_proto::ToolKind::Http => {
                if !(self.url.starts_with("http://") || self.url.starts_with("https://")) {
                    return bad(format!(
                        "a webhook tool needs url = \"http(s)://…\" (got `{}`)",
                        self.url
                    ));
                }
                if self.timeout_ms == 0 {
                    return bad("a webhook tool needs timeout_ms > 0".into());
                }
            }
            agentd_proto::ToolKind::Service => {
                if !self.url.is_empty() || !self.secret_env.is_empty() {
                    return bad("url and secret_env are for kind = \"http\"".into());
                }
            }
            agentd_proto::ToolKind::Mcp => {
                return bad("MCP tools come from [mcp.servers.<name>], not [tools]".into());
            }
            agentd_proto::ToolKind::Builtin => {
                return bad("built-in tools are agentd's own, not [tools]".into());
            }
        }
        Ok(())
    }
}
