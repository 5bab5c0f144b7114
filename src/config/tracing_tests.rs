use std::collections::HashMap;

use super::*;

fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| map.get(k).cloned()
}

fn on(cfg: &TracingConfig, vars: &[(&str, &str)]) -> Tracing {
    match resolve(cfg, &env(vars)) {
        Ok(TracingState::On(t)) => t,
        other => panic!("expected traces on, got {other:?}"),
    }
}

fn off(cfg: &TracingConfig, vars: &[(&str, &str)]) -> String {
    match resolve(cfg, &env(vars)) {
        Ok(TracingState::Off { why }) => why,
        other => panic!("expected traces off, got {other:?}"),
    }
}

fn issues(cfg: &TracingConfig, vars: &[(&str, &str)]) -> Vec<String> {
    match resolve(cfg, &env(vars)) {
        Err(issues) => issues
            .into_iter()
            .map(|i| format!("{}: {}", i.key, i.message))
            .collect(),
        other => panic!("expected problems, got {other:?}"),
    }
}

#[test]
fn off_without_an_endpoint_and_on_with_one_from_either_side() {
    let none = TracingConfig::default();
    assert!(off(&none, &[]).starts_with("no endpoint"));
    let t = on(
        &none,
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")],
    );
    assert_eq!(t.endpoint, "http://collector:4318/v1/traces");
    assert_eq!(t.protocol, Protocol::HttpProtobuf);
    assert_eq!(t.timeout, Duration::from_secs(10));
    assert_eq!(t.service_name, "fleetscaler");
    assert_eq!(t.sampler.to_string(), "parentbased_always_on");
    let file = TracingConfig {
        endpoint: Some("http://collector:4318/".into()),
        ..TracingConfig::default()
    };
    assert_eq!(on(&file, &[]).endpoint, "http://collector:4318/v1/traces");
}

#[test]
fn fleet_toml_keys_win_over_the_variables_which_fill_the_rest() {
    let cfg = TracingConfig {
        endpoint: Some("http://from-file:4317".into()),
        protocol: Some(Protocol::Grpc),
        headers: BTreeMap::from([("x-tenant".to_string(), "file".to_string())]),
        ..TracingConfig::default()
    };
    let t = on(
        &cfg,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://from-env:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "x-tenant=env,api-key=s%3Dcret",
            ),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ("OTEL_TRACES_SAMPLER", "traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
        ],
    );
    // gRPC endpoints are used as given.
    assert_eq!(t.endpoint, "http://from-file:4317");
    assert_eq!(t.protocol, Protocol::Grpc);
    assert_eq!(
        t.headers,
        vec![
            ("api-key".to_string(), "s=cret".to_string()),
            ("x-tenant".to_string(), "file".to_string())
        ]
    );
    assert_eq!(t.timeout, Duration::from_millis(2500));
    assert_eq!(
        t.sampler,
        SamplerChoice {
            parent_based: false,
            ratio: 0.25
        }
    );
    assert!(!t.describe().contains("s=cret"), "{}", t.describe());
}

#[test]
fn signal_specific_variables_win_over_generic_ones() {
    let t = on(
        &TracingConfig::default(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://generic:4318"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://traces:9999/custom",
            ),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "a=1"),
            ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "b=2"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "1000"),
            ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "3000"),
        ],
    );
    // The signal-specific endpoint is the full URL: nothing is appended.
    assert_eq!(t.endpoint, "http://traces:9999/custom");
    assert_eq!(t.protocol, Protocol::HttpProtobuf);
    assert_eq!(t.headers, vec![("b".to_string(), "2".to_string())]);
    assert_eq!(t.timeout, Duration::from_secs(3));
}

#[test]
fn enabled_and_the_disabling_variables() {
    let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318");
    let unset = TracingConfig::default();
    assert_eq!(
        off(&unset, &[endpoint, ("OTEL_SDK_DISABLED", "TRUE")]),
        "OTEL_SDK_DISABLED=true"
    );
    assert_eq!(
        off(&unset, &[endpoint, ("OTEL_TRACES_EXPORTER", "none")]),
        "OTEL_TRACES_EXPORTER=none"
    );
    let disabled = TracingConfig {
        enabled: Some(false),
        ..TracingConfig::default()
    };
    assert_eq!(off(&disabled, &[endpoint]), "hub.tracing.enabled = false");
    // An explicit `enabled = true` wins, and without an endpoint goes to localhost.
    let enabled = TracingConfig {
        enabled: Some(true),
        protocol: Some(Protocol::Grpc),
        ..TracingConfig::default()
    };
    let t = on(&enabled, &[("OTEL_SDK_DISABLED", "true")]);
    assert_eq!(t.endpoint, "http://localhost:4317");
}

#[test]
fn with_traces_off_only_fleet_toml_and_the_switches_are_checked() {
    let bad_protocol = ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json");
    assert!(off(&TracingConfig::default(), &[bad_protocol]).starts_with("no endpoint"));
    let disabled = TracingConfig {
        enabled: Some(false),
        ..TracingConfig::default()
    };
    let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "not a url");
    assert_eq!(
        off(&disabled, &[endpoint, bad_protocol]),
        "hub.tracing.enabled = false"
    );
    let bad_ratio = TracingConfig {
        sampler_ratio: Some(-1.0),
        ..disabled
    };
    assert_eq!(
        issues(&bad_ratio, &[("OTEL_SDK_DISABLED", "yes")]),
        [
            "OTEL_SDK_DISABLED: \"yes\" is neither true nor false",
            "hub.tracing.sampler_ratio: -1 is not within 0 and 1"
        ]
    );
}

#[test]
fn service_name_and_resource_attributes() {
    let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318");
    let attrs = (
        "OTEL_RESOURCE_ATTRIBUTES",
        "service.name=from-attrs, deployment.environment.name=prod,team=a%20b",
    );
    let t = on(&TracingConfig::default(), &[endpoint, attrs]);
    assert_eq!(t.service_name, "from-attrs");
    assert_eq!(
        t.resource,
        vec![
            (
                "deployment.environment.name".to_string(),
                "prod".to_string()
            ),
            ("team".to_string(), "a b".to_string())
        ]
    );
    let named = on(
        &TracingConfig::default(),
        &[endpoint, attrs, ("OTEL_SERVICE_NAME", "hub-a")],
    );
    assert_eq!(named.service_name, "hub-a");
}

#[test]
fn every_problem_is_named_by_its_key_or_variable() {
    let cfg = TracingConfig {
        endpoint: Some("collector:4317".into()),
        sampler_ratio: Some(1.5),
        timeout: Some(Duration::ZERO),
        headers: BTreeMap::from([("bad header".to_string(), "v".to_string())]),
        ..TracingConfig::default()
    };
    let found = issues(
        &cfg,
        &[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_SDK_DISABLED", "maybe"),
            ("OTEL_RESOURCE_ATTRIBUTES", "novalue"),
        ],
    );
    let keys: Vec<&str> = found
        .iter()
        .map(|i| i.split(':').next().unwrap_or_default())
        .collect();
    assert_eq!(
        keys,
        [
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "hub.tracing.endpoint",
            "OTEL_SDK_DISABLED",
            "hub.tracing.headers",
            "hub.tracing.timeout",
            "hub.tracing.sampler_ratio",
            "OTEL_RESOURCE_ATTRIBUTES",
        ],
        "{found:#?}"
    );
    assert!(
        found[0].contains("\"http/json\" is not supported"),
        "{found:?}"
    );
    let sampler = issues(
        &TracingConfig::default(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "2"),
        ],
    );
    assert_eq!(
        sampler,
        ["OTEL_TRACES_SAMPLER_ARG: \"2\" is not a ratio within 0 and 1"]
    );
}

#[test]
fn fleet_toml_parses_the_table_with_its_key_paths() {
    let text = r#"
[hub.tracing]
endpoint = "http://collector:4317"
protocol = "grpc"
timeout = "3s"
sampler_ratio = 0.5
headers = { authorization = "Bearer x" }
"#;
    let cfg = crate::config::FleetConfig::parse(text, "t.toml").expect("valid");
    let t = &cfg.hub.tracing;
    assert_eq!(t.protocol, Some(Protocol::Grpc));
    assert_eq!(t.timeout, Some(Duration::from_secs(3)));
    // Header values never reach a printout of the configuration.
    let json = serde_json::to_string(&cfg.hub).expect("serializes");
    assert!(!json.contains("Bearer"), "{json}");
    let bad =
        crate::config::FleetConfig::parse("[hub.tracing]\nprotocol = \"http/json\"\n", "t.toml")
            .expect_err("unknown protocol");
    assert_eq!(bad.issues[0].key, "hub.tracing.protocol", "{bad}");
}

#[test]
fn the_example_documents_every_tracing_key() {
    let example = include_str!("../../fleet.toml.example");
    let section = example
        .split("[hub.tracing]")
        .nth(1)
        .expect("fleet.toml.example has a [hub.tracing] table");
    let section = section.split("\n[").next().unwrap_or_default();
    let keys = serde_json::to_value(TracingConfig::default()).expect("serializes");
    let keys = keys.as_object().expect("a table");
    let missing: Vec<&String> = keys
        .keys()
        .filter(|k| !section.contains(&format!("{k} =")))
        .collect();
    assert!(
        missing.is_empty(),
        "[hub.tracing] keys not in fleet.toml.example: {missing:?}"
    );
}

fn metrics_on(cfg: &TracingConfig, vars: &[(&str, &str)]) -> MetricsExport {
    match resolve_metrics(cfg, &env(vars)) {
        Ok(MetricsState::On(m)) => m,
        other => panic!("expected metrics on, got {other:?}"),
    }
}

fn metrics_off(cfg: &TracingConfig, vars: &[(&str, &str)]) -> String {
    match resolve_metrics(cfg, &env(vars)) {
        Ok(MetricsState::Off { why }) => why,
        other => panic!("expected metrics off, got {other:?}"),
    }
}

fn metrics_issues(cfg: &TracingConfig, vars: &[(&str, &str)]) -> Vec<String> {
    match resolve_metrics(cfg, &env(vars)) {
        Err(issues) => issues
            .into_iter()
            .map(|i| format!("{}: {}", i.key, i.message))
            .collect(),
        other => panic!("expected problems, got {other:?}"),
    }
}

#[test]
fn metrics_are_off_unless_asked_for_even_with_traces_on() {
    let traced = TracingConfig {
        endpoint: Some("http://collector:4318".into()),
        ..TracingConfig::default()
    };
    assert!(matches!(
        resolve(&traced, &env(&[])),
        Ok(TracingState::On(_))
    ));
    assert!(metrics_off(&traced, &[]).starts_with("not asked for"));
    let refused = TracingConfig {
        metrics: Some(false),
        ..traced.clone()
    };
    let otlp = ("OTEL_METRICS_EXPORTER", "otlp");
    assert_eq!(
        metrics_off(&refused, &[otlp]),
        "hub.tracing.metrics = false"
    );
    assert_eq!(
        metrics_off(&traced, &[("OTEL_METRICS_EXPORTER", "none")]),
        "OTEL_METRICS_EXPORTER=none"
    );
    assert_eq!(
        metrics_off(&traced, &[otlp, ("OTEL_SDK_DISABLED", "true")]),
        "OTEL_SDK_DISABLED=true"
    );
}

#[test]
fn metrics_go_where_the_traces_go_with_their_own_path() {
    let base = TracingConfig {
        endpoint: Some("http://collector:4318".into()),
        metrics: Some(true),
        ..TracingConfig::default()
    };
    let m = metrics_on(&base, &[]);
    assert_eq!(m.endpoint, "http://collector:4318/v1/metrics");
    assert_eq!(m.protocol, Protocol::HttpProtobuf);
    assert_eq!(m.interval, Duration::from_secs(60));
    assert_eq!(m.timeout, Duration::from_secs(10));
    let traces_url = TracingConfig {
        endpoint: Some("https://gateway/otlp/v1/traces".into()),
        ..base.clone()
    };
    assert_eq!(
        metrics_on(&traces_url, &[]).endpoint,
        "https://gateway/otlp/v1/metrics"
    );
    let grpc = TracingConfig {
        endpoint: Some("http://collector:4317".into()),
        protocol: Some(Protocol::Grpc),
        ..base.clone()
    };
    assert_eq!(metrics_on(&grpc, &[]).endpoint, "http://collector:4317");
    // Traces off, metrics on: each has its own switch.
    let metrics_only = TracingConfig {
        enabled: Some(false),
        ..base
    };
    assert!(matches!(
        resolve(&metrics_only, &env(&[])),
        Ok(TracingState::Off { .. })
    ));
    assert_eq!(
        metrics_on(&metrics_only, &[]).endpoint,
        "http://collector:4318/v1/metrics"
    );
}

#[test]
fn a_traces_path_of_the_collectors_own_needs_a_metrics_endpoint() {
    let custom = TracingConfig {
        endpoint: Some("http://collector:4318/api/spans".into()),
        metrics: Some(true),
        ..TracingConfig::default()
    };
    let found = metrics_issues(&custom, &[]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("hub.tracing.endpoint: ")
            && found[0].contains("set hub.tracing.metrics_endpoint"),
        "{found:?}"
    );
    // Not a problem while metrics are off.
    let off = TracingConfig {
        metrics: None,
        ..custom.clone()
    };
    assert!(metrics_off(&off, &[]).starts_with("not asked for"));
    let with_metrics_endpoint = TracingConfig {
        metrics_endpoint: Some("http://collector:4318/".into()),
        ..custom
    };
    assert_eq!(
        metrics_on(&with_metrics_endpoint, &[]).endpoint,
        "http://collector:4318/v1/metrics"
    );
}

#[test]
fn metrics_variables_win_over_generic_ones_and_fleet_toml_over_both() {
    let vars = [
        ("OTEL_METRICS_EXPORTER", "otlp"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://generic:4318"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/protobuf"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "a=1"),
        ("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "b=2"),
        ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "c=3"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "1000"),
        ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "3000"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "15000"),
        ("OTEL_SERVICE_NAME", "hub-a"),
    ];
    let m = metrics_on(&TracingConfig::default(), &vars);
    assert_eq!(m.endpoint, "http://generic:4318/v1/metrics");
    assert_eq!(m.protocol, Protocol::HttpProtobuf);
    assert_eq!(m.headers, vec![("b".to_string(), "2".to_string())]);
    assert_eq!(m.timeout, Duration::from_secs(3));
    assert_eq!(m.interval, Duration::from_secs(15));
    assert_eq!(m.service_name, "hub-a");
    let specific = [
        ("OTEL_METRICS_EXPORTER", "otlp"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://generic:4318"),
        (
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            "http://metrics:9999/custom",
        ),
    ];
    // The signal-specific endpoint is the full URL: nothing is appended.
    let m = metrics_on(&TracingConfig::default(), &specific);
    assert_eq!(m.endpoint, "http://metrics:9999/custom");
    let file = TracingConfig {
        endpoint: Some("http://file:4318".into()),
        metrics_interval: Some(Duration::from_secs(5)),
        timeout: Some(Duration::from_secs(2)),
        ..TracingConfig::default()
    };
    let m = metrics_on(&file, &specific);
    assert_eq!(m.endpoint, "http://file:4318/v1/metrics");
    assert_eq!(m.interval, Duration::from_secs(5));
    assert_eq!(m.timeout, Duration::from_secs(2));
    assert_eq!(
        m.describe(),
        "http/protobuf to http://file:4318/v1/metrics every 5s, timeout 2s, service.name fleetscaler"
    );
}

#[test]
fn bad_metrics_settings_are_named_by_their_key_or_variable() {
    let cfg = TracingConfig {
        metrics: Some(true),
        metrics_endpoint: Some("collector:4318".into()),
        metrics_interval: Some(Duration::ZERO),
        ..TracingConfig::default()
    };
    assert_eq!(
        metrics_issues(&cfg, &[]),
        [
            "hub.tracing.metrics_endpoint: \"collector:4318\" must be an http:// or https:// URL with a host",
            "hub.tracing.metrics_interval: must be longer than 0s",
        ]
    );
    let vars = [
        ("OTEL_METRICS_EXPORTER", "prometheus"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "soon"),
    ];
    assert_eq!(
        metrics_issues(&TracingConfig::default(), &vars),
        ["OTEL_METRICS_EXPORTER: \"prometheus\" is not supported: only otlp (or none)"],
        "with metrics off, only the switch's problem counts"
    );
    let on = [
        ("OTEL_METRICS_EXPORTER", "otlp"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "soon"),
        ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "not a url"),
    ];
    let keys: Vec<String> = metrics_issues(&TracingConfig::default(), &on)
        .into_iter()
        .map(|i| i.split(':').next().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        keys,
        [
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            "OTEL_METRIC_EXPORT_INTERVAL"
        ]
    );
}

#[test]
fn fleet_toml_parses_the_metrics_keys_and_names_bad_ones() {
    let text = "[hub.tracing]\nmetrics = true\nmetrics_interval = \"30s\"\nmetrics_endpoint = \"http://c:4318\"\n";
    let cfg = crate::config::FleetConfig::parse(text, "t.toml").expect("valid");
    assert_eq!(cfg.hub.tracing.metrics, Some(true));
    assert_eq!(
        cfg.hub.tracing.metrics_interval,
        Some(Duration::from_secs(30))
    );
    for (bad, key) in [
        (
            "metrics_interval = \"often\"",
            "hub.tracing.metrics_interval",
        ),
        ("metrics = \"yes\"", "hub.tracing.metrics"),
        ("metrics_interval = \"0s\"", "hub.tracing.metrics_interval"),
    ] {
        let text = format!("[hub.tracing]\n{bad}\n");
        let err = crate::config::FleetConfig::parse(&text, "t.toml").expect_err(bad);
        assert_eq!(err.issues[0].key, key, "{bad}: {err}");
    }
}

#[test]
fn a_problem_traces_and_metrics_share_is_reported_once() {
    let cfg = TracingConfig {
        timeout: Some(Duration::ZERO),
        ..TracingConfig::default()
    };
    let mut found = Vec::new();
    cfg.validate(&mut found);
    let timeouts = found
        .iter()
        .filter(|i| i.key == "hub.tracing.timeout")
        .count();
    assert_eq!(timeouts, 1, "{found:?}");
}
