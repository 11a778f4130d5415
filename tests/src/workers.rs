//! Driving a lead's Manage workers from a test, as the lead's own `Manage` call would.

use crate::TestSystem;
use serde_json::json;

impl TestSystem {
    /// Sends `lead`'s worker `worker` (a title) `message` in async mode on thread `alias`, as
    /// the lead's `Manage` call would, and answers the worker's id. The worker's answer comes
    /// back to the lead as a forward.
    pub async fn send_async(&self, lead: &str, worker: &str, message: &str, alias: &str) -> String {
        let r = self
            .system
            .invoke_tool(
                Some(lead),
                "Manage",
                json!({"command": "send_message", "worker": worker, "message": message,
                       "threadAlias": alias, "mode": "async"}),
            )
            .await
            .expect("Manage send_message");
        assert_eq!(r["status"], "sent", "{r}");
        r["childThreadId"]
            .as_str()
            .expect("childThreadId")
            .to_string()
    }
}
