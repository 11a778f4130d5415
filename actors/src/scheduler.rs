//! `Scheduler`: one per process. When `limits.max_running_turns` is set, an agent asks it for a
//! turn slot before each turn; a full limit queues the request by priority (critical > high >
//! normal > low) and arrival (FIFO within a level), and the agent shows `queued`. Waiting work
//! holds no slot. Each agent's own inbox keeps its arrival order; priorities order turns
//! *across* agents.

use crate::agent::AgentActor;
use actix::prelude::*;
use agentd_proto::Priority;
use std::collections::{BTreeMap, HashSet};

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
    /// Where the permit goes.
    pub addr: Addr<AgentActor>,
}

/// Give a slot back (turn over), or withdraw a queued request.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Release(pub String);

/// How full the limit is: (running, queued).
#[derive(Message, Debug)]
#[rtype(result = "(usize, usize)")]
pub struct Load;

/// The process scheduler.
pub struct Scheduler {
    limit: usize,
    running: HashSet<String>,
    queue: BTreeMap<(Priority, u64), (String, Addr<AgentActor>)>,
    seq: u64,
}

impl Scheduler {
    /// A scheduler allowing `limit` turns at once (0 = unlimited).
    pub fn new(limit: usize) -> Self {
        Scheduler {
            limit,
            running: HashSet::new(),
            queue: BTreeMap::new(),
            seq: 0,
        }
    }

    fn grant_next(&mut self) {
        while self.limit == 0 || self.running.len() < self.limit {
            let Some((_, (agent_id, addr))) = self.queue.pop_first() else {
                return;
            };
            if !addr.connected() {
                continue;
            }
            self.running.insert(agent_id);
            addr.do_send(Permit);
        }
    }
}

impl Actor for Scheduler {
    type Context = Context<Self>;
}

impl Handler<Acquire> for Scheduler {
    type Result = ();

    fn handle(&mut self, msg: Acquire, _: &mut Self::Context) {
        self.seq += 1;
        self.queue
            .insert((msg.priority, self.seq), (msg.agent_id, msg.addr));
        self.grant_next();
    }
}

impl Handler<Release> for Scheduler {
    type Result = ();

    fn handle(&mut self, Release(agent_id): Release, _: &mut Self::Context) {
        self.running.remove(&agent_id);
        self.queue.retain(|_, (id, _)| *id != agent_id);
        self.grant_next();
    }
}

impl Handler<Load> for Scheduler {
    type Result = MessageResult<Load>;

    fn handle(&mut self, _: Load, _: &mut Self::Context) -> Self::Result {
        MessageResult((self.running.len(), self.queue.len()))
    }
}
