//! Every file the program is given is read through here, bounded: a wrong path (`/dev/zero`,
//! a FIFO, a 2 GB log) fails at once, naming the file and the limit, instead of filling
//! memory. Each kind of file has its own maximum (docs/hub.md lists them), large enough for
//! what it holds at the scale the hub is built for, and raised with its environment
//! variable.

use std::fmt;
use std::io::Read;
use std::path::Path;

const MIB: u64 = 1 << 20;

/// A kind of file and its largest accepted size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileKind {
    /// What the file is, as errors name it.
    pub what: &'static str,
    /// Bytes, unless the environment variable says otherwise.
    pub default_max: u64,
    /// The environment variable that sets another maximum, in bytes.
    pub env: &'static str,
}

/// A cluster dump for `plan` (`kubectl get -o yaml` of a 1,000-node, 30,000-pod cluster is
/// about 300 MB).
pub const DUMP: FileKind = FileKind {
    what: "cluster dump",
    default_max: 1024 * MIB,
    env: "FLEETSCALER_MAX_DUMP_BYTES",
};
/// fleet.toml (a thousand clusters with overrides stay under 1 MB).
pub const CONFIG: FileKind = FileKind {
    what: "fleet configuration",
    default_max: 16 * MIB,
    env: "FLEETSCALER_MAX_CONFIG_BYTES",
};
/// The engine's memory (`plan --state`).
pub const STATE: FileKind = FileKind {
    what: "state file",
    default_max: 64 * MIB,
    env: "FLEETSCALER_MAX_STATE_BYTES",
};
/// Small documents given on the command line: a fleet policy, a ClusterAutoscaler.
pub const DOCUMENT: FileKind = FileKind {
    what: "input file",
    default_max: 16 * MIB,
    env: "FLEETSCALER_MAX_DOCUMENT_BYTES",
};
/// A kubeconfig.
pub const KUBECONFIG: FileKind = FileKind {
    what: "kubeconfig",
    default_max: 16 * MIB,
    env: "FLEETSCALER_MAX_KUBECONFIG_BYTES",
};
/// A certificate or key (PEM).
pub const PEM: FileKind = FileKind {
    what: "certificate or key",
    default_max: MIB,
    env: "FLEETSCALER_MAX_PEM_BYTES",
};

impl FileKind {
    /// The maximum in force: the environment variable's when it holds a number of bytes.
    pub fn max(&self) -> u64 {
        std::env::var(self.env)
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(self.default_max)
    }
}

/// Why a file could not be read.
#[derive(Debug)]
pub enum FileError {
    /// Not there, not allowed, or failed midway.
    Io {
        path: String,
        source: std::io::Error,
    },
    /// A device, FIFO, socket or directory: not a file to read whole.
    NotAFile { path: String, kind: &'static str },
    /// Larger than the kind's maximum.
    TooLarge {
        path: String,
        kind: FileKind,
        max: u64,
    },
    /// Not UTF-8 text.
    NotText { path: String },
}

impl FileError {
    /// Whether the file does not exist (some files are optional).
    pub fn is_not_found(&self) -> bool {
        matches!(self, FileError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileError::Io { path, source } => write!(f, "cannot read {path}: {source}"),
            FileError::NotAFile { path, kind } => {
                write!(f, "{path} is a {kind}, not a regular file")
            }
            FileError::TooLarge { path, kind, max } => write!(
                f,
                "{path} is larger than the {max} bytes a {} may have (set {} to allow more)",
                kind.what, kind.env
            ),
            FileError::NotText { path } => write!(f, "{path} is not UTF-8 text"),
        }
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FileError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The bytes of `path`, a regular file of at most `kind`'s maximum.
pub fn read(path: &Path, kind: FileKind) -> Result<Vec<u8>, FileError> {
    let name = path.display().to_string();
    let io = |source| FileError::Io {
        path: name.clone(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if let Some(other) = not_regular(&meta) {
        return Err(FileError::NotAFile {
            path: name,
            kind: other,
        });
    }
    let max = kind.max();
    let too_large = || FileError::TooLarge {
        path: name.clone(),
        kind,
        max,
    };
    if meta.len() > max {
        return Err(too_large());
    }
    // The file may grow between the look and the read: never read past the maximum.
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > max {
        return Err(too_large());
    }
    Ok(bytes)
}

/// The text of `path`, as [`read`].
pub fn read_text(path: &Path, kind: FileKind) -> Result<String, FileError> {
    let bytes = read(path, kind)?;
    String::from_utf8(bytes).map_err(|_| FileError::NotText {
        path: path.display().to_string(),
    })
}

fn not_regular(meta: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("directory")
    } else if t.is_fifo() {
        Some("FIFO")
    } else if t.is_socket() {
        Some("socket")
    } else if t.is_char_device() || t.is_block_device() {
        Some("device")
    } else {
        Some("special file")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: FileKind = FileKind {
        what: "test file",
        default_max: 8,
        env: "FLEETSCALER_TEST_NEVER_SET",
    };

    fn temp(name: &str, contents: &[u8]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("fleetscaler-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }

    #[test]
    fn a_file_within_its_maximum_is_read_and_one_beyond_is_refused_by_name() {
        let ok = temp("ok", b"12345678");
        assert_eq!(read_text(&ok, TINY).unwrap(), "12345678");
        let big = temp("big", b"123456789");
        let e = read(&big, TINY).unwrap_err().to_string();
        assert!(
            e.contains("big") && e.contains("8 bytes") && e.contains("test file"),
            "{e}"
        );
        assert!(e.contains("FLEETSCALER_TEST_NEVER_SET"), "{e}");
    }

    #[test]
    fn devices_and_directories_are_refused_at_once() {
        let e = read(Path::new("/dev/zero"), TINY).unwrap_err();
        assert!(
            matches!(e, FileError::NotAFile { kind: "device", .. }),
            "{e}"
        );
        let e = read(&std::env::temp_dir(), TINY).unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
        let e = read(Path::new("/no/such/file"), TINY).unwrap_err();
        assert!(e.is_not_found(), "{e}");
        let fifo = std::env::temp_dir().join(format!("fleetscaler-fifo-{}", std::process::id()));
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // Refused without opening it: opening a FIFO with no writer would block for ever.
        let e = read(&fifo, TINY).unwrap_err();
        assert!(matches!(e, FileError::NotAFile { kind: "FIFO", .. }), "{e}");
        std::fs::remove_file(&fifo).unwrap();
        let binary = temp("binary", &[0xff, 0xfe]);
        assert!(matches!(
            read_text(&binary, TINY),
            Err(FileError::NotText { .. })
        ));
    }
}
