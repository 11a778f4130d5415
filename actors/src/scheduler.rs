//! `Scheduler`: one per process. When a concurrency limit is set — running turns per process
//! (`limits.max_running_turns`), per parent (`limits.max_running_turns_per_parent`) or per
//! model provider (`max_concurrent` of a provider) — an agent asks it for a turn slot before
//! each turn. A request that a full limit holds back waits by priority (critical > high >
//! normal > low) and arrival (FIFO within a level), and the agent shows `queued`; the first
//! waiting request that every limit allows is granted, so a saturated parent or provider does
//! not hold back other agents' work. Waiting work holds no slot. Each agent's own inbox keeps
//! its arrival order; priorities order turns *across* agents.

use actix::prelude::*;
use agentd_proto::Priority;
use std::collections::{BTreeMap, HashMap};

/// A granted turn slot.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Permit;

/// Ask for a turn slot.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Acquire {
    /// The asking agent.
    pub agent_id: String,
    /// Its priority.
    pub priority: Priority,
    /// Its parent (for the per-parent limit).
    pub parent: Option<String>,
    /// Its model provider (`default` for the default one).
    pub provider: String,
    /// When the work arrived (the envelope's `sent_at`, persisted with it): FIFO within a
    /// priority follows arrival, so the order survives a restart that re-queues everything.
    pub queued_at_ms: u64,
    /// Where the permit goes.
    pub addr: Recipient<Permit>,
}

/// Give a slot back (turn over), or withdraw a queued request.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Release(pub String);

/// How full the limits are: (running, queued).
#[derive(Message, Debug)]
#[rtype(result = "(usize, usize)")]
pub struct Load;

/// The limits a scheduler enforces (0 = no limit).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchedulerLimits {
    /// Running turns in the process.
    pub total: usize,
    /// Running turns of one parent's children.
    pub per_parent: usize,
    /// Running turns per provider name.
    pub per_provider: BTreeMap<String, usize>,
}

impl SchedulerLimits {
    /// Whether any limit is set (without one, agents need no scheduler).
    pub fn any(&self) -> bool {
        self.total > 0 || self.per_parent > 0 || self.per_provider.values().any(|n| *n > 0)
    }
}

struct Waiting {
    agent_id: String,
    parent: Option<String>,
    provider: String,
    addr: Recipient<Permit>,
}

/// The process scheduler.
pub struct Scheduler {
    limits: SchedulerLimits,
    /// agent → (parent, provider) of each running turn.
    running: HashMap<String, (Option<String>, String)>,
    by_parent: HashMap<String, usize>,
    by_provider: HashMap<String, usize>,
    queue: BTreeMap<(Priority, u64, u64), Waiting>,
    seq: u64,
}

impl Scheduler {
    /// A scheduler enforcing `limits`.
    pub fn new(limits: SchedulerLimits) -> Self {
        Scheduler {
            limits,
            running: HashMap::new(),
            by_parent: HashMap::new(),
            by_provider: HashMap::new(),
            queue: BTreeMap::new(),
            seq: 0,
        }
    }

    fn allows(&self, w: &Waiting) -> bool {
        let parent_ok = match (&w.parent, self.limits.per_parent) {
            (Some(p), limit) if limit > 0 => self.by_parent.get(p).copied().unwrap_or(0) < limit,
            _ => true,
        };
        let provider_ok = match self.limits.per_provider.get(&w.provider) {
            Some(&limit) if limit > 0 => {
                self.by_provider.get(&w.provider).copied().unwrap_or(0) < limit
            }
            _ => true,
        };
        parent_ok && provider_ok
    }

    fn grant_next(&mut self) {
        loop {
            if self.limits.total > 0 && self.running.len() >= self.limits.total {
                return;
            }
            self.queue.retain(|_, w| w.addr.connected());
            let Some(key) = self
                .queue
                .iter()
                .find(|(_, w)| self.allows(w))
                .map(|(k, _)| *k)
            else {
                return;
            };
            let Some(w) = self.queue.remove(&key) else {
                return;
            };
            if let Some(p) = &w.parent {
                *self.by_parent.entry(p.clone()).or_default() += 1;
            }
            *self.by_provider.entry(w.provider.clone()).or_default() += 1;
            self.running
                .insert(w.agent_id.clone(), (w.parent.clone(), w.provider.clone()));
            w.addr.do_send(Permit);
        }
    }

    fn release(&mut self, agent_id: &str) {
        if let Some((parent, provider)) = self.running.remove(agent_id) {
            if let Some(p) = parent
                && let Some(n) = self.by_parent.get_mut(&p)
            {
                *n -= 1;
                if *n == 0 {
                    self.by_parent.remove(&p);
                }
            }
            if let Some(n) = self.by_provider.get_mut(&provider) {
                *n -= 1;
                if *n == 0 {
                    self.by_provider.remove(&provider);
                }
            }
        }
        self.queue.retain(|_, w| w.agent_id != agent_id);
    }
}

impl Actor for Scheduler {
    type Context = Context<Self>;
}

impl Handler<Acquire> for Scheduler {
    type Result = ();

    fn handle(&mut self, msg: Acquire, _: &mut Self::Context) {
        self.seq += 1;
        self.queue.insert(
            (msg.priority, msg.queued_at_ms, self.seq),
            Waiting {
                agent_id: msg.agent_id,
                parent: msg.parent,
                provider: msg.provider,
                addr: msg.addr,
            },
        );
        self.grant_next();
    }
}

impl Handler<Release> for Scheduler {
    type Result = ();

    fn handle(&mut self, Release(agent_id): Release, _: &mut Self::Context) {
        self.release(&agent_id);
        self.grant_next();
    }
}

impl Handler<Load> for Scheduler {
    type Result = MessageResult<Load>;

    fn handle(&mut self, _: Load, _: &mut Self::Context) -> Self::Result {
        MessageResult((self.running.len(), self.queue.len()))
    }
}
