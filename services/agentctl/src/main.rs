//! `agentctl`: the command-line client of the agentd HTTP API. Human output by default,
//! `--json` for scripts; exit code 0 on success (and when whoever reads its output stops
//! reading), 1 on an API error, 2 on a usage or connection error.
//!
//! | module | holds |
//! |---|---|
//! | [`commands`] | the subcommands, one file per group of routes |
//! | [`client`] | the HTTP client and how a failed request is told apart |
//! | [`output`] | JSON or the human form: tables, the tree, the thread |

mod client;
mod commands;
mod output;

use clap::Parser;
use client::{Client, Failure};
use output::Output;
use std::process::ExitCode;

/// Drive a running agentd.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// Base URL of the agentd API.
    #[arg(
        long,
        global = true,
        env = "AGENTD_URL",
        default_value = "http://127.0.0.1:7878"
    )]
    url: String,
    /// Print raw JSON.
    #[arg(long, global = true)]
    json: bool,
    /// Bearer token (required when agentd has auth on).
    #[arg(long, global = true, env = "AGENTD_TOKEN", hide_env_values = true)]
    token: Option<String>,
    #[command(subcommand)]
    command: commands::Cmd,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let client = Client::new(&cli.url, cli.token.as_deref());
    let out = Output::new(cli.json);
    match cli.command.run(&client, &out) {
        Ok(()) => ExitCode::SUCCESS,
        // `agentctl … | head`: the reader has what it wanted.
        Err(Failure::OutputClosed) => ExitCode::SUCCESS,
        Err(Failure::Api(v)) => {
            out.api_error(&v);
            ExitCode::from(1)
        }
        Err(Failure::Other(e)) => {
            let e: anyhow::Error = e.context("agentctl");
            output::error(&format!("{e:#}"));
            ExitCode::from(2)
        }
    }
}
