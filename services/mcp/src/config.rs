//! `[mcp.servers.<name>]`: one MCP server as configured, and the same server resolved at
//! start-up (its name checked, its `${VAR}` references expanded).

use crate::expand::{ExpandError, expand};
use agentd_ports::is_valid_server_name;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Per-call timeout when a server does not set `timeout_ms`.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;

/// One `[mcp.servers.<name>]` table as written: `command` (stdio) or `url` (streamable HTTP).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpServerSettings {
    /// Program and arguments of a stdio server, which agentd starts and supervises.
    pub command: Vec<String>,
    /// Environment of a stdio server's process, besides agentd's own; values may hold
    /// `${VAR}` references.
    pub env: BTreeMap<String, String>,
    /// URL of a streamable HTTP server.
    pub url: String,
    /// Headers sent to a streamable HTTP server with every request; values may hold `${VAR}`
    /// references.
    pub headers: BTreeMap<String, String>,
    /// Tools of the server (by their own name) whose calls wait for a person's approval.
    pub approval: Vec<String>,
    /// How long one call may take, ms (then the model gets a tool error). Default 60000.
    pub timeout_ms: Option<u64>,
}

impl McpServerSettings {
    /// The settings as `check-config` prints them: `env` and `headers` values masked (they
    /// may hold secrets written in place).
    pub fn masked(&self) -> McpServerSettings {
        let mask = |m: &BTreeMap<String, String>| {
            m.keys()
                .map(|k| (k.clone(), "***".to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        McpServerSettings {
            env: mask(&self.env),
            headers: mask(&self.headers),
            ..self.clone()
        }
    }
}

/// How agentd reaches a server.
#[derive(Clone, PartialEq)]
pub enum McpTransport {
    /// A process agentd starts, speaking MCP on its stdin and stdout.
    Stdio {
        /// Program and arguments.
        command: Vec<String>,
        /// Extra environment, expanded (may hold secrets: never logged).
        env: BTreeMap<String, String>,
    },
    /// A streamable HTTP endpoint.
    StreamableHttp {
        /// The endpoint.
        url: String,
        /// Headers, expanded (may hold secrets: never logged).
        headers: BTreeMap<String, String>,
    },
}

impl McpTransport {
    /// `stdio` or `streamable_http`.
    pub fn kind(&self) -> &'static str {
        match self {
            McpTransport::Stdio { .. } => "stdio",
            McpTransport::StreamableHttp { .. } => "streamable_http",
        }
    }
}

/// Secrets stay out of logs: only the program or the URL shows.
impl std::fmt::Debug for McpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            McpTransport::Stdio { command, env } => f
                .debug_struct("Stdio")
                .field("program", &command.first())
                .field("env_keys", &env.keys().collect::<Vec<_>>())
                .finish(),
            McpTransport::StreamableHttp { url, headers } => f
                .debug_struct("StreamableHttp")
                .field("url", url)
                .field("header_names", &headers.keys().collect::<Vec<_>>())
                .finish(),
        }
    }
}

/// A server ready to be started: name checked, references expanded.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerConfig {
    /// The configured name.
    pub name: String,
    /// How to reach it.
    pub transport: McpTransport,
    /// Its tools whose calls wait for approval.
    pub approval: Vec<String>,
    /// Per-call timeout.
    pub timeout: Duration,
}

/// Why a `[mcp.servers.<name>]` table cannot be used. Messages name the server and the key,
/// never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpConfigError {
    /// The name does not fit `^[a-z0-9][a-z0-9_-]{0,31}$` or holds `__`.
    #[error(
        "mcp.servers.{0}: a server name must match ^[a-z0-9][a-z0-9_-]{{0,31}}$ and not hold `__`"
    )]
    BadName(String),
    /// Neither or both of `command` and `url`.
    #[error("mcp.servers.{0}: set either command (stdio) or url (streamable HTTP)")]
    Transport(String),
    /// `url` is not an http(s) URL.
    #[error("mcp.servers.{0}.url must start with http:// or https://")]
    Url(String),
    /// `env` or `headers` on the wrong kind of server.
    #[error("mcp.servers.{server}.{key} applies only to {applies_to} servers")]
    Misplaced {
        /// The server.
        server: String,
        /// `env` or `headers`.
        key: &'static str,
        /// `stdio` or `streamable HTTP`.
        applies_to: &'static str,
    },
    /// `timeout_ms = 0`.
    #[error("mcp.servers.{0}.timeout_ms must be > 0")]
    Timeout(String),
    /// A `${VAR}` reference cannot be expanded.
    #[error("mcp.servers.{server}.{key}.{entry}: {source}")]
    Expand {
        /// The server.
        server: String,
        /// `env` or `headers`.
        key: &'static str,
        /// The variable or header name.
        entry: String,
        /// What is wrong.
        source: ExpandError,
    },
}

impl McpServerSettings {
    /// Checks the table of server `name` and expands its references with `var` (the process
    /// environment, or a test's).
    pub fn resolve(
        &self,
        name: &str,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<McpServerConfig, McpConfigError> {
        if !is_valid_server_name(name) {
            return Err(McpConfigError::BadName(name.to_string()));
        }
        let expand_all = |key: &'static str, m: &BTreeMap<String, String>| {
            m.iter()
                .map(|(k, v)| {
                    expand(v, var).map(|v| (k.clone(), v)).map_err(|source| {
                        McpConfigError::Expand {
                            server: name.to_string(),
                            key,
                            entry: k.clone(),
                            source,
                        }
                    })
                })
                .collect::<Result<BTreeMap<_, _>, _>>()
        };
        let misplaced = |key, applies_to| McpConfigError::Misplaced {
            server: name.to_string(),
            key,
            applies_to,
        };
        let url = self.url.trim();
        let transport = match (self.command.is_empty(), url.is_empty()) {
            (false, true) => {
                if !self.headers.is_empty() {
                    return Err(misplaced("headers", "streamable HTTP"));
                }
                McpTransport::Stdio {
                    command: self.command.clone(),
                    env: expand_all("env", &self.env)?,
                }
            }
            (true, false) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(McpConfigError::Url(name.to_string()));
                }
                if !self.env.is_empty() {
                    return Err(misplaced("env", "stdio"));
                }
                McpTransport::StreamableHttp {
                    url: url.to_string(),
                    headers: expand_all("headers", &self.headers)?,
                }
            }
            _ => return Err(McpConfigError::Transport(name.to_string())),
        };
        let timeout_ms = self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
        if timeout_ms == 0 {
            return Err(McpConfigError::Timeout(name.to_string()));
        }
        Ok(McpServerConfig {
            name: name.to_string(),
            transport,
            approval: self.approval.clone(),
            timeout: Duration::from_millis(timeout_ms),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cret".to_string())
    }

    fn stdio() -> McpServerSettings {
        McpServerSettings {
            command: vec!["server".into()],
            env: BTreeMap::from([("GITHUB_TOKEN".into(), "${TOKEN}".into())]),
            approval: vec!["write_file".into()],
            ..Default::default()
        }
    }

    #[test]
    fn a_stdio_server_resolves_with_its_environment_expanded() {
        let server = stdio().resolve("files", &var);
        let Ok(server) = server else {
            panic!("{server:?}");
        };
        assert_eq!(
            server.transport,
            McpTransport::Stdio {
                command: vec!["server".into()],
                env: BTreeMap::from([("GITHUB_TOKEN".into(), "s3cret".into())]),
            }
        );
        assert_eq!(server.timeout, Duration::from_millis(DEFAULT_TIMEOUT_MS));
        assert!(
            !format!("{server:?}").contains("s3cret"),
            "no secret in Debug"
        );
    }

    #[test]
    fn an_http_server_resolves_with_its_headers_expanded() {
        let settings = McpServerSettings {
            url: "http://127.0.0.1:9000/mcp".into(),
            headers: BTreeMap::from([("Authorization".into(), "Bearer ${TOKEN}".into())]),
            timeout_ms: Some(5),
            ..Default::default()
        };
        let server = settings.resolve("search", &var).map(|s| s.transport);
        assert_eq!(
            server,
            Ok(McpTransport::StreamableHttp {
                url: "http://127.0.0.1:9000/mcp".into(),
                headers: BTreeMap::from([("Authorization".into(), "Bearer s3cret".into())]),
            })
        );
    }

    #[test]
    fn bad_tables_are_refused_without_showing_values() {
        let bad_name = stdio().resolve("my__files", &var);
        assert_eq!(bad_name, Err(McpConfigError::BadName("my__files".into())));
        let unset = McpServerSettings {
            env: BTreeMap::from([("KEY".into(), "${NOT_SET}".into())]),
            ..stdio()
        }
        .resolve("files", &var);
        let message = unset.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            message.contains("mcp.servers.files.env.KEY") && message.contains("NOT_SET"),
            "{message}"
        );
        let both = McpServerSettings {
            url: "http://x/mcp".into(),
            ..stdio()
        };
        assert_eq!(
            both.resolve("files", &var),
            Err(McpConfigError::Transport("files".into()))
        );
        let neither = McpServerSettings::default().resolve("files", &var);
        assert_eq!(neither, Err(McpConfigError::Transport("files".into())));
        let zero = McpServerSettings {
            timeout_ms: Some(0),
            ..stdio()
        };
        assert_eq!(
            zero.resolve("files", &var),
            Err(McpConfigError::Timeout("files".into()))
        );
        let masked = stdio().masked();
        assert_eq!(
            masked.env.get("GITHUB_TOKEN").map(String::as_str),
            Some("***")
        );
    }
}
