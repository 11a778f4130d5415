//! Webhook tools (`[tools.<name>] kind = "http"`) through a real agentd and a real turn of the
//! scripted model: a receiver written in Python checks the HMAC signature with its own `hmac`
//! module; a 503 is retried, a 404 and a wrong signature come back to the model as tool errors
//! with the status and a bounded excerpt; the calls are counted. Start-up refuses a type that
//! lists an unknown tool and an unset `secret_env`, and never prints a secret. A webhook with
//! `approval = "always"` is not called until a person approves the call, then once; calling it
//! from outside a turn is refused with `409`.

use agentd_tests::AgentdProcess;
use agentd_tests::scripted_files::{embedded_store, scripted_deployment};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

const SECRET: &str = "s3cr3t-for-the-hook";

/// The Python receiver (`tests/tools/webhook_server.py`), killed on drop.
struct Receiver {
    child: Child,
    url: String,
}

impl Receiver {
    fn start() -> Receiver {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/webhook_server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(SECRET)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 is needed (run scripts/test.sh)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line.trim().parse().expect("the receiver's port");
        Receiver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config(dir: &Path, hook: &str, extra_type_tools: &str) -> Vec<(&'static str, String)> {
    let notifier = format!(
        "name = \"notifier\"\ntitle = \"Notifier\"\ntools = [\"notify\", \"flaky\", \"missing\", \"forged\", \"guarded\"{extra_type_tools}]\n"
    );
    let tool = |name: &str, path: &str, env: &str| {
        format!(
            "[tools.{name}]\nkind = \"http\"\nurl = \"{hook}{path}\"\nsecret_env = \"{env}\"\ndescription = \"Send a note.\"\nparameters = {{ type = \"object\", properties = {{ text = {{ type = \"string\" }} }}, required = [\"text\"] }}\ntimeout_ms = 10000\n\n"
        )
    };
    let text = [
        tool("notify", "/notify", "HOOK_SECRET"),
        tool("flaky", "/flaky", "HOOK_SECRET"),
        tool("missing", "/missing", "HOOK_SECRET"),
        tool("forged", "/notify", "WRONG_SECRET"),
        tool("guarded", "/notify", "HOOK_SECRET").replace(
            "timeout_ms = 10000\n",
            "timeout_ms = 10000\napproval = \"always\"\n",
        ),
    ]
    .concat();
    let mut env = scripted_deployment(dir, &[("notifier", &notifier)], SCRIPT, &text);
    env.extend([
        embedded_store(dir),
        ("HOOK_SECRET", SECRET.to_string()),
        ("WRONG_SECRET", "not-the-secret".to_string()),
    ]);
    env
}

/// The notifier calls each webhook its message names.
const SCRIPT: &str = r#"
[[rule]]
agent = "notifier"
role = "user"
contains = "go"
text = "notifying"
[[rule.tool_calls]]
name = "notify"
arguments = { text = "hello" }
[[rule.tool_calls]]
name = "flaky"
arguments = { text = "again" }
[[rule.tool_calls]]
name = "missing"
arguments = { text = "lost" }
[[rule.tool_calls]]
name = "forged"
arguments = { text = "forged" }

[[rule]]
agent = "notifier"
role = "user"
contains = "careful"
text = "asking first"
[[rule.tool_calls]]
name = "guarded"
arguments = { text = "careful" }

[[rule]]
agent = "notifier"
role = "tool"
text = "all sent"
"#;

fn tool_results(p: &AgentdProcess, id: &str) -> Vec<Value> {
    p.get(&format!("/v1/agents/{id}/thread"))["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["role"] == "tool")
        .map(|e| serde_json::from_str(e["text"].as_str().unwrap()).unwrap())
        .collect()
}

#[test]
fn webhook_calls_are_signed_retried_and_their_failures_reach_the_model() {
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let env = config(dir.path(), &receiver.url, "");
    let p = AgentdProcess::start(&env);
    let id = p.spawn("notifier", "go");
    p.wait_for("the turn's end", |p| {
        p.texts(&id).iter().any(|t| t == "all sent")
    });
    let results = tool_results(&p, &id);
    assert_eq!(results.len(), 4, "{results:#?}");
    // Signed, with agentd's call id.
    assert_eq!(results[0]["delivered"], json!({"text": "hello"}));
    let call_id = results[0]["call_id"].as_str().unwrap();
    assert!(uuid::Uuid::parse_str(call_id).is_ok(), "{call_id}");
    // With the calling turn's W3C trace context (telemetry off: its ids all the same).
    let trace = p.get(&format!("/v1/agents/{id}"))["trace_id"].clone();
    let traceparent = results[0]["traceparent"].as_str().unwrap();
    assert_eq!(traceparent.get(3..35), trace.as_str(), "{traceparent}");
    // The 503 was retried under the same call id.
    assert_eq!(results[1]["attempt"], 2, "{:#?}", results[1]);
    // A 404: a tool error with the status and a bounded excerpt.
    assert_eq!(results[2]["error"]["code"], "tool_failed");
    let message = results[2]["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("404") && message.contains("no such hook"),
        "{message}"
    );
    assert!(
        message.len() < 1000,
        "the excerpt is bounded: {}",
        message.len()
    );
    // A signature made with another secret is refused by the receiver.
    assert_eq!(results[3]["error"]["code"], "tool_failed");
    assert!(
        results[3]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("401"),
        "{:#?}",
        results[3]
    );
    let metrics = ureq::get(&format!("{}/metrics", p.url))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    for line in [
        "agentd_tool_calls_total{tool=\"notify\",kind=\"http\",outcome=\"ok\"} 1",
        "agentd_tool_calls_total{tool=\"missing\",kind=\"http\",outcome=\"error\"} 1",
        "agentd_tool_call_seconds_bucket{tool=\"notify\",kind=\"http\",le=\"900\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} not in the metrics");
    }
    // The agent's tools list them with their schemas.
    let tools = p.get(&format!("/v1/agents/{id}/tools"));
    let notify = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "notify")
        .cloned()
        .unwrap();
    assert_eq!(notify["parameters"]["required"], json!(["text"]));
    // The secret is in no answer.
    assert!(!p.get("/v1/info").to_string().contains(SECRET));
}

/// The POSTs the receiver got, `{path, call_id}` each.
fn received(receiver: &Receiver) -> Value {
    ureq::get(&format!("{}/calls", receiver.url))
        .call()
        .unwrap()
        .into_json()
        .unwrap()
}

#[test]
fn a_gated_webhook_is_called_once_and_only_after_approval() {
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let env = config(dir.path(), &receiver.url, "");
    let p = AgentdProcess::start(&env);
    let id = p.spawn("notifier", "careful now");
    p.wait_for("waiting_review", |p| p.status(&id) == "waiting_review");
    let gated = p.get("/v1/tool_calls?status=awaiting_approval")["tool_calls"].clone();
    assert_eq!(gated.as_array().unwrap().len(), 1, "{gated:#}");
    assert_eq!(gated[0]["tool"], "guarded");
    assert_eq!(gated[0]["kind"], "http");
    let call_id = gated[0]["call_id"].as_str().unwrap().to_string();

    // Outside a turn, the gated webhook is refused, and says why.
    let direct = p.post(
        &format!("/v1/agents/{id}/tools/guarded"),
        json!({"text": "sneaky"}),
    );
    let (code, body) = direct.unwrap_err();
    assert_eq!(code, 409, "{body}");
    assert_eq!(body["code"], "invalid_transition", "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("guarded") && m.contains("approval")),
        "{body}"
    );
    // Nor does an answer from outside stand in for the webhook's own.
    let (code, body) = p
        .post(
            &format!("/v1/agents/{id}/tool_results/{call_id}"),
            json!({"result": {"delivered": "forged"}}),
        )
        .unwrap_err();
    assert_eq!(code, 409, "{body}");
    assert_eq!(body["code"], "invalid_transition", "{body}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        received(&receiver),
        json!([]),
        "nothing before the approval"
    );

    let decided = p
        .post(
            &format!("/v1/agents/{id}/approvals/{call_id}"),
            json!({"approve": true}),
        )
        .unwrap();
    assert_eq!(decided, json!({"call_id": call_id, "decision": "approved"}));
    p.wait_for("the turn's end", |p| {
        p.texts(&id).iter().any(|t| t == "all sent")
    });
    let results = tool_results(&p, &id);
    assert_eq!(results.len(), 1, "{results:#?}");
    assert_eq!(results[0]["delivered"], json!({"text": "careful"}));
    assert_eq!(results[0]["call_id"], call_id.as_str());
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        received(&receiver),
        json!([{"path": "/notify", "call_id": call_id}]),
        "called once, after the approval"
    );
    assert_eq!(p.get("/v1/tool_calls")["tool_calls"], json!([]));
    let (code, body) = p
        .post(
            &format!("/v1/agents/{id}/tool_results/{call_id}"),
            json!({"result": {"delivered": "forged"}}),
        )
        .unwrap_err();
    assert_eq!(
        (code, &body["code"]),
        (409, &json!("invalid_transition")),
        "{body}"
    );
}

fn check_config(env: &[(&str, String)], unset: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(agentd_tests::process::binary("agentd"));
    cmd.arg("check-config");
    for (k, v) in env {
        cmd.env(k, v);
    }
    for k in unset {
        cmd.env_remove(k);
    }
    cmd.output().unwrap()
}

#[test]
fn start_up_refuses_unknown_tools_and_unset_secrets_and_prints_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let env = config(dir.path(), "http://127.0.0.1:9", "");
    let ok = check_config(&env, &[]);
    let out =
        String::from_utf8_lossy(&ok.stdout).to_string() + &String::from_utf8_lossy(&ok.stderr);
    assert!(ok.status.success(), "{out}");
    assert!(
        out.contains("HOOK_SECRET"),
        "the variable's name is shown: {out}"
    );
    assert!(!out.contains(SECRET), "the secret is not: {out}");

    let unset = check_config(&env, &["HOOK_SECRET"]);
    let err = String::from_utf8_lossy(&unset.stderr);
    assert!(!unset.status.success());
    assert!(
        err.contains("tools.") && err.contains("`HOOK_SECRET`, which is not set"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let env = config(dir.path(), "http://127.0.0.1:9", ", \"lookup_order\"");
    let unknown = check_config(&env, &[]);
    let err = String::from_utf8_lossy(&unknown.stderr);
    assert!(!unknown.status.success());
    assert!(
        err.contains("agent type `notifier` lists tool `lookup_order`"),
        "{err}"
    );
}
