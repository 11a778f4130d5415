//! The service's log subscriber, shared by `main` and the benchmark (which measures what the
//! service's own logging costs).

use crate::start_error::StartError;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Text lines' fields as `name=value` (the message bare), written straight through: the
/// default formatter styles each field (even with colours off), and an info-level span's
/// fields are formatted when the span is made, which every turn does.
fn plain_fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> + Send + Sync + 'static
{
    use tracing_subscriber::field::MakeExt;
    tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        if field.name() == "message" {
            write!(w, "{value:?}")
        } else {
            write!(w, "{field}={value:?}")
        }
    })
    .delimited(" ")
}

/// What the MCP SDK logs unless a filter names it: warnings and errors. At INFO it logs each
/// server's `peer_info` (a server's instructions can run to pages) and every notification;
/// agentd logs what matters of a connection itself (`agentd_mcp`), the peer info at DEBUG.
const RMCP_DEFAULT: &str = "rmcp=warn";

/// Installs the process's log subscriber: `filter` in `RUST_LOG` syntax (the `RUST_LOG`
/// environment variable wins when set; either gets [`RMCP_DEFAULT`] unless it names `rmcp`),
/// text or JSON lines to `writer`, and ANSI colours only when `ansi` (the writer is a
/// terminal): colours were on for every writer, which put escape codes in log files and
/// journals.
pub fn install<W>(filter: &str, json: bool, writer: W, ansi: bool) -> Result<(), StartError>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    install_with(filter, json, writer, ansi, None)
}

/// [`install`], and with `telemetry` its exporter's layer beside the log lines (each layer
/// then filtered on its own: the log lines never show the GenAI spans, the exporter takes
/// nothing else). Without it, the subscriber is [`install`]'s, unchanged.
pub fn install_with<W>(
    filter: &str,
    json: bool,
    writer: W,
    ansi: bool,
    telemetry: Option<&crate::telemetry::Telemetry>,
) -> Result<(), StartError>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let from_env = std::env::var(EnvFilter::DEFAULT_ENV)
        .ok()
        .and_then(|text| EnvFilter::try_new(&text).ok().map(|f| (text, f)));
    let (text, mut filter) =
        from_env.unwrap_or_else(|| (filter.to_string(), EnvFilter::new(filter)));
    if !text.contains("rmcp") {
        filter = filter.add_directive(
            RMCP_DEFAULT
                .parse()
                .map_err(|e| StartError::logs(format!("the directive `{RMCP_DEFAULT}`"), e))?,
        );
    }
    // The GenAI spans are the exporter's only.
    filter = filter.add_directive(
        format!("{}=off", agentd_observe::telemetry::TARGET)
            .parse()
            .map_err(|e| StartError::logs("the telemetry directive", e))?,
    );
    if let Some(telemetry) = telemetry {
        use tracing_subscriber::Layer as _;
        use tracing_subscriber::layer::SubscriberExt as _;
        use tracing_subscriber::util::SubscriberInitExt as _;
        let lines = tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .with_ansi(ansi);
        let lines = if json {
            lines.json().with_filter(filter).boxed()
        } else {
            lines.fmt_fields(plain_fields()).with_filter(filter).boxed()
        };
        tracing_subscriber::registry()
            .with(lines)
            .with(telemetry.layer())
            .try_init()
            .map_err(|e| StartError::logs("installing the log subscriber", e))?;
        agentd_observe::telemetry::set_enabled(true);
        agentd_observe::telemetry::set_capture_content(telemetry.capture_content);
        return Ok(());
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(ansi);
    let installed = if json {
        builder.json().try_init()
    } else {
        builder.fmt_fields(plain_fields()).try_init()
    };
    installed.map_err(|e| StartError::logs("installing the log subscriber", e))
}
