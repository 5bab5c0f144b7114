//! What the benchmarks share: sizes from the environment and the process's memory.

/// A size from the environment variable `name`, or `default`.
pub fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// This process's resident memory, in MiB (Linux).
#[allow(dead_code)]
pub fn rss_mib() -> f64 {
    status_mib("VmRSS:")
}

/// CPU seconds (user and system) process `pid` has used so far (Linux; `None` for this
/// process).
#[allow(dead_code)]
pub fn cpu_seconds(pid: Option<u32>) -> f64 {
    let path = pid.map_or("/proc/self/stat".to_string(), |p| format!("/proc/{p}/stat"));
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // After the command's name (in parentheses, which may hold spaces): utime is the 12th
    // field, stime the 13th, in clock ticks (100 a second on Linux).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// The most this process has had resident so far, in MiB (Linux).
#[allow(dead_code)]
pub fn peak_rss_mib() -> f64 {
    status_mib("VmHWM:")
}

/// Resident memory of process `pid` now and at its peak, in MiB (Linux).
#[allow(dead_code)]
pub fn process_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    (field_mib(&status, "VmRSS:"), field_mib(&status, "VmHWM:"))
}

fn status_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    field_mib(&status, field)
}

fn field_mib(status: &str, field: &str) -> f64 {
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}
