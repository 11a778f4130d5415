//! Exactly once through a cut turn: a turn stopped by `kill -9` or SIGTERM between what one of
//! its tool calls did to another agent and the call's recorded result runs again in the next
//! process, and the call's effect happens once — a sync Manage message is sent once and its
//! wait takes the worker's answer (also one given while no process ran), a spawn makes one
//! agent, a follow-up, a reset and a compaction are queued once — and so is a command of the
//! Redis command stream delivered again after the process that took it died.

use agentd_tests::scripted_files::{embedded_store, scripted_deployment};
use agentd_tests::{AgentdProcess, TestRedis};
use serde_json::{Value, json};
use std::path::Path;

/// The lead manages the Researcher (sync, with a long timeout) and sub-agents.
const LEAD: &str = r#"
name = "lead"
title = "Lead"
workers = ["research"]
[manage]
mode = "sync"
sync_timeout_ms = 60000
sync_max_messages = 1
"#;
const RESEARCH: &str = "name = \"research\"\ntitle = \"Researcher\"\n";
const SUBAGENT: &str = "name = \"subagent\"\ntitle = \"Sub-agent\"\n";

/// The lead asks the Researcher, who takes 1.5 s to count; `warm up` makes the Researcher's
/// thread with a quick exchange first.
const MANAGE_SCRIPT: &str = r#"
[[rule]]
agent = "lead"
role = "user"
contains = "warm up"
text = "warming up"
[[rule.tool_calls]]
name = "Manage"
arguments = { command = "send_message", worker = "Researcher", message = "hello", threadAlias = "harbour" }

[[rule]]
agent = "lead"
role = "user"
contains = "ask"
text = "asking"
[[rule.tool_calls]]
name = "Manage"
arguments = { command = "send_message", worker = "Researcher", message = "count the ships", threadAlias = "harbour" }

[[rule]]
agent = "lead"
role = "tool"
text = "lead heard: {{input}}"

[[rule]]
agent = "lead"
role = "user"
text = "lead got: {{input}}"

[[rule]]
agent = "research"
role = "user"
contains = "count the ships"
delay_ms = 1500
text = "seven ships"

[[rule]]
agent = "research"
role = "user"
text = "hi"
"#;

/// How a process is stopped mid-turn.
#[derive(Clone, Copy, Debug)]
enum Cut {
    /// `kill -9`: nothing is written on the way out.
    Kill9,
    /// SIGTERM: a graceful shutdown, which leaves running turns to run again.
    Term,
}

impl Cut {
    fn apply(self, p: AgentdProcess) {
        match self {
            Cut::Kill9 => p.kill9(),
            Cut::Term => p.stop(),
        }
    }
}

/// Agent `id`'s thread entries.
fn entries(p: &AgentdProcess, id: &str) -> Vec<Value> {
    p.get(&format!("/v1/agents/{id}/thread"))["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// How many entries of agent `id`'s thread have role `role` and text `text`.
fn count(p: &AgentdProcess, id: &str, role: &str, text: &str) -> usize {
    entries(p, id)
        .iter()
        .filter(|e| e["role"] == role && e["text"] == text)
        .count()
}

/// The ids of `parent`'s children.
fn children(p: &AgentdProcess, parent: &str) -> Vec<String> {
    p.get(&format!("/v1/agents?parent_id={parent}"))["agents"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|a| a["agent_id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until `parent` has a child, and answers it.
fn the_child(p: &AgentdProcess, parent: &str) -> String {
    p.wait_for("a child", |p| !children(p, parent).is_empty());
    children(p, parent).remove(0)
}

/// Waits until agent `id`'s thread holds an entry with role `role` and text `text`.
fn wait_for_entry(p: &AgentdProcess, id: &str, role: &str, text: &str) {
    p.wait_for(&format!("{id}: {role} `{text}`"), |p| {
        count(p, id, role, text) > 0
    });
}

/// The checks after a cut sync wait: the Researcher took the message once and answered once,
/// and the lead's call has one result, the answer, which its turn went on from.
fn the_sync_wait_ended_once(p: &AgentdProcess, lead: &str, worker: &str) {
    let heard = |t: &String| t.starts_with("lead heard: ") && t.contains("seven ships");
    p.wait_for("the lead's turn to end on the answer", |p| {
        p.texts(lead).iter().any(heard)
    });
    assert_eq!(
        count(p, worker, "user", "count the ships"),
        1,
        "the worker took the message once: {:?}",
        p.texts(worker)
    );
    assert_eq!(count(p, worker, "assistant", "seven ships"), 1);
    let thread = entries(p, lead);
    let calls = thread
        .iter()
        .filter(|e| e["tool_calls"].as_array().is_some_and(|c| !c.is_empty()))
        .count();
    let results: Vec<Value> = thread
        .iter()
        .filter(|e| e["role"] == "tool")
        .map(|e| serde_json::from_str(e["text"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(results.len(), calls, "one result per call: {results:?}");
    let last = results.last().expect("the call's result");
    assert_eq!(last["status"], "ok", "{last}");
    assert_eq!(last["messages"], json!(["seven ships"]), "{last}");
    let texts = p.texts(lead);
    assert_eq!(texts.iter().filter(|t| heard(t)).count(), 1, "{texts:?}");
    assert!(
        !texts.iter().any(|t| t.starts_with("lead got:")),
        "the answer started no turn of the lead's own: {texts:?}"
    );
}

fn deployment(dir: &Path, script: &str) -> Vec<(&'static str, String)> {
    scripted_deployment(
        dir,
        &[
            ("lead", LEAD),
            ("research", RESEARCH),
            ("subagent", SUBAGENT),
        ],
        script,
        "",
    )
}

/// A sync Manage wait on the embedded store, cut by `cut` while the Researcher counts; the
/// next process runs the lead's turn and the Researcher's again.
fn a_cut_sync_wait_on_the_embedded_store(cut: Cut) {
    let dir = tempfile::tempdir().unwrap();
    let mut env = deployment(dir.path(), MANAGE_SCRIPT);
    env.push(embedded_store(dir.path()));
    let a = AgentdProcess::start(&env);
    let lead = a.spawn("lead", "ask the researcher");
    let worker = the_child(&a, &lead);
    wait_for_entry(&a, &worker, "user", "count the ships");
    cut.apply(a);
    let b = AgentdProcess::start(&env);
    the_sync_wait_ended_once(&b, &lead, &worker);
}

#[test]
fn a_sync_manage_wait_cut_by_kill_9_sends_its_message_once() {
    a_cut_sync_wait_on_the_embedded_store(Cut::Kill9);
}

#[test]
fn a_sync_manage_wait_cut_by_sigterm_sends_its_message_once() {
    a_cut_sync_wait_on_the_embedded_store(Cut::Term);
}

/// Two processes on Redis with 4 partitions and 5 s leases (the default: longer than the
/// Researcher takes to count).
fn two_processes(redis: &TestRedis, deployment: &[(&'static str, String)]) -> [AgentdProcess; 2] {
    let env = || {
        let mut env = deployment.to_vec();
        env.extend(redis.env());
        env.extend([("AGENTD__REDIS__PARTITIONS", "4".to_string())]);
        env
    };
    let a = AgentdProcess::start(&env());
    let b = AgentdProcess::start(&env());
    agentd_tests::process::wait_balanced(&a, &b, 4);
    [a, b]
}

/// Whether process `p` owns agent `id`'s partition.
fn owns(p: &AgentdProcess, id: &str) -> bool {
    let keys = agentd_store::Keys::new("agentd", 4);
    p.partitions_owned().contains(&keys.partition_of(id))
}

/// A sync Manage wait across two processes on Redis: the lead lives in `a`, its Researcher in
/// `b`. With `answer_first`, `a` stops (SIGSTOP) while the Researcher counts, so the answer
/// reaches the lead's partition while no process runs the lead, and is then killed (`kill -9`);
/// without, `a` is stopped with SIGTERM at once and gives its partitions up. Either way `b`
/// takes the lead's partition over and runs its turn again, which takes the answer (given
/// before or after) as its call's result.
fn a_cut_sync_wait_across_two_processes(answer_first: bool) {
    let dir = tempfile::tempdir().unwrap();
    let redis = TestRedis::from_env();
    let [a, b] = two_processes(&redis, &deployment(dir.path(), MANAGE_SCRIPT));
    let (lead, worker) = loop {
        let lead = a.spawn("lead", "warm up");
        if !owns(&a, &lead) {
            continue;
        }
        let worker = the_child(&a, &lead);
        wait_for_entry(&a, &worker, "assistant", "hi");
        if owns(&b, &worker) {
            break (lead, worker);
        }
    };
    a.post(
        &format!("/v1/agents/{lead}/messages"),
        json!({"text": "ask the researcher"}),
    )
    .unwrap();
    wait_for_entry(&b, &worker, "user", "count the ships");
    if answer_first {
        a.signal("STOP");
        wait_for_entry(&b, &worker, "assistant", "seven ships");
        assert!(
            !owns(&b, &lead),
            "the answer came before the lead's partition changed hands"
        );
        a.kill9();
    } else {
        a.stop();
    }
    the_sync_wait_ended_once(&b, &lead, &worker);
}

#[test]
fn a_sync_manage_wait_cut_by_kill_9_on_redis_takes_the_answer_given_meanwhile() {
    a_cut_sync_wait_across_two_processes(true);
}

#[test]
fn a_sync_manage_wait_cut_by_sigterm_on_redis_sends_its_message_once() {
    a_cut_sync_wait_across_two_processes(false);
}

/// What the lead does with a message: a sub-agent's output is noted; `spawn` spawns the
/// Surveyor; `ask` asks the Researcher (who answers at once); any other message is the id of a
/// sub-agent that `TOOL` acts on (with `ARGS`); a tool's result ends the turn. The calls come
/// half a second after the message, so the request that sent it is answered before the
/// process dies by its fail point.
const EFFECT_SCRIPT: &str = r#"
[[rule]]
agent = "lead"
role = "user"
contains = "From "
text = "noted"

[[rule]]
agent = "lead"
role = "user"
contains = "spawn"
text = "spawning"
delay_ms = 500
[[rule.tool_calls]]
name = "spawn_agent"
arguments = { prompt = "survey the harbour", title = "Surveyor" }

[[rule]]
agent = "lead"
role = "user"
contains = "ask"
text = "asking"
delay_ms = 500
[[rule.tool_calls]]
name = "Manage"
arguments = { command = "send_message", worker = "Researcher", message = "count the ships", threadAlias = "harbour" }

[[rule]]
agent = "lead"
role = "user"
text = "acting"
delay_ms = 500
[[rule.tool_calls]]
name = "TOOL"
arguments = { agent_id = "{{input}}" ARGS }

[[rule]]
agent = "lead"
role = "tool"
text = "lead heard: {{input}}"

[[rule]]
agent = "research"
role = "user"
text = "seven ships"

[[rule]]
agent = "subagent"
purpose = "compact"
text = "the summary"
usage = { input = 1000, output = 1 }

[[rule]]
agent = "subagent"
role = "user"
contains = "start over"
text = "started over"
usage = { input = 100, output = 1 }

[[rule]]
agent = "subagent"
role = "user"
contains = "recount"
text = "recounted"

[[rule]]
agent = "subagent"
role = "user"
contains = "last call"
text = "done"
usage = { input = 1, output = 1 }

[[rule]]
agent = "subagent"
role = "user"
text = "surveyed"
usage = { input = 10, output = 1 }
"#;

/// A deployment on the embedded store in `dir` whose lead acts on sub-agents with `tool`
/// (given `args` besides the target).
fn effect_deployment(dir: &Path, tool: &str, args: &str) -> Vec<(&'static str, String)> {
    let script = EFFECT_SCRIPT.replace("TOOL", tool).replace("ARGS", args);
    let mut env = deployment(dir, &script);
    env.push(embedded_store(dir));
    // A compaction keeps only the last entry: a short thread compacts too.
    env.push(("AGENTD__LIMITS__COMPACT_KEEP_RECENT", "1".to_string()));
    env
}

/// Starts a process of `env` that kills itself (`SIGKILL`) right after its first call of
/// `tool` did what it does, before the call's result is written.
fn dying_after(env: &[(&'static str, String)], tool: &str) -> AgentdProcess {
    let mut env = env.to_vec();
    env.push(("FAILPOINTS", format!("after-tool-effect=1*return({tool})")));
    AgentdProcess::start(&env)
}

/// Waits for the process to die by its fail point.
fn died(p: AgentdProcess) {
    p.wait_exit(std::time::Duration::from_secs(20));
}

/// The lead's turn ended with its call's one result: answers that result.
fn the_call_ended_once(p: &AgentdProcess, lead: &str) -> Value {
    p.wait_for("the lead's turn to end on its call's result", |p| {
        p.texts(lead).iter().any(|t| t.starts_with("lead heard: "))
    });
    let results: Vec<Value> = entries(p, lead)
        .iter()
        .filter(|e| e["role"] == "tool")
        .map(|e| serde_json::from_str(e["text"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(results.len(), 1, "one result: {results:?}");
    results[0].clone()
}

#[test]
fn a_sync_manage_call_run_again_takes_the_answer_its_first_run_got() {
    let dir = tempfile::tempdir().unwrap();
    let env = effect_deployment(dir.path(), "current_time", "");
    let a = dying_after(&env, "Manage");
    let lead = a.spawn("lead", "ask the researcher");
    died(a);
    let b = AgentdProcess::start(&env);
    let result = the_call_ended_once(&b, &lead);
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(result["messages"], json!(["seven ships"]), "{result}");
    let worker = the_child(&b, &lead);
    assert_eq!(count(&b, &worker, "user", "count the ships"), 1);
    assert_eq!(count(&b, &worker, "assistant", "seven ships"), 1);
}

#[test]
fn a_spawn_run_again_makes_no_second_agent() {
    let dir = tempfile::tempdir().unwrap();
    let env = effect_deployment(dir.path(), "current_time", "");
    let a = dying_after(&env, "spawn_agent");
    let lead = a.spawn("lead", "spawn a surveyor");
    died(a);
    let b = AgentdProcess::start(&env);
    let result = the_call_ended_once(&b, &lead);
    let kids = children(&b, &lead);
    assert_eq!(kids.len(), 1, "one sub-agent: {kids:?}");
    assert_eq!(result["agent_id"], kids[0], "{result}");
    wait_for_entry(&b, &kids[0], "assistant", "surveyed");
    assert_eq!(count(&b, &kids[0], "user", "survey the harbour"), 1);
}

/// The lead's sub-agent, spawned through the API and done with its first message.
fn surveyor(p: &AgentdProcess, lead: &str) -> String {
    let child = p.spawn_with(json!({
        "agent_type": "subagent", "parent_id": lead, "prompt": "survey the harbour"
    }));
    wait_for_entry(p, &child, "assistant", "surveyed");
    p.wait_for("the lead to note the survey", |p| {
        p.texts(lead).iter().any(|t| t == "noted") && p.status(lead) == "idle"
    });
    child
}

/// Runs `tool` (with `args`) from the lead on its sub-agent in a process that dies right
/// after the call's effect; the next process runs the call again. Answers the process and the
/// sub-agent, once the lead's turn ended and the sub-agent handled whatever it was sent (a
/// message sent after it, `last call`, is answered after it).
fn acted_on_once(tool: &str, args: &str) -> (AgentdProcess, String) {
    let dir = tempfile::tempdir().unwrap();
    let env = effect_deployment(dir.path(), tool, args);
    let a = dying_after(&env, tool);
    let lead = a.spawn_with(json!({"agent_type": "lead"}));
    let child = surveyor(&a, &lead);
    a.post(
        &format!("/v1/agents/{lead}/messages"),
        json!({"text": child}),
    )
    .unwrap();
    died(a);
    let b = AgentdProcess::start(&env);
    the_call_ended_once(&b, &lead);
    b.post(
        &format!("/v1/agents/{child}/messages"),
        json!({"text": "last call"}),
    )
    .unwrap();
    b.wait_for("the sub-agent's last answer", |p| {
        p.texts(&child).last().is_some_and(|t| t == "done")
    });
    // The directory must outlive the process.
    std::mem::forget(dir);
    (b, child)
}

#[test]
fn a_follow_up_run_again_is_queued_once() {
    let (p, child) = acted_on_once(
        "send_agent_followup",
        r#", message = "recount", interrupt = false"#,
    );
    assert_eq!(
        count(&p, &child, "user", "recount"),
        1,
        "{:?}",
        p.texts(&child)
    );
    assert_eq!(count(&p, &child, "assistant", "recounted"), 1);
}

#[test]
fn a_reset_run_again_is_queued_once() {
    let (p, child) = acted_on_once("agent_reset", r#", message = "start over""#);
    let usage = &p.get(&format!("/v1/agents/{child}"))["usage"];
    assert_eq!(
        usage["input"], 111,
        "the survey, one reset's turn, the last call: {usage}"
    );
}

#[test]
fn a_compaction_run_again_is_queued_once() {
    let (p, child) = acted_on_once("agent_compact", "");
    let usage = &p.get(&format!("/v1/agents/{child}"))["usage"];
    assert_eq!(
        usage["input"], 1011,
        "the survey, one compaction, the last call: {usage}"
    );
}

/// A `send` command of the Redis command stream that ran in a process killed before it
/// acknowledged the entry: another process takes the entry over once the first is gone from
/// the live members, and runs it again — the message is queued once.
#[test]
fn a_send_command_run_again_after_its_process_died_is_queued_once() {
    let dir = tempfile::tempdir().unwrap();
    let redis = TestRedis::from_env();
    let script = EFFECT_SCRIPT
        .replace("TOOL", "current_time")
        .replace("ARGS", "");
    let mut env = deployment(dir.path(), &script);
    env.extend(redis.env());
    env.extend([
        ("AGENTD__REDIS__PARTITIONS", "4".to_string()),
        ("AGENTD__REDIS__LEASE_MS", "1000".to_string()),
    ]);
    let mut dying = env.clone();
    dying.push((
        "FAILPOINTS",
        "before-command-ack=1*return(send)".to_string(),
    ));
    let a = AgentdProcess::start(&dying);
    let agent = a.spawn("subagent", "survey the harbour");
    wait_for_entry(&a, &agent, "assistant", "surveyed");
    let send = agentd_proto::Envelope::new(
        agentd_proto::Address::External {
            name: "billing".into(),
        },
        agentd_proto::Address::System,
        agentd_proto::Item::Command(agentd_proto::Command::Send {
            agent_id: agent.clone(),
            text: "recount".into(),
            interrupt: false,
            idempotency_key: None,
        }),
        1,
    );
    let _: String = redis::cmd("XADD")
        .arg("agentd:commands")
        .arg("*")
        .arg("m")
        .arg(agentd_proto::codec::encode_envelope(&send).unwrap())
        .query(&mut redis.client())
        .unwrap();
    died(a);
    let b = AgentdProcess::start(&env);
    b.wait_for("the command's entry taken over and acknowledged", |_| {
        let pending: redis::streams::StreamPendingReply = redis::cmd("XPENDING")
            .arg("agentd:commands")
            .arg("agentd")
            .query(&mut redis.client())
            .unwrap();
        pending.count() == 0
    });
    b.post(
        &format!("/v1/agents/{agent}/messages"),
        json!({"text": "last call"}),
    )
    .unwrap();
    b.wait_for("the last answer", |p| {
        p.texts(&agent).last().is_some_and(|t| t == "done")
    });
    assert_eq!(
        count(&b, &agent, "user", "recount"),
        1,
        "{:?}",
        b.texts(&agent)
    );
    assert_eq!(count(&b, &agent, "assistant", "recounted"), 1);
}
