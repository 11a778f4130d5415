//! Why agentd did not start: [`StartError`], one variant per cause, each keeping the error
//! underneath as its [`source`](std::error::Error::source). The library's start-up path
//! (`Builder`, `wiring::wire`, `Telemetry::start`, `logs::install`) answers it; the binaries turn it into `anyhow` at their edge
//! (`main.rs` prints it as one line of its causes).
//!
//! A variant's message says what was being done and leaves its cause to the source, so the
//! line `main` prints (each cause joined by `: `) reads as before: `connecting to Redis at …:
//! <the store's error>`.

use crate::settings::SettingsError;
use agentd_proto::AgentdError;

/// An error underneath a [`StartError`], whatever its type.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why agentd did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The settings: read, validated, or found inconsistent while wiring (an agent type naming
    /// a provider that is not configured, `[a2a] expose` naming a type that does not exist).
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The store could not be opened or reached.
    #[error("{what}")]
    Store {
        /// What was being done (`connecting to Redis at …`).
        what: String,
        /// The store's own error.
        #[source]
        source: agentd_actors::StoreError,
    },
    /// The Redis bus did not start: partitions and leases, the command stream, the tool
    /// replies.
    #[error("{what}")]
    Bus {
        /// What was being done (`starting the command consumer`).
        what: String,
        /// The bus's error.
        #[source]
        source: AgentdError,
    },
    /// A provider's model backend could not be built (its script, its key, its client).
    #[error("{what}")]
    Model {
        /// What was being built (`providers.fast: the OpenAI backend`).
        what: String,
        /// Why not.
        #[source]
        source: BoxError,
    },
    /// The agent types could not be loaded.
    #[error("agent types")]
    AgentTypes(#[source] AgentdError),
    /// The tools: a `[tools.<name>]` that cannot be built, or an agent type listing a tool
    /// that does not exist.
    #[error("{what}")]
    Tools {
        /// What was being built or checked.
        what: String,
        /// Why not.
        #[source]
        source: BoxError,
    },
    /// The MCP servers' settings could not be resolved (an unset variable they name).
    #[error("MCP servers")]
    Mcp(#[source] SettingsError),
    /// Recovering the agents this process owns failed.
    #[error("recovering agents")]
    Recovery(#[source] AgentdError),
    /// The OpenTelemetry exporters could not be built.
    #[error("{what}")]
    Telemetry {
        /// Which exporter (`telemetry: the OTLP span exporter`).
        what: String,
        /// Why not.
        #[source]
        source: BoxError,
    },
    /// The log subscriber could not be installed.
    #[error("{what}")]
    Logs {
        /// What failed (`installing the log subscriber`).
        what: String,
        /// Why.
        #[source]
        source: BoxError,
    },
    /// The HTTP server could not listen on `server.bind`.
    #[error("binding {addr}")]
    Bind {
        /// `server.bind`.
        addr: String,
        /// The socket's error.
        #[source]
        source: std::io::Error,
    },
}

impl StartError {
    /// The cause as a stable code, for programs and log fields: `settings`, `store`, `bus`,
    /// `model`, `agent_types`, `tools`, `mcp`, `recovery`, `telemetry`, `logs` or `bind`.
    pub fn code(&self) -> &'static str {
        match self {
            StartError::Settings(_) => "settings",
            StartError::Store { .. } => "store",
            StartError::Bus { .. } => "bus",
            StartError::Model { .. } => "model",
            StartError::AgentTypes(_) => "agent_types",
            StartError::Tools { .. } => "tools",
            StartError::Mcp(_) => "mcp",
            StartError::Recovery(_) => "recovery",
            StartError::Telemetry { .. } => "telemetry",
            StartError::Logs { .. } => "logs",
            StartError::Bind { .. } => "bind",
        }
    }

    /// Settings found inconsistent while wiring: `configuration: <why>`.
    pub(crate) fn invalid(why: impl Into<String>) -> Self {
        StartError::Settings(SettingsError::Invalid(why.into()))
    }

    /// A [`StartError::Store`].
    pub(crate) fn store(what: impl Into<String>, source: agentd_actors::StoreError) -> Self {
        StartError::Store {
            what: what.into(),
            source,
        }
    }

    /// A [`StartError::Bus`].
    pub(crate) fn bus(what: impl Into<String>, source: AgentdError) -> Self {
        StartError::Bus {
            what: what.into(),
            source,
        }
    }

    /// A [`StartError::Model`].
    pub(crate) fn model(what: impl Into<String>, source: impl Into<BoxError>) -> Self {
        StartError::Model {
            what: what.into(),
            source: source.into(),
        }
    }

    /// A [`StartError::Tools`].
    pub(crate) fn tools(what: impl Into<String>, source: impl Into<BoxError>) -> Self {
        StartError::Tools {
            what: what.into(),
            source: source.into(),
        }
    }

    /// A [`StartError::Telemetry`].
    pub(crate) fn telemetry(what: impl Into<String>, source: impl Into<BoxError>) -> Self {
        StartError::Telemetry {
            what: what.into(),
            source: source.into(),
        }
    }

    /// A [`StartError::Logs`].
    pub(crate) fn logs(what: impl Into<String>, source: impl Into<BoxError>) -> Self {
        StartError::Logs {
            what: what.into(),
            source: source.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The causes as `main` prints them: each joined by `: `.
    fn line(e: &dyn std::error::Error) -> String {
        let mut text = e.to_string();
        let mut cause = e.source();
        while let Some(c) = cause {
            text.push_str(": ");
            text.push_str(&c.to_string());
            cause = c.source();
        }
        text
    }

    #[test]
    fn a_variant_says_what_was_done_and_its_source_why() {
        let e = StartError::bus(
            "starting the command consumer",
            AgentdError::new(agentd_proto::ErrorCode::Unavailable, "no Redis"),
        );
        assert_eq!(e.code(), "bus");
        assert_eq!(
            line(&e),
            "starting the command consumer: unavailable: no Redis"
        );
        let e = StartError::invalid("agent type `t` names provider `p`, which is not configured");
        assert_eq!(e.code(), "settings");
        assert_eq!(
            line(&e),
            "configuration: agent type `t` names provider `p`, which is not configured"
        );
    }
}
