//! `agentd-models`: implementations of the `ModelClient` port.
//!
//! | module | what it holds |
//! |---|---|
//! | [`scripted`] | [`ScriptedModel`]: deterministic answers from a TOML script; the offline default and the backend of the tests |

pub mod scripted;

pub use scripted::{ScriptError, ScriptedModel};
