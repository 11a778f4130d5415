//! The lifecycle state machine against a model: proptest drives random sequences of messages
//! and controls at one agent (real actors, scripted model) and, after each step settles,
//! compares the persisted status and the number of answered messages with what the model of
//! the transition table says.
//!
//! The model's table is not the code's: it is [`DOCUMENTED`], written from the table in
//! `docs/lifecycle.md`, and checked against `AgentStatus::can_become` pair by pair, so a change
//! to either shows here.

use agentd_proto::{AgentStatus, Control, Role};
use agentd_tests::*;
use proptest::prelude::*;

const SCRIPT: &str = "[[rule]]\ntext = \"ok: {{input}}\"\n";

/// The transitions `docs/lifecycle.md` documents ("may become"), by wire name. Whoever adds a
/// status adds its row here, and its name to the rows that may become it, as the document
/// says (`docs/architecture.md`, "add a new agent status").
const DOCUMENTED: &[(&str, &[&str])] = &[
    (
        "idle",
        &[
            "running",
            "queued",
            "waiting_dependency",
            "paused",
            "closed",
            "cancelled",
            "terminated",
        ],
    ),
    (
        "queued",
        &[
            "running",
            "idle",
            "paused",
            "closed",
            "cancelled",
            "terminated",
        ],
    ),
    (
        "running",
        &[
            "idle",
            "queued",
            "waiting_review",
            "waiting_tool",
            "waiting_dependency",
            "waiting_question",
            "waiting_rate_limit",
            "paused",
            "completed",
            "failed",
            "cancelled",
            "terminated",
        ],
    ),
    (
        "waiting_review",
        &[
            "completed",
            "running",
            "queued",
            "waiting_tool",
            "paused",
            "closed",
            "cancelled",
            "terminated",
        ],
    ),
    (
        "waiting_tool",
        &[
            "running",
            "queued",
            "paused",
            "closed",
            "cancelled",
            "terminated",
        ],
    ),
    ("waiting_dependency", WAITING),
    ("waiting_question", WAITING),
    ("waiting_rate_limit", WAITING),
    (
        "paused",
        &[
            "running",
            "idle",
            "queued",
            "waiting_review",
            "waiting_tool",
            "waiting_dependency",
            "waiting_question",
            "waiting_rate_limit",
            "completed",
            "failed",
            "closed",
            "cancelled",
            "terminated",
        ],
    ),
    (
        "completed",
        &["running", "queued", "closed", "cancelled", "terminated"],
    ),
    (
        "failed",
        &["running", "queued", "closed", "cancelled", "terminated"],
    ),
    ("cancelled", &["running", "queued", "closed"]),
    ("terminated", &["running", "queued", "closed"]),
    ("closed", &["idle"]),
];

/// `waiting_question` and `waiting_rate_limit` go "as `waiting_dependency`".
const WAITING: &[&str] = &[
    "running",
    "idle",
    "queued",
    "paused",
    "failed",
    "closed",
    "cancelled",
    "terminated",
];

/// Whether the documented table lets `from` become `to`.
fn documented(from: AgentStatus, to: AgentStatus) -> bool {
    DOCUMENTED
        .iter()
        .find(|(name, _)| *name == from.as_str())
        .unwrap_or_else(|| panic!("`{from}` has no row in DOCUMENTED"))
        .1
        .contains(&to.as_str())
}

#[test]
fn the_code_s_transition_table_is_the_documented_one() {
    let names: Vec<&str> = AgentStatus::ALL.iter().map(|s| s.as_str()).collect();
    for (name, next) in DOCUMENTED {
        assert!(
            names.contains(name),
            "DOCUMENTED names `{name}`, which is no status"
        );
        for n in *next {
            assert!(
                names.contains(n),
                "`{name}` may become `{n}`, which is no status"
            );
        }
    }
    assert_eq!(
        DOCUMENTED.len(),
        AgentStatus::ALL.len(),
        "a status without a row"
    );
    for from in AgentStatus::ALL {
        for to in AgentStatus::ALL {
            assert_eq!(
                from.can_become(to),
                documented(from, to),
                "{from} -> {to}: the code and docs/lifecycle.md disagree"
            );
        }
    }
}

/// A repository file's text.
fn repo_file(path: &str) -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(path),
    )
    .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The `backticked` words of `text`.
fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The status named `name` (its wire name).
fn status_named(name: &str) -> Option<AgentStatus> {
    AgentStatus::ALL.into_iter().find(|s| s.as_str() == name)
}

/// The statuses a "may become" cell of `docs/lifecycle.md` names: wire names, `waiting_*`
/// (every waiting status), or `as `<status>`` (that row's).
fn may_become(cell: &str, rows: &[(AgentStatus, String)]) -> Vec<AgentStatus> {
    if let Some(other) = cell.trim().strip_prefix("as ") {
        let other = status_named(other.trim_matches('`')).expect("`as` names a status");
        let (_, cell) = rows.iter().find(|(s, _)| *s == other).expect("its row");
        return may_become(cell, rows);
    }
    let mut out = Vec::new();
    for word in backticked(cell) {
        if word == "waiting_*" {
            out.extend(
                AgentStatus::ALL
                    .into_iter()
                    .filter(|s| s.as_str().starts_with("waiting_")),
            );
        } else {
            out.push(status_named(word).unwrap_or_else(|| panic!("`{word}` is no status")));
        }
    }
    out
}

/// `docs/lifecycle.md`'s status table itself (not a copy of it) has a row for every status,
/// and says what the code's transition table does.
#[test]
fn the_lifecycle_document_s_status_table_is_the_code_s() {
    let doc = repo_file("docs/lifecycle.md");
    let rows: Vec<(AgentStatus, String)> = doc
        .lines()
        .skip_while(|l| !l.starts_with("| status | entered when | may become |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").collect();
            let name = cells[0].trim().trim_matches('`');
            let status = status_named(name).unwrap_or_else(|| panic!("a row for `{name}`"));
            (status, cells[cells.len() - 1].to_string())
        })
        .collect();
    let listed: Vec<AgentStatus> = rows.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        listed,
        AgentStatus::ALL,
        "one row per status, in table order"
    );
    for (from, cell) in &rows {
        let next = may_become(cell, &rows);
        for to in AgentStatus::ALL {
            assert_eq!(
                from.can_become(to),
                next.contains(&to),
                "{from} -> {to}: the code and docs/lifecycle.md disagree"
            );
        }
    }
}

/// The README's list of statuses names every one.
#[test]
fn the_readme_lists_every_status() {
    let readme = repo_file("README.md");
    let paragraph: String = readme
        .lines()
        .skip_while(|l| !l.starts_with("**Statuses**"))
        .take_while(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let named: Vec<&str> = backticked(&paragraph)
        .into_iter()
        .filter(|w| status_named(w).is_some())
        .collect();
    let all: Vec<&str> = AgentStatus::ALL.iter().map(|s| s.as_str()).collect();
    assert_eq!(named, all, "the README's statuses, in table order");
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Send,
    Control(Control),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Send),
        2 => Just(Op::Control(Control::Pause)),
        2 => Just(Op::Control(Control::Resume)),
        1 => Just(Op::Control(Control::Cancel)),
        1 => Just(Op::Control(Control::Terminate)),
        1 => Just(Op::Control(Control::Close)),
    ]
}

/// What the transition table says happens; `(status, answered, held)`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Model {
    status: AgentStatus,
    answered: usize,
    held: usize,
}

impl Model {
    fn apply(&mut self, op: Op) {
        use AgentStatus::*;
        let settle = |m: &mut Model, to: AgentStatus| {
            if m.status == to || documented(m.status, to) {
                m.status = to;
                m.held = 0; // queued work is dropped
            }
        };
        match op {
            Op::Send if self.status == Paused => self.held += 1,
            Op::Send => {
                self.answered += 1;
                self.status = Idle; // runs a turn, then idle (a closed agent re-opens)
            }
            Op::Control(Control::Pause) => {
                if self.status != Closed
                    && (self.status == Paused || documented(self.status, Paused))
                {
                    self.status = Paused;
                }
            }
            Op::Control(Control::Resume) => {
                if self.status == Paused {
                    self.status = Idle;
                    self.answered += self.held;
                    self.held = 0;
                }
            }
            Op::Control(Control::Cancel) => settle(self, Cancelled),
            Op::Control(Control::Terminate) => settle(self, Terminated),
            Op::Control(Control::Close) => {
                self.status = Closed;
                self.held = 0;
            }
            Op::Control(_) => {}
        }
    }
}

async fn settled(sys: &TestSystem, id: &str) {
    wait_until("the agent settles", || async {
        let v = sys.system.inspect(id).await.unwrap();
        let status = v.view.summary.status;
        (v.live.inbox == Some(0) || status == AgentStatus::Paused)
            && v.live.turn_running == Some(false)
            && !matches!(status, AgentStatus::Running | AgentStatus::Queued)
    })
    .await;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn persisted_status_follows_the_model(ops in proptest::collection::vec(op(), 1..14)) {
        actix_rt::System::new().block_on(async {
            let sys = TestSystem::builder().script(SCRIPT).start().await;
            let a = sys.root("plain", None).await;
            let mut model = Model { status: AgentStatus::Idle, answered: 0, held: 0 };
            for (step, op) in ops.iter().enumerate() {
                match op {
                    Op::Send => {
                        sys.system.send(&a.id, &format!("m{step}"), false).await.unwrap();
                    }
                    Op::Control(c) => {
                        let _ = sys.system.control(&a.id, *c).await;
                    }
                }
                model.apply(*op);
                settled(&sys, &a.id).await;
                let stored = sys.store.get_agent(&a.id).await.unwrap().unwrap();
                let answered = sys
                    .thread(&a.id)
                    .await
                    .iter()
                    .filter(|e| e.role == Role::Assistant && e.text.starts_with("ok: "))
                    .count();
                assert_eq!(
                    (stored.status, answered),
                    (model.status, model.answered),
                    "after {:?} (step {step} of {ops:?})",
                    op
                );
            }
        });
    }
}
