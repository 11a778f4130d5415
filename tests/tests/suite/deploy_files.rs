//! The deploy files parse, and every `AGENTD__SECTION__KEY` they set names a real setting.

use std::path::Path;

fn deploy(p: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../deploy")
            .join(p),
    )
    .unwrap()
}

fn yaml_docs(text: &str) -> Vec<serde_yaml::Value> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(text)
        .map(|d| serde_yaml::Value::deserialize(d).unwrap())
        .collect()
}

fn env_keys(v: &serde_yaml::Value, out: &mut Vec<String>) {
    match v {
        serde_yaml::Value::Mapping(m) => {
            for (k, val) in m {
                if let Some(k) = k.as_str()
                    && k.starts_with("AGENTD__")
                {
                    out.push(k.to_string());
                }
                if let (Some("name"), Some(name)) = (k.as_str(), val.as_str())
                    && name.starts_with("AGENTD__")
                {
                    out.push(name.to_string());
                }
                env_keys(val, out);
            }
        }
        serde_yaml::Value::Sequence(s) => s.iter().for_each(|x| env_keys(x, out)),
        _ => {}
    }
}

fn assert_known(key: &str) {
    let defaults: toml::Value = toml::from_str(agentd::settings::DEFAULT_TOML).unwrap();
    let parts: Vec<String> = key
        .trim_start_matches("AGENTD__")
        .split("__")
        .map(str::to_lowercase)
        .collect();
    let mut v = &defaults;
    for p in &parts {
        v = v
            .get(p)
            .unwrap_or_else(|| panic!("{key} names no setting (deploy/default.toml)"));
    }
}

#[test]
fn compose_and_k8s_parse_and_name_known_settings() {
    let mut keys = Vec::new();
    for f in [
        "compose.yaml",
        "k8s/deployment.yaml",
        "k8s/configmap.yaml",
        "k8s/service.yaml",
    ] {
        let docs = yaml_docs(&deploy(f));
        assert!(!docs.is_empty(), "{f}");
        for d in &docs {
            env_keys(d, &mut keys);
        }
    }
    keys.sort();
    keys.dedup();
    assert!(keys.len() >= 8, "{keys:?}");
    for k in &keys {
        assert_known(k);
    }
    let compose = &yaml_docs(&deploy("compose.yaml"))[0];
    assert!(
        compose["services"]["agentd-1"].is_mapping()
            && compose["services"]["agentd-2"].is_mapping()
    );
    let cmd = compose["services"]["redis"]["command"]
        .as_sequence()
        .unwrap();
    assert!(cmd.iter().any(|c| c.as_str() == Some("--appendonly")));
}

#[test]
fn the_systemd_unit_and_dockerfile_name_real_things() {
    let unit = deploy("agentd.service");
    for line in [
        "ExecStart=/usr/local/bin/agentd",
        "NoNewPrivileges=true",
        "ProtectSystem=strict",
        "KillSignal=SIGTERM",
    ] {
        assert!(unit.contains(line), "{line}");
    }
    for line in unit
        .lines()
        .filter(|l| l.starts_with("Environment=AGENTD__"))
    {
        assert_known(
            line.trim_start_matches("Environment=")
                .split('=')
                .next()
                .unwrap(),
        );
    }
    let docker = deploy("Dockerfile");
    assert!(docker.contains("USER agentd") && docker.contains("cargo build --release -p agentd"));
    for line in docker.lines().filter(|l| l.starts_with("ENV AGENTD__")) {
        assert_known(line.trim_start_matches("ENV ").split('=').next().unwrap());
    }
    // Every variable the image names is a setting (not agentctl's AGENTD_TOKEN, which the
    // service never sets), and the health check asks the service without a token.
    for word in docker
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("AGENTD_"))
    {
        assert!(word.starts_with("AGENTD__"), "{word} is no setting");
        assert_known(word);
    }
    let health = docker
        .lines()
        .find(|l| l.starts_with("HEALTHCHECK"))
        .unwrap();
    assert!(
        health.ends_with(r#"CMD ["agentd", "healthcheck"]"#),
        "{health}"
    );
    // Stop timeouts leave room for server.shutdown_timeout_ms and the agents' stop.
    let defaults: toml::Value = toml::from_str(agentd::settings::DEFAULT_TOML).unwrap();
    let http_ms = defaults["server"]["shutdown_timeout_ms"]
        .as_integer()
        .unwrap();
    let stop_s: i64 = unit
        .lines()
        .find_map(|l| l.strip_prefix("TimeoutStopSec="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(stop_s * 1000 >= http_ms + 10_000, "TimeoutStopSec={stop_s}");
    let k8s = &yaml_docs(&deploy("k8s/deployment.yaml"))[0];
    let grace = k8s["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        .as_i64()
        .unwrap();
    assert!(grace * 1000 >= http_ms + 10_000, "grace {grace}");
}

#[test]
fn the_shipped_default_prices_are_the_seed_s_each() {
    // deploy/default.toml's `[pricing.default]`, which the service wires in.
    let settings = agentd::Settings::from_overrides("").unwrap();
    let p = settings.pricing.default;
    assert_eq!(p.input, 3.0, "input");
    assert_eq!(p.output, 15.0, "output");
    assert_eq!(p.cache_write, 3.75, "cache write");
    assert_eq!(p.cache_read, 0.30, "cache read");
}
