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
