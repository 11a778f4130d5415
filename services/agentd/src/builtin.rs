//! Agent types and the demo script shipped inside the binary, so `agentd` runs from any
//! directory with nothing but itself.

use agentd_actors::{AgentType, AgentTypes};
use agentd_proto::{AgentdError, ErrorCode};
use std::path::Path;

/// The built-in demo script of the scripted model (`deploy/scripts/demo.toml`).
pub const DEMO_SCRIPT: &str = include_str!("../../../deploy/scripts/demo.toml");

/// The built-in agent type files (`deploy/agents/*.toml`).
pub const AGENT_TYPE_FILES: [(&str, &str); 5] = [
    (
        "lead.toml",
        include_str!("../../../deploy/agents/lead.toml"),
    ),
    (
        "subagent.toml",
        include_str!("../../../deploy/agents/subagent.toml"),
    ),
    (
        "research.toml",
        include_str!("../../../deploy/agents/research.toml"),
    ),
    (
        "coding.toml",
        include_str!("../../../deploy/agents/coding.toml"),
    ),
    (
        "debug.toml",
        include_str!("../../../deploy/agents/debug.toml"),
    ),
];

/// Parses one agent type file; the name defaults to the file stem.
pub fn parse_agent_type(file: &str, text: &str) -> Result<AgentType, AgentdError> {
    let mut t: AgentType = toml::from_str(text).map_err(|e| {
        AgentdError::new(
            ErrorCode::InvalidArgument,
            format!("agent type file {file}: {e}"),
        )
    })?;
    if t.name.trim().is_empty() {
        t.name = Path::new(file)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
    }
    Ok(t)
}

/// The built-in types plus those in `dir` (which replace built-ins of the same name),
/// validated (`invalid_title` for empty or duplicate worker titles).
pub fn load_agent_types(dir: Option<&Path>) -> Result<AgentTypes, AgentdError> {
    let mut types = Vec::new();
    for (file, text) in AGENT_TYPE_FILES {
        types.push(parse_agent_type(file, text)?);
    }
    if let Some(dir) = dir {
        let entries = std::fs::read_dir(dir).map_err(|e| {
            AgentdError::new(
                ErrorCode::InvalidArgument,
                format!("agent type dir {}: {e}", dir.display()),
            )
        })?;
        let mut paths: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        paths.sort();
        for p in paths {
            let text = std::fs::read_to_string(&p).map_err(|e| {
                AgentdError::new(
                    ErrorCode::InvalidArgument,
                    format!("agent type file {}: {e}", p.display()),
                )
            })?;
            let t = parse_agent_type(&p.display().to_string(), &text)?;
            types.retain(|x: &AgentType| x.name != t.name);
            types.push(t);
        }
    }
    AgentTypes::new(types)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_types_load_with_aliases() {
        let types = load_agent_types(None).map_err(|e| e.to_string());
        assert!(types.is_ok(), "{types:?}");
        if let Ok(t) = types {
            assert_eq!(t.get("worker").map(|t| t.title.as_str()), Some("Coder"));
            assert_eq!(t.get("debugger").map(|t| t.name.as_str()), Some("debug"));
            assert_eq!(t.workers_of("lead").len(), 2);
        }
    }
}
