//! The conversation an agent whose provider is a remote A2A agent keeps with it.

use serde::{Deserialize, Serialize};

/// The remote conversation of an agent whose turns a remote A2A agent answers (a provider of
/// kind `a2a`). Kept on the agent's record as JSON in `agent_cli.session_id` (the field an
/// agent CLI's session uses: the backend gets it back with each call, checkpoints keep it, a
/// reset drops it); `inspect` shows it as `remote_context_id` and `remote_task_id`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteA2aSession {
    /// The remote context (`contextId`); every message of the agent goes to it.
    pub context_id: String,
    /// The remote task waiting for input (`TASK_STATE_INPUT_REQUIRED`): the next message
    /// answers it. `None` when no task waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

impl RemoteA2aSession {
    /// The session kept as `s`; `None` when there is none or it is not one (an agent CLI's
    /// session id; a garbled value starts a new remote context rather than failing a turn).
    pub fn parse(s: Option<&str>) -> Option<RemoteA2aSession> {
        serde_json::from_str(s?).ok()
    }

    /// The JSON kept on the record.
    pub fn to_json(&self) -> Option<String> {
        serde_json::to_string(self).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_survives_its_json_and_a_garbled_or_cli_one_is_none() {
        let s = RemoteA2aSession {
            context_id: "c".into(),
            task_id: Some("t".into()),
        };
        assert_eq!(RemoteA2aSession::parse(s.to_json().as_deref()), Some(s));
        assert_eq!(RemoteA2aSession::parse(Some("not json")), None);
        assert_eq!(
            RemoteA2aSession::parse(Some("0190a5f2-7b6e-7cc0-8a4b-000000000001")),
            None
        );
        assert_eq!(RemoteA2aSession::parse(None), None);
    }
}
