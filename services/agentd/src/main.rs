//! `agentd`: runs the agent service, or checks its configuration.

use agentd::Settings;
use agentd::settings::{Backend, StoreBackend};
use anyhow::Context as _;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// mimalloc instead of the system allocator: agents allocate many small, short-lived buffers
/// (envelopes, thread entries, Redis frames) across Arbiter threads, where glibc's arena locks
/// show (BENCHMARKS.md has the figures); `agentd-alloc` says how it is called.
#[global_allocator]
static GLOBAL: agentd_alloc::Mimalloc = agentd_alloc::Mimalloc;

/// Runs LLM agents as actors; parents spawn, message and manage their sub-agents.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// Configuration file layered over the built-in defaults.
    #[arg(long, global = true, env = "AGENTD_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Cmd>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the service (the default).
    Run,
    /// Validate the configuration and print the effective settings.
    CheckConfig,
    /// Move the Redis namespace (`redis.url`, `redis.namespace`) from the earlier key layout
    /// to this version's, once: every agentd process on it must be stopped. Running it again
    /// finishes a move that was cut off, and changes nothing after one that was done.
    Migrate,
    /// Ask a running agentd's `/healthz` (open without a token): exit 0 if it answers 200.
    /// For container health checks, which see the same settings as the service.
    Healthcheck {
        /// Address to ask (`HOST:PORT`); default `server.bind`, an unspecified address
        /// (`0.0.0.0`, `::`) meaning loopback.
        #[arg(long)]
        addr: Option<String>,
    },
}

/// Installs the log subscriber, with the OpenTelemetry exporter when `[telemetry]` (or the
/// standard `OTEL_*` variables) asks for one; answers the exporter, which flushes when dropped.
fn init_logs(settings: &Settings) -> anyhow::Result<Option<agentd::telemetry::Telemetry>> {
    use std::io::IsTerminal;
    let telemetry = agentd::telemetry::Telemetry::start(&settings.telemetry)?;
    agentd::logs::install_with(
        &settings.log.filter,
        settings.log.format == "json",
        std::io::stdout,
        std::io::stdout().is_terminal(),
        telemetry.as_ref(),
    )?;
    Ok(telemetry)
}

/// Runs the command; an error is printed once, as one line of its causes (never a backtrace,
/// whatever `RUST_BACKTRACE` says: it would only show where `main` gave up), and exits 1.
fn main() -> ExitCode {
    // Test builds only: the moments a test may stop this process at (`FAILPOINTS`).
    agentd_actors::failpoints::setup();
    match run_command(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", causes(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes joined by `: `, leaving out a cause its effect already quotes
/// (`configuration: <toml error>` caused by `<toml error>`).
fn causes(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let cause = cause.to_string();
        if text.contains(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}

fn run_command(cli: Cli) -> anyhow::Result<()> {
    let settings = Settings::load(cli.config.as_deref())?;
    match cli.command.unwrap_or(Cmd::Run) {
        Cmd::CheckConfig => {
            // Wiring proves the store, the script and the agent types load (and Redis answers).
            actix_rt::System::new().block_on(async {
                agentd::wiring::wire(
                    &settings,
                    std::sync::Arc::new(agentd_actors::SystemClock),
                    Default::default(),
                )
                .await
                .map(|_| ())
            })?;
            let mut shown = settings.clone();
            shown.redis.url = shown.redis.masked_url();
            shown.redis.cluster_nodes = shown.redis.masked_cluster_nodes();
            if !shown.auth.token.is_empty() {
                shown.auth.token = "***".into();
            }
            shown.mcp = shown.mcp.masked();
            // The store as it was chosen (`store.kind` may be unset).
            shown.store.kind = Some(settings.store().kind());
            // A remote A2A agent's headers may hold a token written in the file.
            let providers = std::iter::once(&mut shown.model).chain(shown.providers.values_mut());
            for p in providers {
                if let Backend::A2a(a2a) = &mut p.backend {
                    a2a.headers.values_mut().for_each(|v| *v = "***".into());
                }
            }
            println!(
                "{}",
                toml::to_string_pretty(&shown).context("printing settings")?
            );
            Ok(())
        }
        Cmd::Migrate => migrate(&settings),
        Cmd::Healthcheck { addr } => healthcheck(addr.as_deref().unwrap_or(&settings.server.bind)),
        Cmd::Run => {
            let telemetry = init_logs(&settings)?;
            let ran = actix_rt::System::new().block_on(run(settings));
            // Flushed here, outside the runtime: the exporter's HTTP client blocks.
            drop(telemetry);
            ran
        }
    }
}

/// `agentd migrate` (see [`Cmd::Migrate`]): a process counts as live while its heartbeat is
/// younger than two lease times, as the processes themselves count one another.
fn migrate(settings: &Settings) -> anyhow::Result<()> {
    let StoreBackend::Redis(r) = settings.store() else {
        anyhow::bail!("`agentd migrate` moves a Redis namespace: set redis.url");
    };
    let done = actix_rt::System::new().block_on(agentd_store::RedisStore::migrate_on(
        &r.target(),
        &r.namespace,
        r.partitions,
        2 * r.lease_ms,
    ));
    let done = done.with_context(|| format!("migrating namespace `{}`", r.namespace))?;
    match done {
        agentd_store::Migrated::AlreadyDone => println!(
            "namespace `{}` has this version's key layout already; nothing to do",
            r.namespace
        ),
        agentd_store::Migrated::Empty => println!(
            "namespace `{}` held nothing; it now has this version's key layout",
            r.namespace
        ),
        agentd_store::Migrated::Moved {
            agents,
            keys,
            rewritten,
        } => println!(
            "namespace `{}` moved to this version's key layout: {agents} agents, {keys} keys \
             renamed; {rewritten} threads and records rewritten",
            r.namespace
        ),
    }
    Ok(())
}

/// One `GET /healthz` over a plain TCP connection (no HTTP client needed in the image),
/// bounded by a 2 s timeout on each step.
fn healthcheck(addr: &str) -> anyhow::Result<()> {
    use std::io::{BufRead, BufReader, Write};
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
    let mut addr: SocketAddr = addr
        .parse()
        .with_context(|| format!("`{addr}` is not an address like 127.0.0.1:7878"))?;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr.ip() {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        });
    }
    let timeout = std::time::Duration::from_secs(2);
    let mut conn = TcpStream::connect_timeout(&addr, timeout)
        .with_context(|| format!("connecting to {addr}"))?;
    conn.set_read_timeout(Some(timeout))?;
    conn.set_write_timeout(Some(timeout))?;
    write!(
        conn,
        "GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut status = String::new();
    BufReader::new(conn)
        .read_line(&mut status)
        .context("reading the answer")?;
    match status.split_whitespace().nth(1) {
        Some("200") => Ok(()),
        _ => anyhow::bail!("{addr}/healthz answered `{}`", status.trim()),
    }
}

async fn run(settings: Settings) -> anyhow::Result<()> {
    // Listened to before anything starts: a signal that arrives while agentd is still starting
    // (recovering agents, connecting to Redis) stops it as soon as it is up, instead of the
    // default action killing it halfway.
    let mut signals = StopSignals::listen().context("listening for SIGTERM and SIGINT")?;
    tracing::info!("agentd starting");
    let running = agentd::Builder::new(settings.clone()).serve().await?;
    let url = format!("http://{}", running.addr);
    let backend = settings.model.backend.name();
    tracing::info!(%url, model = %backend, store = %settings.store_name(), "agentd is up");
    let store = match settings.store() {
        StoreBackend::Redis(r) => format!("redis at {}", r.masked_url()),
        // Any other store runs in this process, beside its data directory.
        _ => format!(
            "{} in {}",
            settings.store_name(),
            settings.store.data_dir.display()
        ),
    };
    let backend = match settings.model.backend {
        Backend::Scripted(_) => "scripted, offline",
        _ => backend,
    };
    println!("agentd listening on {url} (model backend: {backend}; store: {store})");
    // agentctl's default is http://127.0.0.1:7878: the hint names where this process is.
    println!("Try:  export AGENTD_URL={}", client_url(running.addr));
    if settings.auth.resolve().ok().flatten().is_some() {
        println!("      export AGENTD_TOKEN=<the token of [auth]>");
    }
    println!("      cargo run -p agentctl -- spawn --type lead \"build a parser\"");
    println!(
        "then: cargo run -p agentctl -- tree   and   cargo run -p agentctl -- thread <agent_id>"
    );
    signals.next().await;
    tracing::info!(
        "shutting down: no new work; queued and in-flight items stay in the durable inboxes"
    );
    // A second signal exits at once.
    actix_rt::spawn(async move {
        signals.next().await;
        tracing::warn!("second signal: exiting now");
        std::process::exit(130);
    });
    running.stop().await;
    Ok(())
}

/// The URL a client on this machine reaches the API at: the bound address, with a wildcard
/// (`0.0.0.0`, `::`) replaced by loopback, which a client cannot connect to everywhere.
fn client_url(addr: std::net::SocketAddr) -> String {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let mut addr = addr;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr.ip() {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        });
    }
    format!("http://{addr}")
}

/// SIGTERM and SIGINT (Ctrl-C), each noted from the moment it is listened to.
struct StopSignals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn listen() -> std::io::Result<StopSignals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(StopSignals {
                term: signal(SignalKind::terminate())?,
                interrupt: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(StopSignals {})
        }
    }

    /// The next signal, or the first one that arrived since [`Self::listen`].
    async fn next(&mut self) {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.term.recv() => {}
                _ = self.interrupt.recv() => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
