//! agentd's cross-crate tests, as one test binary with a module per area (the shape of
//! zero2prod's `tests/api/main.rs`): every file directly under `tests/tests/` is a binary of its
//! own that links the whole workspace, so the areas live here as modules and the workspace is
//! linked once. Shared set-up (systems, processes, servers, fixtures) is in the `agentd-tests`
//! library (`tests/src`).
//!
//! The modules share one process: a test must not change process-wide state (environment
//! variables, the current directory, a global tracing subscriber) or rely on fixed ports or
//! file names; each one starts its own servers on free loopback ports and keeps its files in
//! its own temporary directory.

mod a2a;
mod a2a_client;
mod a2a_client_processes;
mod agent_types;
mod agentctl;
mod approvals;
mod architecture;
mod checkpoints;
mod claude_code;
mod dashboard;
mod dependencies;
mod deploy_files;
mod event_resume;
mod exactly_once;
mod fork;
mod forwards;
mod http_api;
mod idempotent_messages;
mod idempotent_spawns;
mod lifecycle_model;
mod log_lines;
mod manage;
mod management;
mod mcp_server;
mod mcp_tools;
mod model_backends;
mod model_streaming;
mod openapi_conformance;
mod operations;
mod process_backend;
mod protocol;
mod provider_limits;
mod providers;
mod recovery;
mod redis_cluster;
mod redis_example;
mod redis_failover;
mod redis_migrate;
mod redis_replicas;
mod redis_restart;
mod redis_store;
mod redis_takeover;
mod review_yield;
mod scheduling;
mod service;
mod service_tools;
mod service_tools_redis;
mod subagents;
mod telemetry;
mod tool_call_pairing;
mod validation;
mod webhook_tools;
