//! Usage accounting and budgets: a model call's tokens and cost are added to the agent's record,
//! its meters and the events; going over the agent's own budget, or its tree's (the root's
//! budget covers every agent of the tree), pauses it.

use super::AgentActor;
use super::messages::{BudgetPause, SetBudget};
use crate::deps::Deps;
use crate::tree_spend::Spent;
use actix::prelude::*;
use agentd_observe::metrics;
use agentd_proto::{AgentRecord, AgentStatus, ErrorCode, Event, Usage};

/// The price of an agent's model, the counters its usage adds to and its turn-duration
/// histogram, resolved once per agent (looking them up by their labels costs more than counting).
pub(super) struct UsageMeters {
    price: agentd_proto::usage::Price,
    /// Input, output, cache write, cache read.
    tokens: [metrics::Counter; 4],
    cost: metrics::Counter,
    /// Duration of its turns (by agent type).
    pub(super) turns: metrics::Timer,
}

impl UsageMeters {
    pub(super) fn of(rec: &AgentRecord, deps: &Deps) -> Self {
        let config = &deps.config;
        let model = config
            .types
            .get(&rec.agent_type)
            .and_then(|t| t.model.as_deref());
        let model_name = model.unwrap_or("default");
        let m = metrics::global();
        let tokens = |kind| {
            m.counter(
                "agentd_tokens_total",
                "Tokens used, by model and kind.",
                &[("model", model_name), ("kind", kind)],
            )
        };
        UsageMeters {
            price: config.price_of(model),
            tokens: [
                tokens("input"),
                tokens("output"),
                tokens("cache_write"),
                tokens("cache_read"),
            ],
            cost: m.counter(
                "agentd_cost_usd_total",
                "Cost in USD, by model.",
                &[("model", model_name)],
            ),
            turns: m.histogram(
                "agentd_turn_seconds",
                "Duration of agent turns.",
                &[("agent_type", &rec.agent_type)],
            ),
        }
    }
}

impl AgentActor {
    /// Counts a model call's `usage` in the agent's record, the token and cost meters and the
    /// events, and checks its tree's budget with it (the agent's own budget is its caller's
    /// to check: mid-turn at once, at a turn's end with the status the end decides).
    pub(super) fn count_usage(&mut self, usage: Usage, ctx: &mut Context<Self>) {
        let spent = self.usage_counted(usage);
        self.check_tree_budget(spent, ctx);
    }

    /// [`Self::count_usage`] without the tree's check; answers what was spent.
    fn usage_counted(&mut self, usage: Usage) -> Spent {
        let meters = &self.turn_setup().usage;
        let cost = meters.price.cost(&usage);
        for (counter, n) in meters.tokens.iter().zip([
            usage.input,
            usage.output,
            usage.cache_write,
            usage.cache_read,
        ]) {
            counter.add(n as f64);
        }
        meters.cost.add(cost);
        // One copy-on-write access for both fields.
        let rec = &mut *self.rec;
        rec.usage += usage;
        rec.cost_usd += cost;
        if self.deps().events.is_listened() {
            self.deps().events.publish(&Event::TokenUsage {
                agent_id: self.rec.id.clone(),
                usage,
                cost_usd: cost,
            });
        }
        Spent {
            usage,
            cost_usd: cost,
        }
    }

    /// Which budget limit the agent is over, if any.
    pub(super) fn over_budget(&self) -> Option<&'static str> {
        self.rec.budget.as_deref().and_then(|b| {
            b.exceeded(
                &self.rec.usage,
                self.rec.cost_usd,
                self.deps().clock.now_ms(),
            )
        })
    }

    /// Pauses the agent (reason `budget_exceeded: <limit>`, event) if it is over its budget;
    /// answers whether it is paused for it. Raising the budget and resuming continues it.
    pub(super) fn pause_if_over_budget(&mut self, ctx: &mut Context<Self>) -> bool {
        let Some(limit) = self.over_budget() else {
            return false;
        };
        if self.rec.status == AgentStatus::Paused {
            return true;
        }
        let reason = format!("{}: {limit}", ErrorCode::BudgetExceeded.as_str());
        if self.pause_now(reason, ctx).is_err() {
            return false;
        }
        self.publish_budget_exceeded(limit.to_string());
        true
    }

    /// Pauses the agent for budget `limit`: a running turn stops at its next step boundary
    /// (and continues once the budget is raised and the agent resumed); otherwise now.
    fn pause_for_budget(&mut self, limit: String, ctx: &mut Context<Self>) {
        let reason = format!("{}: {limit}", ErrorCode::BudgetExceeded.as_str());
        match self.activity.running_mut() {
            Some(turn) if turn.shared.stop_requested() => return,
            Some(turn) => {
                turn.shared.request_stop();
                turn.pause_reason = Some(reason.into());
            }
            None => {
                if self.rec.status == AgentStatus::Paused || self.pause_now(reason, ctx).is_err() {
                    return;
                }
            }
        }
        self.publish_budget_exceeded(limit);
    }

    fn publish_budget_exceeded(&self, limit: String) {
        self.deps().events.publish(&Event::BudgetExceeded {
            agent_id: self.rec.id.clone(),
            limit,
        });
    }

    /// Checks the root's budget (as stored, read at most once per
    /// [`crate::tree_spend::SUM_TTL_MS`] per tree in this process) against the whole tree's
    /// spending, `spent` being what this agent just spent; a spent tree budget pauses every
    /// agent of the tree (reason `budget_exceeded: tree …`). The tree's spending is the usage and cost of every
    /// agent as stored (this one's as it is now), summed at most once per
    /// [`crate::tree_spend::SUM_TTL_MS`] per tree in this process, with this process's spending
    /// since added ([`crate::tree_spend::TreeSpend`]). In a tree with a budget, each agent's
    /// usage is persisted after every model call so the others' sums see it.
    fn check_tree_budget(&mut self, spent: Spent, ctx: &mut Context<Self>) {
        if self.rec.parent_id.is_none() && self.rec.budget.is_none() {
            return; // a root without a budget: no tree budget to check
        }
        let system = self.system.clone();
        let own_budget = self.rec.budget.as_deref().copied();
        let is_root = self.rec.parent_id.is_none();
        let (id, root_id) = (self.rec.id.clone(), self.rec.root_id.clone());
        let mine = Spent {
            usage: self.rec.usage,
            cost_usd: self.rec.cost_usd,
        };
        ctx.spawn(
            async move {
                let deps = &system.deps;
                let now = deps.clock.now_ms();
                let budget = if is_root {
                    own_budget
                } else {
                    match system.tree_spend.budget(&root_id, now) {
                        Some(budget) => budget,
                        None => {
                            let root = deps.store.get_agent_shared(&root_id).await.ok()?;
                            let budget = root.and_then(|r| r.budget.as_deref().copied());
                            system.tree_spend.put_budget(&root_id, budget, now);
                            budget
                        }
                    }
                }?;
                let tree = match system.tree_spend.add(&root_id, spent, now) {
                    Some(tree) => tree,
                    None => {
                        let tree = sum_tree(deps, &root_id, &id, mine).await;
                        system.tree_spend.put(&root_id, tree, now);
                        tree
                    }
                };
                Some(
                    budget
                        .exceeded(&tree.usage, tree.cost_usd, deps.clock.now_ms())
                        .map(|limit| format!("tree {limit}")),
                )
            }
            .into_actor(self)
            .map(|checked, act, ctx| {
                let Some(limit) = checked else {
                    return; // no tree budget
                };
                act.persist(ctx);
                if let Some(limit) = limit {
                    act.system
                        .supervisor
                        .do_send(crate::supervisor::messages::PauseTree {
                            root_id: act.rec.root_id.to_string(),
                            limit,
                        });
                }
            }),
        );
    }
}

/// The spending of `root_id`'s tree: every agent's usage and cost as stored, agent `me`'s as
/// `mine` (its newest, maybe not stored yet).
async fn sum_tree(deps: &Deps, root_id: &str, me: &str, mine: Spent) -> Spent {
    let mut tree = Spent::default();
    let mut stack = vec![root_id.to_string()];
    while let Some(id) = stack.pop() {
        if id == me {
            tree.usage += mine.usage;
            tree.cost_usd += mine.cost_usd;
        } else if let Some(rec) = deps.store.get_agent(&id).await.ok().flatten() {
            tree.usage += rec.usage;
            tree.cost_usd += rec.cost_usd;
        }
        stack.extend(deps.store.children(&id).await.unwrap_or_default());
    }
    tree
}

impl AgentActor {
    /// A running turn's model call used `usage` (at `step` of its task, if it was a step):
    /// counted now, and over a budget the turn stops at its next step boundary.
    pub(super) fn usage_reported(
        &mut self,
        usage: Usage,
        step: Option<u32>,
        ctx: &mut Context<Self>,
    ) {
        if let Some(step) = step {
            self.rec.task_steps_counted = self.rec.task_steps_counted.max(step);
        }
        self.count_usage(usage, ctx);
        if let Some(limit) = self.over_budget() {
            self.pause_for_budget(limit.to_string(), ctx);
        }
    }
}

impl Handler<BudgetPause> for AgentActor {
    type Result = ();

    fn handle(&mut self, msg: BudgetPause, ctx: &mut Self::Context) {
        self.pause_for_budget(msg.0, ctx);
        self.check_activity();
    }
}

impl Handler<SetBudget> for AgentActor {
    type Result = MessageResult<SetBudget>;

    fn handle(&mut self, msg: SetBudget, ctx: &mut Self::Context) -> Self::Result {
        self.rec.budget = Some(Box::new(msg.0));
        if self.rec.parent_id.is_none() {
            // Its tree's agents in this process check the new budget from their next call on
            // (not the one stored until this is persisted).
            let now = self.deps().clock.now_ms();
            self.system
                .tree_spend
                .put_budget(&self.rec.id, Some(msg.0), now);
        }
        self.persist(ctx);
        self.check_activity();
        MessageResult(self.rec.clone())
    }
}
