//! The settings' layering, validation and the inheritance of providers, checked.

use super::*;
use config::Map;

#[test]
fn defaults_load_and_overrides_apply() {
    let s = Settings::from_overrides("[server]\nbind = \"127.0.0.1:0\"\n[limits]\nmax_depth = 2\n");
    let s = s.map_err(|e| e.to_string());
    assert!(s.is_ok(), "{s:?}");
    if let Ok(s) = s {
        assert_eq!(s.server.bind, "127.0.0.1:0");
        assert_eq!(s.limits.max_depth, 2);
        assert_eq!(s.limits.max_children, 64);
        assert_eq!(s.store.kind, None);
        assert_eq!(s.store().kind(), StoreKind::Embedded);
    }
}

#[test]
fn replicas_are_not_waited_for_by_default_and_a_wait_has_an_end() {
    let s = Settings::from_overrides("").map_err(|e| e.to_string());
    assert!(
        matches!(&s, Ok(s) if (s.redis.min_replicas, s.redis.replica_wait_ms) == (0, 1000)),
        "{s:?}"
    );
    let s = Settings::from_overrides(
        "[redis]\nurl = \"redis://127.0.0.1:1/\"\nmin_replicas = 1\nreplica_wait_ms = 0\n",
    );
    let e = s.map(|_| ()).map_err(|e| e.to_string());
    assert!(
        matches!(&e, Err(m) if m.contains("redis.replica_wait_ms")),
        "{e:?}"
    );
}

#[test]
fn command_limits_default_and_must_leave_room_to_run() {
    let s = Settings::from_overrides("").map_err(|e| e.to_string());
    assert!(s.is_ok(), "{s:?}");
    if let Ok(s) = s {
        assert_eq!(
            (
                s.redis.commands_running,
                s.redis.commands_taken,
                s.redis.command_replies_maxlen
            ),
            (64, 1024, 10_000)
        );
    }
    for bad in [
        "commands_running = 0",
        "commands_running = 8\ncommands_taken = 4",
    ] {
        let s =
            Settings::from_overrides(&format!("[redis]\nurl = \"redis://127.0.0.1:1/\"\n{bad}\n"));
        let e = s.map(|_| ()).map_err(|e| e.to_string());
        assert!(
            matches!(&e, Err(m) if m.contains("redis.commands_running")),
            "{bad}: {e:?}"
        );
    }
}

#[test]
fn a_redis_cluster_is_its_url_and_seed_nodes() {
    let s = Settings::from_overrides(
        "[redis]\nurl = \"redis://h1:7000/\"\ncluster = true\n\
         cluster_nodes = \"redis://h2:7000/, redis://h3:7000/\"\n",
    )
    .map_err(|e| e.to_string());
    assert_eq!(
        s.map(|s| s.redis.target()),
        Ok(agentd_store::RedisTarget::cluster([
            "redis://h1:7000/",
            "redis://h2:7000/",
            "redis://h3:7000/"
        ]))
    );
    let one = Settings::from_overrides("[redis]\nurl = \"redis://h1:7000/\"\n")
        .map(|s| s.redis.target())
        .map_err(|e| e.to_string());
    assert_eq!(
        one,
        Ok(agentd_store::RedisTarget::single("redis://h1:7000/"))
    );
    for (bad, says) in [
        (
            "cluster_nodes = [\"redis://h2:7000/\"]",
            "set redis.cluster = true",
        ),
        (
            "cluster = true\ncluster_nodes = [\"h2:7000\"]",
            "must start with redis://",
        ),
    ] {
        let e = Settings::from_overrides(&format!("[redis]\nurl = \"redis://h1:7000/\"\n{bad}\n"))
            .map(|_| ())
            .map_err(|e| e.to_string());
        assert!(matches!(&e, Err(m) if m.contains(says)), "{bad}: {e:?}");
    }
}

#[test]
fn redis_passwords_are_masked() {
    let mut s = Settings::from_overrides("").map_err(|e| e.to_string());
    if let Ok(s) = s.as_mut() {
        s.redis.url = "rediss://app:s3cret@db:6380/0".into();
        assert_eq!(s.redis.masked_url(), "rediss://app:***@db:6380/0");
        assert!(!s.redis.masked_url().contains("s3cret"));
    }
    assert!(s.is_ok());
}

#[test]
fn an_a2a_provider_takes_kind_a_card_and_headers_and_needs_the_card() {
    let s = Settings::from_overrides(
        "[providers.far]\nkind = \"a2a\"\ncard_url = \"http://127.0.0.1:1/card\"\n\
         headers = { Authorization = \"Bearer ${T}\" }\n",
    )
    .map_err(|e| e.to_string());
    assert!(s.is_ok(), "{s:?}");
    if let Ok(s) = s {
        let Backend::A2a(far) = &s.providers["far"].backend else {
            panic!("{:?}", s.providers["far"]);
        };
        assert_eq!(far.card_url, "http://127.0.0.1:1/card");
        assert_eq!(far.headers["Authorization"], "Bearer ${T}");
    }
    let err = Settings::from_overrides("[providers.far]\nbackend = \"a2a\"\n")
        .err()
        .map(|e| e.to_string());
    assert!(
        err.unwrap_or_default().contains("providers.far.card_url"),
        "a card is required"
    );
}

/// A provider of `[model]`'s backend (named or not) inherits its keys but the limits of
/// `NOT_INHERITED`; one of another backend inherits none.
#[test]
fn providers_inherit_the_model_section_of_their_own_backend_only() {
    let s = Settings::from_overrides(
        "[model]\nkind = \"process\"\ncommand = [\"cat\"]\ntimeout_ms = 999\n\
         max_concurrent = 3\ncontext_tokens = 8000\n\
         [providers.same]\nmax_concurrent = 2\n\
         [providers.named]\nbackend = \"process\"\ngrace_ms = 5\n\
         [providers.other]\nbackend = \"openai\"\nmodel = \"gpt\"\n",
    )
    .map_err(|e| e.to_string());
    assert!(s.is_ok(), "{s:?}");
    let Ok(s) = s else { return };
    let Backend::Process(model) = &s.model.backend else {
        panic!("{:?}", s.model)
    };
    assert_eq!((model.command.len(), model.timeout_ms), (1, 999));
    for (name, grace) in [("same", 2_000), ("named", 5)] {
        let p = &s.providers[name];
        let Backend::Process(process) = &p.backend else {
            panic!("{name}: {p:?}")
        };
        assert_eq!(
            (
                process.command.clone(),
                process.timeout_ms,
                process.grace_ms
            ),
            (vec!["cat".to_string()], 999, grace),
            "{name}"
        );
        assert_eq!(p.limits.context_tokens, 8000, "{name}");
    }
    assert_eq!(s.providers["same"].limits.max_concurrent, 2);
    assert_eq!(
        s.providers["named"].limits.max_concurrent, 0,
        "not inherited"
    );
    let other = &s.providers["other"];
    assert_eq!(
        other.backend,
        Backend::OpenAi(ApiBackend {
            model: "gpt".into(),
            ..ApiBackend::default()
        })
    );
    assert_eq!(other.limits, ProviderLimits::default(), "nothing inherited");
    let err = Settings::from_overrides("[providers.bad]\nbackend = \"nope\"\n")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("providers.bad.backend `nope` is not one of scripted, openai"),
        "{err}"
    );
}

/// Each backend takes its own keys: another backend's is refused with the backend it
/// belongs to, an unknown one with the keys there are; `kind` and `backend` are one key.
#[test]
fn a_key_of_another_backend_is_refused_naming_its_backend() {
    for (toml, says) in [
        (
            "[model]\nbackend = \"openai\"\nscript = \"s.toml\"\n",
            "model.script is a setting of the scripted backend, not of openai",
        ),
        (
            "[model]\ntimeout_ms = 5\n",
            "model.timeout_ms is a setting of the openai, anthropic, process and a2a \
             backends, not of scripted",
        ),
        (
            "[providers.far]\nbackend = \"a2a\"\ncard_url = \"http://h/c\"\nstream = false\n",
            "providers.far.stream is a setting of the openai and anthropic backends, not of a2a",
        ),
        (
            "[model]\nbackend = \"openai\"\nbase_ur = \"x\"\n",
            "model.base_ur is not a setting of the openai backend (its own: api_key_env, \
             backoff_ms, base_url,",
        ),
        (
            "[providers.x]\nbackend = \"openai\"\nkind = \"openai\"\n",
            "providers.x.backend and providers.x.kind are one setting",
        ),
    ] {
        let err = Settings::from_overrides(toml)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains(says), "{toml}: {err}");
    }
}

/// The environment's values are strings `config` parses: one that looks like a number
/// still reads as the string a string key needs, and a backend's numbers as numbers.
#[test]
fn environment_values_read_as_their_keys_types() {
    let mut raw = Map::new();
    let mut model = Map::new();
    model.insert("backend".to_string(), Value::new(None, "openai"));
    model.insert("model".to_string(), Value::new(None, 4_i64));
    model.insert("timeout_ms".to_string(), Value::new(None, 7_i64));
    raw.insert(
        "model".to_string(),
        Value::new(None, ValueKind::Table(model)),
    );
    assert_eq!(model::prepare(&mut raw), Ok(()));
    let m = raw
        .remove("model")
        .map(ModelSettings::deserialize)
        .map(|m| m.map_err(|e| e.to_string()));
    let Some(Ok(ModelSettings {
        backend: Backend::OpenAi(api),
        ..
    })) = m
    else {
        panic!("{m:?}")
    };
    assert_eq!((api.model.as_str(), api.timeout_ms), ("4", 7));
}

/// `Backend::every` lists each variant once (the compiler sees that it lists them all),
/// under the name its tag gives it.
#[test]
fn every_backend_is_listed_once_under_its_tag() {
    let every = Backend::every();
    let mut names: Vec<&str> = every.iter().map(Backend::name).collect();
    assert_eq!(names[..2], ["scripted", "openai"], "the default first");
    names.sort();
    names.dedup();
    assert_eq!(names.len(), every.len(), "{names:?}");
    for b in &every {
        let tagged = serde_json::to_value(b).map(|v| v["backend"].clone());
        assert_eq!(tagged.ok(), Some(serde_json::json!(b.name())));
    }
    let model = Settings::from_overrides("")
        .map(|s| s.model)
        .map_err(|e| e.to_string());
    assert_eq!(
        model,
        Ok(ModelSettings::default()),
        "deploy/default.toml's [model]"
    );
}

/// `store.kind` chooses the store; unset, `redis.url` does; a kind the URL contradicts
/// stops start-up, saying that the URL no longer overrides it.
#[test]
fn the_store_is_its_kind_and_redis_url_no_longer_overrides_it() {
    let url = "[redis]\nurl = \"redis://127.0.0.1:1/\"\n";
    for (toml, kind) in [
        ("", StoreKind::Embedded),
        ("[store]\nkind = \"memory\"\n", StoreKind::Memory),
        (url, StoreKind::Redis),
        (
            &format!("[store]\nkind = \"redis\"\n{url}"),
            StoreKind::Redis,
        ),
    ] {
        let s = Settings::from_overrides(toml).map_err(|e| e.to_string());
        assert_eq!(s.map(|s| s.store().kind()), Ok(kind), "{toml}");
    }
    for (toml, says) in [
        (
            format!("[store]\nkind = \"memory\"\n{url}"),
            "store.kind is memory but redis.url is set: redis.url no longer overrides",
        ),
        (
            format!("[store]\nkind = \"embedded\"\n{url}"),
            "store.kind is embedded but redis.url is set",
        ),
        (
            "[store]\nkind = \"redis\"\n".to_string(),
            "store.kind is redis: set redis.url",
        ),
        (
            "[store]\nkind = \"postgres\"\n".to_string(),
            "unknown variant `postgres`, expected one of `embedded`, `memory`, `redis` for key \
             `store.kind`",
        ),
    ] {
        let err = Settings::from_overrides(&toml)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains(says), "{toml}: {err}");
    }
}

#[test]
fn configured_tools_load_and_are_checked() {
    let s = Settings::from_overrides(
        r#"
[tools.lookup_order]
kind = "service"
description = "Look an order up by id."
parameters = { type = "object", properties = { order_id = { type = "string" } }, required = ["order_id"] }
timeout_ms = 600000
approval = "never"

[tools.notify]
kind = "http"
url = "http://127.0.0.1:9100/notify"
secret_env = "NOTIFY_SECRET"
approval = "always"
"#,
    )
    .map_err(|e| e.to_string());
    assert!(s.is_ok(), "{s:?}");
    if let Ok(s) = s {
        let order = &s.tools["lookup_order"];
        assert_eq!(
            order.parameters["required"],
            serde_json::json!(["order_id"])
        );
        assert_eq!(order.timeout_ms, 600_000);
        assert_eq!(s.tools["notify"].approval, agentd_actors::Approval::Always);
        assert_eq!(s.tools["notify"].timeout_ms, 60_000);
    }
    for (bad, says) in [
        ("[tools.mcp__x]\nkind = \"service\"\n", "mcp__"),
        ("[tools.current_time]\nkind = \"service\"\n", "built-in"),
        ("[tools.hook]\nkind = \"http\"\n", "url"),
        (
            "[tools.svc]\nkind = \"service\"\nurl = \"http://x\"\n",
            "kind = \"http\"",
        ),
        ("[tools.svc]\nkind = \"grpc\"\n", "grpc"),
        ("[tools.svc]\nkind = \"builtin\"\n", "agentd's own"),
    ] {
        let e = Settings::from_overrides(bad).err().map(|e| e.to_string());
        assert!(
            e.as_deref().is_some_and(|e| e.contains(says)),
            "{bad}: {e:?}"
        );
    }
}

#[test]
fn the_claude_code_protocol_needs_no_command_and_others_are_refused() {
    let s = Settings::from_overrides(
        "[providers.claude]\nbackend = \"process\"\nprotocol = \"claude-code\"\n",
    )
    .map_err(|e| e.to_string());
    assert!(s.is_ok(), "{s:?}");
    if let Ok(s) = s {
        let Backend::Process(claude) = &s.providers["claude"].backend else {
            panic!("{:?}", s.providers["claude"])
        };
        assert_eq!(claude.protocol, ProcessProtocol::ClaudeCode);
        assert_eq!(ProcessBackend::default().protocol, ProcessProtocol::Jsonl);
    }
    let err = Settings::from_overrides("[model]\nbackend = \"process\"\n")
        .err()
        .map(|e| e.to_string());
    assert!(err.unwrap_or_default().contains("set model.command"));
    let err = Settings::from_overrides(
        "[model]\nbackend = \"process\"\ncommand = [\"x\"]\nprotocol = \"acp\"\n",
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(
        err.contains(
            "model: unknown variant `acp`, expected `jsonl` or `claude-code` for key `protocol`"
        ),
        "{err}"
    );
}

#[test]
fn mcp_servers_keep_their_key_case_and_bad_names_are_refused() {
    let s = Settings::from_overrides(
        "[mcp.servers.files]\ncommand = [\"srv\"]\nenv = { GITHUB_TOKEN = \"${T}\" }\n\
         approval = [\"write_file\"]\n[mcp.servers.search]\nurl = \"http://127.0.0.1:9/mcp\"\n\
         headers = { Authorization = \"Bearer ${T}\" }\ntimeout_ms = 5\n",
    )
    .map_err(|e| e.to_string());
    assert!(s.is_ok(), "{s:?}");
    if let Ok(s) = s {
        let files = &s.mcp.servers["files"];
        assert!(files.env.contains_key("GITHUB_TOKEN"), "{:?}", files.env);
        assert!(
            s.mcp.servers["search"]
                .headers
                .contains_key("Authorization")
        );
        let servers = s.mcp.resolve(&|v| (v == "T").then(|| "tok".to_string()));
        assert_eq!(servers.map(|s| s.len()).ok(), Some(2));
        let unset = s.mcp.resolve(&|_| None).err().map(|e| e.to_string());
        assert!(unset.unwrap_or_default().contains("${T}, which is not set"));
        let shown = toml::to_string(&s.mcp.masked()).unwrap_or_default();
        assert!(!shown.contains("Bearer"), "{shown}");
    }
    for bad in ["Files", "a__b", "-x"] {
        let err =
            Settings::from_overrides(&format!("[mcp.servers.\"{bad}\"]\ncommand = [\"srv\"]\n"))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
        assert!(err.contains("a server name must match"), "{bad}: {err}");
    }
    let err = Settings::from_overrides("[mcp.servers.x]\ncommand = [\"a\"]\nurl = \"http://h\"\n")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("either command"), "{err}");
}

#[test]
fn unknown_keys_are_refused() {
    let err = Settings::from_overrides("[limits]\nmax_deptth = 2\n")
        .err()
        .map(|e| e.to_string());
    assert!(err.unwrap_or_default().contains("max_deptth"));
}

#[test]
fn the_mcp_server_is_off_by_default_and_takes_types_and_hosts() {
    let s = Settings::from_overrides("").map_err(|e| e.to_string());
    assert!(
        matches!(&s, Ok(s) if s.mcp_server.expose.is_empty() && s.mcp_server.allowed_hosts.is_empty()),
        "{s:?}"
    );
    let s = Settings::from_overrides(
        "[mcp_server]\nexpose = [\" research \", \"lead\", \"\"]\nallowed_hosts = [\"agents.example.com\"]\n",
    )
    .map_err(|e| e.to_string());
    assert!(
        matches!(&s, Ok(s) if s.mcp_server.expose == ["research", "lead"]
            && s.mcp_server.allowed_hosts == ["agents.example.com"]),
        "{s:?}"
    );
    // A typo is an error, never a silent default.
    let e = Settings::from_overrides("[mcp_server]\nexpse = [\"research\"]\n")
        .map(|_| ())
        .map_err(|e| e.to_string());
    assert!(matches!(&e, Err(m) if m.contains("expse")), "{e:?}");
}
