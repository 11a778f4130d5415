//! Controls on the CLI's process: pause past the timeout, the signals of each control, cancel, close keeping the session and delete removing it.

use super::*;

#[actix_rt::test]
async fn a_paused_call_outlasts_its_timeout_and_finishes_on_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let ep = endpoint();
    let timeout = Duration::from_secs(4);
    let cli = cli_system(Arc::new(MemoryStore::new()), tmp.path(), timeout).await;
    let id = spawn(&cli, &ep, tmp.path(), "a slow one").await;
    wait_long("the CLI's call at the endpoint", || !ep.turns().is_empty()).await;
    let pid = cli.backend.pid(&id).expect("a process");
    cli.sys.system.control(&id, Control::Pause).await.unwrap();
    wait_long("the process stopped", || is_stopped(pid)).await;
    tokio::time::sleep(timeout + Duration::from_secs(1)).await;
    assert!(is_stopped(pid));
    assert!(
        cli.sys.texts_of(&id, Role::Assistant).await.is_empty(),
        "nothing answers while paused"
    );
    assert_ne!(cli.sys.record(&id).await.status, AgentStatus::Failed);
    cli.sys.system.control(&id, Control::Resume).await.unwrap();
    answer(&cli.sys, &id, "answer to: a slow one").await;
    assert_eq!(cli.backend.pid(&id), Some(pid));
    cli.sys.system.shutdown().await;
}

/// Starts the CLI (its arguments) after a process that joins the CLI's process group and
/// notes the name of each signal the group is sent (SIGTSTP, SIGCONT, SIGTERM) in
/// `$0.d/<the CLI's pid>`, until the CLI is gone: what a pause, a resume, a cancel and a
/// terminate send the CLI shows there (SIGKILL and SIGSTOP, which no process can note, by
/// their absence).
const NOTING_WRAPPER: &str = r#"#!/usr/bin/env bash
python3 - "$0.d/$$" $$ </dev/null >/dev/null 2>&1 <<'PY' &
import os, signal, sys, time
notes = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
def note(signum, _frame):
    os.write(notes, (signal.Signals(signum).name[3:] + "\n").encode())
for s in (signal.SIGTSTP, signal.SIGCONT, signal.SIGTERM):
    signal.signal(s, note)
os.write(notes, b"")
cli = int(sys.argv[2])
while True:
    try:
        os.kill(cli, 0)
    except ProcessLookupError:
        break
    time.sleep(0.05)
PY
# The notes file appears once the notes are taken: the CLI starts after that.
while [ ! -e "$0.d/$$" ]; do sleep 0.01; done
exec "$@"
"#;

/// The signals noted for the CLI process `pid` under `wrapper` ([`NOTING_WRAPPER`]).
fn noted(wrapper: &std::path::Path, pid: u32) -> Vec<String> {
    let file = PathBuf::from(format!("{}.d/{pid}", wrapper.display()));
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Pause sends the CLI's process group SIGTSTP (and SIGSTOP after the grace, if it did not
/// stop), resume SIGCONT, cancel a graceful SIGTERM, terminate SIGKILL without one (seed 001).
#[actix_rt::test]
async fn the_cli_s_process_group_gets_the_signals_of_each_control() {
    let tmp = tempfile::tempdir().unwrap();
    let ep = endpoint();
    let wrapper = tmp.path().join("noting");
    std::fs::write(&wrapper, NOTING_WRAPPER).unwrap();
    std::fs::create_dir(tmp.path().join("noting.d")).unwrap();
    let command = vec![
        "bash".to_string(),
        wrapper.display().to_string(),
        claude().display().to_string(),
    ];
    let home = tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let cli = cli_system_running(
        command,
        Arc::new(MemoryStore::new()),
        &home,
        Duration::from_secs(60),
    )
    .await;
    let id = spawn(&cli, &ep, &home, "a slow one").await;
    wait_long("the CLI's call at the endpoint", || !ep.turns().is_empty()).await;
    let pid = cli.backend.pid(&id).expect("a process");
    cli.sys.system.control(&id, Control::Pause).await.unwrap();
    wait_long("the CLI stopped", || is_stopped(pid)).await;
    cli.sys.system.control(&id, Control::Resume).await.unwrap();
    wait_long("the CLI running again", || !is_stopped(pid)).await;
    // Both noted (a process stopped by SIGSTOP with both pending may handle them in either
    // order).
    wait_long("SIGTSTP and SIGCONT noted", || {
        let mut notes = noted(&wrapper, pid);
        notes.sort();
        notes == vec!["CONT", "TSTP"]
    })
    .await;
    answer(&cli.sys, &id, "answer to: a slow one").await;
    cli.sys.system.control(&id, Control::Cancel).await.unwrap();
    wait_long("the cancelled CLI gone", || state_of(pid).is_none()).await;
    // The noting process writes what it was sent when it is next scheduled, which may be
    // after the CLI is gone: wait for the note rather than read it once.
    wait_long("cancel's graceful SIGTERM noted", || {
        noted(&wrapper, pid).iter().skip(2).any(|s| s == "TERM")
    })
    .await;

    let calls = ep.turns().len();
    let id = spawn(&cli, &ep, &home, "another slow one").await;
    wait_long("its call at the endpoint", || ep.turns().len() > calls).await;
    let pid = cli.backend.pid(&id).expect("a process");
    cli.sys
        .system
        .control(&id, Control::Terminate)
        .await
        .unwrap();
    wait_long("the terminated CLI gone", || state_of(pid).is_none()).await;
    assert!(
        !noted(&wrapper, pid).contains(&"TERM".to_string()),
        "terminate is SIGKILL, no SIGTERM before it: {:?}",
        noted(&wrapper, pid)
    );
    cli.sys.system.shutdown().await;
}

#[actix_rt::test]
async fn cancel_stops_the_process() {
    let (tmp, ep, cli) = fresh().await;
    let id = spawn(&cli, &ep, tmp.path(), "slow work").await;
    wait_long("the CLI's call at the endpoint", || !ep.turns().is_empty()).await;
    let pid = cli.backend.pid(&id).expect("a process");
    cli.sys.system.control(&id, Control::Cancel).await.unwrap();
    wait_long("the process gone", || state_of(pid).is_none()).await;
    assert_eq!(cli.backend.pid(&id), None);
    let rec = cli.sys.wait_for_status(&id, AgentStatus::Cancelled).await;
    assert!(rec.last_error.is_none(), "{:?}", rec.last_error);
    cli.sys.system.shutdown().await;
}

#[actix_rt::test]
async fn the_provider_model_is_asked_for_close_keeps_the_session_and_delete_removes_it() {
    let (tmp, ep, cli) = fresh().await;
    let id = spawn(&cli, &ep, tmp.path(), "say hello").await;
    answer(&cli.sys, &id, "answer to: say hello").await;
    let asked = ep.turns().pop().unwrap();
    assert_eq!(asked.body["model"], json!(PROVIDER_MODEL), "--model");
    let own = tmp.path().join(&id);
    let pid = cli.backend.pid(&id).expect("a process");
    cli.sys.system.control(&id, Control::Close).await.unwrap();
    wait_long("the process gone", || state_of(pid).is_none()).await;
    assert!(
        own.join("config").is_dir(),
        "a closed agent's session stays: {}",
        own.display()
    );
    cli.sys.system.control(&id, Control::Delete).await.unwrap();
    wait_long("the agent's CLI directory removed", || !own.exists()).await;
    assert_eq!(cli.backend.session_id(&id), None);
    cli.sys.system.shutdown().await;
}
