//! MCP configuration errors stop start-up with a clear message; secrets stay hidden.

use super::*;

/// `agentd check-config` with `config`, and `env` set: its exit status and stderr.
fn check_config(config: &str, env: &[(&str, &str)]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentd.toml");
    std::fs::write(&path, config).unwrap();
    let mut cmd = Command::new(agentd_tests::process::binary("agentd"));
    cmd.arg("--config")
        .arg(&path)
        .arg("check-config")
        .env("AGENTD__STORE__KIND", "memory")
        .env_remove("MCP_UNSET_VARIABLE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn mcp_configuration_errors_stop_start_up_and_secrets_stay_hidden() {
    let (ok, out) = check_config("[mcp.servers.\"Bad__Name\"]\ncommand = [\"x\"]\n", &[]);
    assert!(!ok && out.contains("a server name must match"), "{out}");
    let (ok, out) = check_config(
        "[mcp.servers.files]\ncommand = [\"x\"]\nenv = { TOKEN = \"${MCP_UNSET_VARIABLE}\" }\n",
        &[],
    );
    assert!(
        !ok && out.contains("MCP_UNSET_VARIABLE") && out.contains("not set"),
        "{out}"
    );
    let (ok, out) = check_config("[mcp.servers.files]\ncommand = [\"x\"]\n", &[]);
    assert!(ok, "{out}");
    // A type naming a server that is not configured, or a tool that does not exist.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("t.toml"),
        "name = \"t\"\ntools = [\"mcp__nope__*\"]\n",
    )
    .unwrap();
    let (ok, out) = check_config(
        &format!(
            "[agents]\ndir = {}\n[mcp.servers.files]\ncommand = [\"x\"]\n",
            toml_str(dir.path().display())
        ),
        &[],
    );
    assert!(
        !ok && out.contains("`nope`, which is not configured"),
        "{out}"
    );
    std::fs::write(
        dir.path().join("t.toml"),
        "name = \"t\"\ntools = [\"no_such_tool\"]\n",
    )
    .unwrap();
    let (ok, out) = check_config(
        &format!("[agents]\ndir = {}\n", toml_str(dir.path().display())),
        &[],
    );
    assert!(!ok && out.contains("no_such_tool"), "{out}");
    // Secrets written in place are masked in check-config's output.
    let (ok, out) = check_config(
        "[mcp.servers.search]\nurl = \"http://127.0.0.1:1/mcp\"\nheaders = { Authorization = \"Bearer ${MCP_SET_VARIABLE} plain-s3cret\" }\n",
        &[("MCP_SET_VARIABLE", "v4lue")],
    );
    assert!(ok, "{out}");
    assert!(
        !out.contains("s3cret") && !out.contains("v4lue") && out.contains("Authorization"),
        "{out}"
    );
}
