//! Hashing: the hash maps of the per-message path, and the stable hash that places agents
//! (`agentd_ports::hashing`, re-exported: the stores share them).

pub use agentd_ports::hashing::*;
