//! The fuzz targets' harness (see tests/fleet/fuzz/mod.rs): a seeded proptest runner whose case count,
//! seed and per-case time limit come from the environment, panics caught with their
//! location, bounded work (a case runs in a worker thread that must answer in time), and a
//! scratch directory for the files `plan` and `check-config` read.

pub mod mutate;
pub mod scenarios;

use std::any::Any;
use std::cell::RefCell;
use std::fmt::Debug;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Once, mpsc};
use std::time::{Duration, Instant};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};

/// The seed every target starts from unless `FLEETSCALER_FUZZ_SEED` says otherwise: the
/// default run is the same run every time, on every machine.
const DEFAULT_SEED: u64 = 12;

/// Cases per target: `FLEETSCALER_FUZZ_CASES`, else the target's own default (sized so that
/// the whole file runs in a few seconds in a debug build).
pub fn cases(default: u32) -> u32 {
    env_number("FLEETSCALER_FUZZ_CASES").map_or(default, |n| n.clamp(1, u64::from(u32::MAX)) as u32)
}

pub fn seed() -> u64 {
    env_number("FLEETSCALER_FUZZ_SEED").unwrap_or(DEFAULT_SEED)
}

/// How long one case may take before it counts as unbounded work. A scenario's pass takes
/// tens of milliseconds in a debug build: the default leaves a slow shared CI machine two
/// orders of magnitude of room, and still catches a loop or an explosion.
pub fn case_time_limit() -> Duration {
    Duration::from_secs(env_number("FLEETSCALER_FUZZ_TIMEOUT_SECS").unwrap_or(20))
}

fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    match text.trim().parse() {
        Ok(n) => Some(n),
        Err(_) => panic!("{name}={text:?} is not a number"),
    }
}

/// Runs one target: `cases` inputs drawn from `strategy` with a fixed seed, each checked by
/// `check` (an `Err` is the reason the case fails). A failure is shrunk to a minimal input
/// and reported with the seed and the command that runs it again.
pub fn run<S>(
    name: &str,
    default_cases: u32,
    strategy: S,
    check: impl Fn(S::Value) -> Result<(), String>,
) where
    S: Strategy,
    S::Value: Debug,
{
    install_panic_hook();
    let (seed, cases) = (seed(), cases(default_cases));
    let config = Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        // Regressions are kept as named #[test]s beside the targets, not as files in the tree.
        failure_persistence: None,
        // A case that hits the time limit costs that limit at each shrinking step.
        max_shrink_iters: 512,
        max_shrink_time: 120_000,
        ..Config::default()
    };
    let started = Instant::now();
    let result =
        TestRunner::new(config).run(&strategy, |input| check(input).map_err(TestCaseError::fail));
    match result {
        Ok(()) => eprintln!(
            "fuzz target {name}: {cases} cases, seed {seed}, {:.1?}",
            started.elapsed()
        ),
        Err(TestError::Fail(why, input)) => panic!(
            "fuzz target {name} failed (seed {seed}, {cases} cases; again with \
             FLEETSCALER_FUZZ_SEED={seed} FLEETSCALER_FUZZ_CASES={cases} cargo test --test fuzz {name})\n\
             minimal input: {input:?}\nwhy: {why}"
        ),
        Err(TestError::Abort(why)) => panic!("fuzz target {name} aborted (seed {seed}): {why}"),
    }
}

thread_local! {
    /// The last panic on this thread, with its location: what a report of the bug needs.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Records each panic's message and location for [`caught`], then lets the usual hook print.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(info.to_string()));
            previous(info);
        }));
    });
}

/// Runs `f` on this thread; a panic becomes an `Err` naming where it happened.
pub fn caught<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    install_panic_hook();
    panic::catch_unwind(AssertUnwindSafe(f)).map_err(|payload| describe_panic(payload.as_ref()))
}

fn describe_panic(payload: &(dyn Any + Send)) -> String {
    let recorded = LAST_PANIC.with(|p| p.borrow_mut().take());
    recorded.unwrap_or_else(|| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        format!("panicked: {message}")
    })
}

/// Runs `f` in a worker thread that must finish within [`case_time_limit`]: a panic or an
/// overrun is an `Err` (an overrunning worker is left behind; the target fails anyway).
pub fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    bounded_for(case_time_limit(), f)
}

pub fn bounded_for<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("fuzz-case".into())
        .spawn(move || {
            let _ = tx.send(caught(f));
        });
    if let Err(e) = spawned {
        return Err(format!("cannot start a worker thread: {e}"));
    }
    match rx.recv_timeout(limit) {
        Ok(result) => result,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(format!(
            "did not finish within {limit:?} (FLEETSCALER_FUZZ_TIMEOUT_SECS): unbounded work"
        )),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err("the worker thread died".into()),
    }
}

/// A directory of its own for one target's files, removed when dropped.
pub struct Scratch {
    dir: PathBuf,
    next: AtomicU64,
}

impl Scratch {
    pub fn new(tag: &str) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("fleetscaler-fuzz-{tag}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch {
            dir,
            next: AtomicU64::new(0),
        }
    }

    /// Writes `contents` to a new file named after `name`; cases never share a file.
    pub fn file(&self, name: &str, contents: &[u8]) -> PathBuf {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!("{n}-{name}"));
        std::fs::write(&path, contents).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The repository's own file at `relative` (the scenario dumps, fleet.toml.example).
pub fn repo_file(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The first `max` characters of `text`, for failure messages about long inputs.
pub fn excerpt(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}... ({} bytes in all)", &text[..at], text.len()),
        None => text.to_string(),
    }
}

/// How many of a target's cases got past the parser to the code behind it: a target whose
/// inputs all bounce off the parser would pass while testing nothing, so each structure-aware
/// target requires a share of them to get through.
#[derive(Default)]
pub struct Reach {
    cases: AtomicU64,
    through: AtomicU64,
}

impl Reach {
    pub fn count(&self, got_through: bool) {
        self.cases.fetch_add(1, Ordering::Relaxed);
        self.through
            .fetch_add(u64::from(got_through), Ordering::Relaxed);
    }

    /// Fails unless at least `percent` of the cases got through (when there were enough
    /// cases to tell: `FLEETSCALER_FUZZ_CASES=1` runs one).
    pub fn require(&self, target: &str, percent: u64) {
        let (cases, through) = (
            self.cases.load(Ordering::Relaxed),
            self.through.load(Ordering::Relaxed),
        );
        eprintln!("fuzz target {target}: {through} of {cases} cases got past the parser");
        assert!(
            cases < 20 || through * 100 >= cases * percent,
            "fuzz target {target}: only {through} of {cases} cases got past the parser (want {percent}%): \
             its inputs no longer reach the code behind it"
        );
    }
}
