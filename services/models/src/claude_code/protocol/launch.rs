//! The flags agentd starts the CLI with.

use agentd_ports::CliTools;

/// What a call asks of the CLI beyond its message: how to start a process for it.
pub struct Launch<'a> {
    /// The agent's layered system prompt (`--append-system-prompt`).
    pub system_prompt: &'a str,
    /// The tools the CLI may run without asking, and its permission mode.
    pub tools: &'a CliTools,
    /// The model the agent names, if it names one (`--model`).
    pub model: Option<&'a str>,
    /// The session to resume (`--resume`), if any.
    pub resume: Option<&'a str>,
}

/// The flags agentd adds to `model.command` (after the command's own arguments).
pub fn flags(launch: &Launch<'_>) -> Vec<String> {
    let mut args: Vec<String> = [
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
    ]
    .map(String::from)
    .to_vec();
    if !launch.system_prompt.trim().is_empty() {
        args.extend(["--append-system-prompt".into(), launch.system_prompt.into()]);
    }
    if !launch.tools.allowed.is_empty() {
        args.extend(["--allowedTools".into(), launch.tools.allowed.join(",")]);
    }
    if let Some(mode) = &launch.tools.permission_mode {
        args.extend(["--permission-mode".into(), mode.clone()]);
    }
    if let Some(model) = launch.model {
        args.extend(["--model".into(), model.into()]);
    }
    if let Some(session) = launch.resume {
        args.extend(["--resume".into(), session.into()]);
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_carry_the_prompt_tools_mode_and_session() {
        let tools = CliTools {
            allowed: vec!["Bash".into(), "Read".into()],
            permission_mode: Some("acceptEdits".into()),
        };
        let f = flags(&Launch {
            system_prompt: "be brief",
            tools: &tools,
            model: None,
            resume: Some("s-1"),
        });
        let joined = f.join(" ");
        assert!(
            joined
                .starts_with("-p --input-format stream-json --output-format stream-json --verbose")
        );
        assert!(joined.contains("--append-system-prompt be brief"));
        assert!(joined.contains("--allowedTools Bash,Read"));
        assert!(joined.contains("--permission-mode acceptEdits"));
        assert!(joined.ends_with("--resume s-1"));
        assert!(!joined.contains("--model"));
    }
}
