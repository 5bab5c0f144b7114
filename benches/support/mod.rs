//! What the benchmarks share: sizes from the environment and the process's memory.

/// A size from the environment variable `name`, or `default`.
pub fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// This process's resident memory, in MiB (Linux).
pub fn rss_mib() -> f64 {
    status_mib("VmRSS:")
}

/// The most this process has had resident so far, in MiB (Linux).
#[allow(dead_code)]
pub fn peak_rss_mib() -> f64 {
    status_mib("VmHWM:")
}

fn status_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}
