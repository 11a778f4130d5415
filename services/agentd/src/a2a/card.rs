//! Agent Cards: one per exposed agent type, built from the type (its title, description and
//! name, and the skills of its type file's `[a2a]` section), naming the two interfaces at `/a2a/<type>` and, when the API needs a token, the
//! bearer scheme every call must use.

use super::A2a;
use serde_json::{Value, json};

/// Where a card is found, under an agent's base (and at the root for the first type).
pub const WELL_KNOWN: &str = "/.well-known/agent-card.json";

/// The A2A version every interface serves.
pub const VERSION: &str = "1.0";

/// The card of `agent_type` (`None`: not exposed, or no such type), its URLs under `base`.
pub fn card(a2a: &A2a, agent_type: &str, base: &str) -> Option<Value> {
    if !a2a.serves(agent_type) {
        return None;
    }
    let t = a2a.system.deps().config.types.get(agent_type)?;
    let url = format!("{}/a2a/{agent_type}", base.trim_end_matches('/'));
    let description = if t.description.trim().is_empty() {
        format!("agentd agent type `{agent_type}`")
    } else {
        t.description.clone()
    };
    let name = if t.title.trim().is_empty() {
        agent_type.to_string()
    } else {
        t.title.clone()
    };
    let mut card = json!({
        "name": name,
        "description": description,
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": VERSION},
            {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": VERSION},
        ],
        "provider": {"organization": "agentd", "url": base},
        "version": env!("CARGO_PKG_VERSION"),
        "capabilities": {
            "streaming": true,
            "pushNotifications": true,
            "extendedAgentCard": false,
        },
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{
            "id": agent_type,
            "name": name,
            "description": description,
            "tags": [agent_type],
        }],
    });
    if !t.a2a.skills.is_empty() {
        let skills: Vec<Value> = t
            .a2a
            .skills
            .iter()
            .map(|s| {
                let mut v = json!({
                    "id": s.id,
                    "name": if s.name.trim().is_empty() { &s.id } else { &s.name },
                    "description": if s.description.trim().is_empty() { &description } else { &s.description },
                    "tags": if s.tags.is_empty() { vec![agent_type.to_string()] } else { s.tags.clone() },
                });
                if !s.examples.is_empty() {
                    v["examples"] = json!(s.examples);
                }
                v
            })
            .collect();
        card["skills"] = Value::Array(skills);
    }
    if a2a.token_required {
        card["securitySchemes"] = json!({
            "bearer": {"httpAuthSecurityScheme": {
                "scheme": "Bearer",
                "description": "agentd's API token (auth.token)",
            }},
        });
        card["securityRequirements"] = json!([{"schemes": {"bearer": {"list": []}}}]);
    }
    Some(card)
}
