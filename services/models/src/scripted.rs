//! The scripted model: deterministic answers from a TOML script of rules, so agentd runs
//! offline (the default backend) and tests get exact, repeatable conversations. Rules match the
//! last thread entry and answer with text, tool calls and token usage, or with a delay (on the
//! injected clock), an error, a rate limit or a panic.
//!
//! ```toml
//! [defaults]
//! text = "OK"                      # answer when no rule matches
//!
//! [[rule]]
//! agent = "lead"                   # agent type or title
//! role = "user"                    # role of the last entry: user|assistant|tool|system|any
//! contains = "deploy"              # substring of the last entry's text
//! equals = "deploy now"            # the whole (trimmed) text
//! purpose = "turn"                 # turn | compact
//! once = false                     # fire at most once per agent
//! text = "Deploying {{input}}"     # {{input}} {{title}} {{agent_type}} {{agent_id}} {{system_prompt}}
//!                                  # {{tools}} (the names of the tools shown, comma-separated)
//!                                  # {{user_turns}} (the user entries of the thread shown)
//! delay_ms = 0                     # wait on the clock first
//! # instead of an answer: error = "…" (a failure no retry fixes), unavailable = "…" (a
//! # provider down for now: the turn is retried), rate_limit_ms = N (a 429), panic = "…"
//! stream_ms = 0                    # > 0: stream the text word by word, this many ms apart
//! usage = { input = 10, output = 5 }
//! [[rule.tool_calls]]
//! name = "Manage"                  # substituted too: "{{input}}" calls the tool the input names
//! arguments = { command = "send_message", worker = "Ops", message = "{{input}}", threadAlias = "a" }
//! ```

use agentd_ports::{
    Clock, ModelCapabilities, ModelClient, ModelError, ModelRequest, ModelResponse, Purpose,
};
use agentd_proto::{Role, ToolCall, Usage};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

/// Why a script could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file could not be read.
    #[error("cannot read script {path}: {source}")]
    Read {
        /// The path.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The TOML is invalid (the message names the line).
    #[error("invalid script: {0}")]
    Toml(#[from] toml::de::Error),
    /// A rule is inconsistent.
    #[error("invalid rule #{index}: {why}")]
    Rule {
        /// 1-based rule number.
        index: usize,
        /// What is wrong.
        why: String,
    },
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Defaults {
    text: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptToolCall {
    name: String,
    #[serde(default)]
    arguments: Value,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rule {
    agent: Option<String>,
    role: Option<String>,
    contains: Option<String>,
    equals: Option<String>,
    purpose: Option<String>,
    #[serde(default)]
    once: bool,
    text: Option<String>,
    #[serde(default)]
    delay_ms: u64,
    /// Streams the text to the caller's observer word by word, this many ms apart (on the
    /// clock), as a streaming provider would: `text_delta` events, and an answer a
    /// cancel or an interrupt cuts short mid-way.
    #[serde(default)]
    stream_ms: u64,
    error: Option<String>,
    /// Fails as a provider that cannot answer for now (a 5xx, a timeout): a failure its
    /// turn is retried for, where `error` is one it is not.
    unavailable: Option<String>,
    rate_limit_ms: Option<u64>,
    panic: Option<String>,
    usage: Option<Usage>,
    #[serde(default)]
    tool_calls: Vec<ScriptToolCall>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Script {
    #[serde(default)]
    defaults: Defaults,
    #[serde(default, rename = "rule")]
    rules: Vec<Rule>,
}

#[derive(Default)]
struct State {
    fired: HashSet<(usize, String)>,
    calls: HashMap<String, u64>,
}

/// A deterministic `ModelClient` driven by a script.
pub struct ScriptedModel {
    script: Script,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

impl ScriptedModel {
    /// Loads a script from TOML text.
    pub fn from_toml_str(text: &str, clock: Arc<dyn Clock>) -> Result<Self, ScriptError> {
        let script: Script = toml::from_str(text)?;
        for (i, r) in script.rules.iter().enumerate() {
            let bad = |why: String| ScriptError::Rule { index: i + 1, why };
            if let Some(role) = &r.role
                && !matches!(
                    role.as_str(),
                    "user" | "assistant" | "tool" | "system" | "any"
                )
            {
                return Err(bad(format!(
                    "role `{role}` is not user, assistant, tool, system or any"
                )));
            }
            if let Some(p) = &r.purpose
                && !matches!(p.as_str(), "turn" | "compact")
            {
                return Err(bad(format!("purpose `{p}` is not turn or compact")));
            }
            if r.tool_calls.iter().any(|c| c.name.trim().is_empty()) {
                return Err(bad("a tool call has no name".into()));
            }
        }
        tracing::info!(
            rules = script.rules.len(),
            "scripted model loaded (offline backend: answers come from the script, not an LLM)"
        );
        Ok(ScriptedModel {
            script,
            clock,
            state: Mutex::new(State::default()),
        })
    }

    /// Loads a script file.
    pub fn from_file(path: &Path, clock: Arc<dyn Clock>) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_toml_str(&text, clock)
    }

    /// How many rules the script has.
    pub fn rule_count(&self) -> usize {
        self.script.rules.len()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn matches(
        &self,
        index: usize,
        rule: &Rule,
        req: &ModelRequest,
        last_role: Option<Role>,
        input: &str,
    ) -> bool {
        if let Some(agent) = &rule.agent {
            let agent = agent.trim();
            if agent != &*req.agent_type && agent != req.title.trim() {
                return false;
            }
        }
        if let Some(role) = rule.role.as_deref().filter(|r| *r != "any")
            && last_role.map(role_name) != Some(role)
        {
            return false;
        }
        let purpose = match req.purpose {
            Purpose::Turn => "turn",
            Purpose::Compact => "compact",
        };
        if rule.purpose.as_deref().unwrap_or("turn") != purpose {
            return false;
        }
        if let Some(c) = &rule.contains
            && !input.contains(c.as_str())
        {
            return false;
        }
        if let Some(e) = &rule.equals
            && input.trim() != e.trim()
        {
            return false;
        }
        !(rule.once
            && self
                .state()
                .fired
                .contains(&(index, req.agent_id.to_string())))
    }
}

fn substitute(text: &str, req: &ModelRequest, input: &str) -> String {
    if !text.contains("{{") {
        return text.to_string();
    }
    text.replace("{{input}}", input)
        .replace("{{tool_result}}", input)
        .replace("{{title}}", &req.title)
        .replace("{{agent_type}}", &req.agent_type)
        .replace("{{agent_id}}", &req.agent_id)
        .replace("{{system_prompt}}", &req.system_prompt)
        .replace("{{tools}}", &tool_names(req))
        .replace("{{user_turns}}", &user_turns(req).to_string())
}

/// How many user entries the thread `req` shows the model holds (what `{{user_turns}}`
/// reads): a conversation's turns, the one asked now included.
fn user_turns(req: &ModelRequest) -> usize {
    req.thread.iter().filter(|e| e.role == Role::User).count()
}

/// The names of the tools `req` shows the model, comma-separated (what `{{tools}}` reads).
fn tool_names(req: &ModelRequest) -> String {
    req.tools
        .iter()
        .map(|t| t.name.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

fn substitute_value(v: &Value, req: &ModelRequest, input: &str) -> Value {
    match v {
        Value::String(s) => Value::String(substitute(s, req, input)),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|i| substitute_value(i, req, input))
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), substitute_value(v, req, input)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn estimate(chars: usize) -> u64 {
    (chars / 4) as u64 + 1
}

#[async_trait]
impl ModelClient for ScriptedModel {
    fn backend(&self) -> &'static str {
        "scripted"
    }

    /// A script's rate limits are its agent's own; a rule with `stream_ms` streams its text.
    fn capabilities(&self) -> ModelCapabilities {
        ModelCapabilities {
            streams: true,
            ..ModelCapabilities::default()
        }
    }

    async fn complete(&self, req: ModelRequest) -> Result<ModelResponse, ModelError> {
        let last = req.thread.last();
        let input = last.map(|e| e.text.clone()).unwrap_or_default();
        let last_role = last.map(|e| e.role);
        // The prompt's size, for estimated usage only (a walk of the whole thread: not done
        // when the rule gives its usage).
        let context_chars =
            || req.system_prompt.len() + req.thread.iter().map(|e| e.text.len()).sum::<usize>();
        let found = self
            .script
            .rules
            .iter()
            .enumerate()
            .find(|(i, r)| self.matches(*i, r, &req, last_role, &input));
        let Some((index, rule)) = found else {
            let text = match req.purpose {
                Purpose::Compact => {
                    let head: String = input.chars().take(80).collect();
                    format!("{} earlier entries; last: {head}", req.thread.len())
                }
                Purpose::Turn => match &self.script.defaults.text {
                    Some(t) => substitute(t, &req, &input),
                    None => format!("(scripted) {input}"),
                },
            };
            let usage = Usage {
                input: estimate(context_chars()),
                output: estimate(text.len()),
                ..Usage::default()
            };
            return Ok(ModelResponse {
                text,
                tool_calls: Vec::new(),
                usage,
                cut_off: false,
                cli_run: None,
                model: None,
            });
        };
        if rule.once {
            self.state().fired.insert((index, req.agent_id.to_string()));
        }
        if rule.delay_ms > 0 {
            self.clock.sleep(rule.delay_ms).await;
        }
        if let Some(msg) = &rule.panic {
            panic!("{msg}");
        }
        if let Some(msg) = &rule.error {
            return Err(ModelError::Failed(substitute(msg, &req, &input)));
        }
        if let Some(msg) = &rule.unavailable {
            return Err(ModelError::Unavailable(substitute(msg, &req, &input)));
        }
        if let Some(ms) = rule.rate_limit_ms {
            return Err(ModelError::RateLimited { retry_after_ms: ms });
        }
        let text = rule
            .text
            .as_deref()
            .map(|t| substitute(t, &req, &input))
            .unwrap_or_default();
        if rule.stream_ms > 0
            && let Some(observer) = &req.observer
        {
            for piece in text.split_inclusive(' ') {
                observer.text(piece);
                self.clock.sleep(rule.stream_ms).await;
            }
        }
        let tool_calls = rule
            .tool_calls
            .iter()
            .map(|c| {
                let n = {
                    let mut st = self.state();
                    let n = st.calls.entry(req.agent_id.to_string()).or_insert(0);
                    *n += 1;
                    *n
                };
                ToolCall {
                    id: format!("call-{n}"),
                    name: substitute(&c.name, &req, &input),
                    arguments: substitute_value(&c.arguments, &req, &input),
                }
            })
            .collect();
        let usage = rule.usage.unwrap_or_else(|| Usage {
            input: estimate(context_chars()),
            output: estimate(text.len()),
            ..Usage::default()
        });
        Ok(ModelResponse {
            text,
            tool_calls,
            usage,
            cut_off: false,
            cli_run: None,
            model: None,
        })
    }
}
