//! `agentd-models`: implementations of the `ModelClient` port. An adapter: it compiles
//! against `agentd-ports` (the port, `Clock`), `agentd-observe` (the trace context a remote
//! call carries) and `agentd-proto`, not against the actors.
//!
//! | module | what it holds |
//! |---|---|
//! | [`a2a`] | [`A2aModel`]: a remote A2A 1.0 agent answering an agent's turns (its card, its context kept on the record) |
//! | [`scripted`] | [`ScriptedModel`]: deterministic answers from a TOML script; the offline default and the backend of the tests |
//! | [`openai`] | [`OpenAiModel`]: any OpenAI-compatible chat-completions endpoint |
//! | [`anthropic`] | [`AnthropicModel`]: the Anthropic Messages API |
//! | [`process`] | [`ProcessModel`]: one OS process per agent, JSON lines, lifecycle signals |
//! | [`claude_code`] | [`ClaudeCodeModel`]: the process backend's `claude-code` protocol: one Claude Code CLI per agent, its sessions resumed across restarts |
//! | [`router`] | [`ModelRouter`]: providers by name (per agent type or spawn) behind one client |
//! | [`webhook`] | [`HttpWebhooks`]: signed POSTs of webhook tools, with retries and a timeout |
//! | `sent` | the conversation every backend sends: calls paired, forwards as input, never ending with the model's own answer |
//! | [`http`] | the pooled async client, timeouts, retries with jittered backoff, rate limits and errors shared by the HTTP backends |

pub mod a2a;
pub mod anthropic;
pub mod claude_code;
pub mod http;
pub mod openai;
pub mod process;
pub mod router;
pub mod scripted;
mod sent;
pub mod webhook;

pub use a2a::A2aModel;
pub use anthropic::AnthropicModel;
pub use claude_code::{ClaudeCodeModel, ClaudeCodeSettings};
pub use http::HttpSettings;
pub use openai::OpenAiModel;
pub use process::ProcessModel;
pub use router::ModelRouter;
pub use scripted::{ScriptError, ScriptedModel};
pub use webhook::HttpWebhooks;
