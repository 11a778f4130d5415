//! The ports the actors talk through: the `agentd-ports` crate, re-exported (adapters depend on
//! that crate alone; users of the actors name them here, or at this crate's root).

pub use agentd_ports::*;
