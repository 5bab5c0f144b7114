//! Every command the documentation shows that can run against the simulated fleet is run as
//! a user would copy it, with the docs' example names mapped onto the test's fleet
//! (`prod-east` is `sim-1`, `http://hub:8080` the hub under test): `fleetscaler` commands
//! (dump, plan, what-if, check-config, status, explain), the hub API behind `curl`, the
//! simulated fleet's admin endpoint and kubectl against its clusters. What cannot run here
//! (long-running commands, synopses with placeholders, commands for a real management
//! cluster) still has each of its flags checked against the binary's own `--help`.

use crate::docs_support::{DocCommand, doc_commands};
use crate::e2e_support::*;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use fleetscaler::engine::settings::SettingsPatch;
use fleetscaler::sim::admin;
use fleetscaler::sim::settings::Flavor;

const LONG: Duration = Duration::from_secs(60);

/// `fleetscaler` subcommands that run until stopped: only their flags are checked.
const LONG_RUNNING: [&str; 3] = ["run", "demo", "sim"];

/// The docs' example names, and what they are in this test.
fn substitutions(server: &str) -> Vec<(&'static str, String)> {
    vec![
        ("http://hub:8080", server.to_string()),
        ("https://localhost:8080", server.to_string()),
        ("shop/web-7d9c", "default/huge-0".to_string()),
        ("dump-$t.yaml", "dump.yaml".to_string()),
        ("$t", "00".to_string()),
        ("prod-east", "sim-1".to_string()),
    ]
}

/// What happened to each command, for the summary and the counts the test holds.
#[derive(Debug, Default)]
struct Tally {
    ran: BTreeMap<&'static str, Vec<String>>,
}

impl Tally {
    fn add(&mut self, what: &'static str, cmd: &DocCommand) {
        self.ran.entry(what).or_default().push(cmd.place());
    }

    fn count(&self, what: &str) -> usize {
        self.ran.get(what).map_or(0, Vec::len)
    }
}

struct Bed {
    dir: PathBuf,
    kubeconfig: PathBuf,
    hub: SocketAddr,
    admin: SocketAddr,
    server: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_of_the_docs_runs_against_the_simulated_fleet() {
    let fleet = quiet_fleet(2, Flavor::OpenShift).await;
    let dir = TempDir::new("docs-commands");
    let config = fleet_config(&fleet, dir.path(), SettingsPatch::default());
    write_user_files(dir.path(), &config.hub.kubeconfigs[0]);
    let hub = Hub::start(config).await;
    let (addr, stop_http) = serve_http(&hub).await;
    let (admin, serving) = admin::serve(fleet.clusters().to_vec(), 0).await.unwrap();
    // No node of any group has 100 CPUs: the pod the docs explain waits whatever happens.
    create_pods(&fleet.clusters()[0], "huge", 1, "100").await;
    pending_pod_explained(addr).await;
    let bed = Bed {
        dir: dir.path().to_path_buf(),
        kubeconfig: dir.path().join("fleet.kubeconfig"),
        hub: addr,
        admin,
        server: format!("http://{addr}"),
    };

    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut tally = Tally::default();
    for cmd in doc_commands(root) {
        let what = run_one(&bed, &cmd).await;
        tally.add(what, &cmd);
    }
    println!("{tally:#?}");
    // The docs show each of these; a parser that found none would pass vacuously.
    for (what, at_least) in [
        ("fleetscaler ran", 8),
        ("fleetscaler flags checked", 6),
        ("hub API", 4),
        ("sim admin", 5),
        ("kubectl on the sim", 1),
    ] {
        assert!(tally.count(what) >= at_least, "{what}: {tally:#?}");
    }
    stop_http.cancel();
    serving.abort();
    hub.stop().await;
}

/// fleet.toml as a user writes it for the two simulated clusters, and the ClusterAutoscaler
/// file `what-if --cluster-autoscaler` reads.
fn write_user_files(dir: &Path, kubeconfig: &Path) {
    let toml = format!(
        "[hub]\nkubeconfigs = [{:?}]\n[[clusters]]\nname = \"sim-1\"\n[[clusters]]\nname = \"sim-2\"\n",
        kubeconfig.display().to_string()
    );
    std::fs::write(dir.join("fleet.toml"), toml).unwrap();
    let ca = "apiVersion: autoscaling.openshift.io/v1\nkind: ClusterAutoscaler\n\
              metadata:\n  name: default\nspec:\n  resourceLimits:\n    maxNodesTotal: 20\n";
    std::fs::write(dir.join("ca.yaml"), ca).unwrap();
}

async fn pending_pod_explained(addr: SocketAddr) {
    eventually(LONG, "the hub explains default/huge-0", || async move {
        let (code, body) = http_request(
            addr,
            "GET",
            "/api/v1/clusters/sim-1/plan?pod=default/huge-0",
        )
        .await;
        (code == 200 && body.contains("InsufficientResources")).then_some(())
    })
    .await;
}

/// Runs or checks one command; returns what was done with it.
async fn run_one(bed: &Bed, cmd: &DocCommand) -> &'static str {
    let subs = substitutions(&bed.server);
    let words: Vec<String> = cmd.words.iter().map(|w| substitute(w, &subs)).collect();
    match cmd.program() {
        "fleetscaler" => fleetscaler(bed, cmd, &words[1..]),
        "cargo" => cargo(cmd, &words),
        "curl" => curl(bed, cmd, &words).await,
        "kubectl" => kubectl(bed, cmd, &words),
        other => panic!("{}: unexpected program {other}", cmd.place()),
    }
}

fn substitute(word: &str, subs: &[(&str, String)]) -> String {
    subs.iter()
        .fold(word.to_string(), |w, (from, to)| w.replace(from, to))
}

/// `cargo run --release -- ARGS`: the README's way to the binary. `cargo bench` runs for
/// minutes; `cargo test --benches` keeps a quick run of each bench.
fn cargo(cmd: &DocCommand, words: &[String]) -> &'static str {
    if words.get(1).is_some_and(|w| w == "bench") {
        return "a benchmark";
    }
    let args = words
        .iter()
        .position(|w| w == "--")
        .map(|i| &words[i + 1..])
        .unwrap_or_else(|| panic!("{}: not `cargo run ... -- ARGS`", cmd.place()));
    check_flags(cmd, args);
    "fleetscaler flags checked"
}

fn fleetscaler(bed: &Bed, cmd: &DocCommand, args: &[String]) -> &'static str {
    if !runnable(args) {
        check_flags(cmd, args);
        return "fleetscaler flags checked";
    }
    let out = Command::new(env!("CARGO_BIN_EXE_fleetscaler"))
        .args(args)
        .current_dir(&bed.dir)
        .env("KUBECONFIG", &bed.kubeconfig)
        .env_remove("FLEETSCALER_SERVER")
        .env_remove("FLEETSCALER_TOKEN")
        .output();
    let out = tokio::task::block_in_place(|| out).unwrap();
    assert_ran(cmd, &out);
    // `dump -o FILE` writes the file; every other command prints its answer.
    let wrote_file = args[0] == "dump" && args.iter().any(|a| a == "-o");
    assert!(
        wrote_file || !out.stdout.is_empty(),
        "{}: printed nothing",
        cmd.place()
    );
    "fleetscaler ran"
}

/// A concrete, short command: not a synopsis with placeholders, not a server.
fn runnable(args: &[String]) -> bool {
    let synopsis = args.iter().any(|a| {
        a.starts_with('[')
            || a.contains('<')
            || (a.len() > 2 && a.chars().all(|c| c.is_ascii_uppercase() || c == '/'))
    });
    !synopsis && !LONG_RUNNING.contains(&args.first().map_or("", String::as_str))
}

fn assert_ran(cmd: &DocCommand, out: &Output) {
    assert!(
        out.status.success(),
        "{} failed ({}): {}{}",
        cmd.place(),
        out.status,
        lossy_text(&out.stdout),
        lossy_text(&out.stderr)
    );
}

/// Each `--flag` (and `-f`) of the command is one its subcommand's `--help` lists.
fn check_flags(cmd: &DocCommand, args: &[String]) {
    let path: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .take_while(|a| {
            a.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !a.starts_with('-')
        })
        .take(2)
        .collect();
    let help = help_of(&path).unwrap_or_else(|| panic!("{}: no such subcommand", cmd.place()));
    for flag in args.iter().filter_map(|a| flag_of(a)) {
        let listed = if flag.starts_with("--") {
            help.contains(&format!("{flag} ")) || help.contains(&format!("{flag}\n"))
        } else {
            help.contains(&format!("{flag}, "))
        };
        assert!(
            listed,
            "{}: {flag} is not an option of it:\n{help}",
            cmd.place()
        );
    }
}

/// `[--output text|json]` → `--output`; `--listen=X` → `--listen`; words that are no flag: none.
fn flag_of(word: &str) -> Option<String> {
    let word = word.trim_start_matches('[').trim_end_matches(']');
    let flag = word.split('=').next()?;
    (flag.starts_with('-') && flag.len() > 1).then(|| flag.to_string())
}

/// The help of the longest subcommand path `fleetscaler` knows.
fn help_of(path: &[&str]) -> Option<String> {
    (1..=path.len()).rev().find_map(|n| {
        let out = Command::new(env!("CARGO_BIN_EXE_fleetscaler"))
            .args(&path[..n])
            .arg("--help")
            .output()
            .ok()?;
        out.status.success().then(|| lossy_text(&out.stdout))
    })
}

/// `curl` at the hub's API (any of the docs' hub addresses) or the simulated fleet's admin
/// endpoint; any other is for a real installation.
async fn curl(bed: &Bed, cmd: &DocCommand, words: &[String]) -> &'static str {
    let Some(url) = words[1..]
        .iter()
        .find(|w| w.contains("://") || w.starts_with("localhost:") || w.starts_with("127.0.0.1:"))
    else {
        panic!("{}: curl without a URL", cmd.place())
    };
    let address = url.split_once("://").map_or(url.as_str(), |(_, rest)| rest);
    let hub = bed.hub.to_string();
    let hubs = [hub.as_str(), "localhost:8080", "127.0.0.1:8080"];
    if let Some(rest) = hubs.iter().find_map(|h| address.strip_prefix(h)) {
        let (code, body) = http_request(bed.hub, "GET", rest).await;
        assert_eq!(code, 200, "{}: {body}", cmd.place());
        return "hub API";
    }
    if url.contains("<admin>") {
        let words: Vec<String> = words
            .iter()
            .map(|w| w.replace("<admin>", &bed.admin.port().to_string()))
            .collect();
        let out = Command::new("curl")
            .args(["-sS", "--fail-with-body"])
            .args(&words[1..])
            .output();
        let out = tokio::task::block_in_place(|| out)
            .unwrap_or_else(|e| panic!("cannot run curl ({e}): apt-get install curl"));
        assert_ran(cmd, &out);
        return "sim admin";
    }
    "for a real installation"
}

/// kubectl against a simulated cluster's context; the docs' other kubectl commands act on a
/// real management or managed cluster.
fn kubectl(bed: &Bed, cmd: &DocCommand, words: &[String]) -> &'static str {
    // Named as the docs name them, not as mapped onto the test's fleet.
    let on_sim = (cmd.words.windows(2)).any(|w| w[0] == "--context" && w[1].starts_with("sim-"));
    if !on_sim || cmd.words.iter().any(|w| w.contains('<')) {
        return "for a real installation";
    }
    let out = Command::new(crate::sim_kubectl::kubectl_bin())
        .args(&words[1..])
        .env("KUBECONFIG", &bed.kubeconfig)
        .output();
    let out = tokio::task::block_in_place(|| out).unwrap();
    assert_ran(cmd, &out);
    "kubectl on the sim"
}
