//! Noticing that fleet.toml changed: on SIGHUP, or when its contents change on disk (polled,
//! which also works for a ConfigMap mounted into a pod, where the file is swapped by a
//! symlink and change notifications are unreliable).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

/// How often the file is looked at.
pub const POLL: std::time::Duration = std::time::Duration::from_secs(2);

pub struct FileWatch {
    path: PathBuf,
    last: Option<u64>,
}

impl FileWatch {
    /// Starts from the file as it is now.
    pub fn new(path: &Path) -> Self {
        FileWatch {
            path: path.to_path_buf(),
            last: fingerprint(path),
        }
    }

    /// True once each time the contents differ from the last look. A file that cannot be
    /// read is not a change (it may be in the middle of being replaced).
    pub fn changed(&mut self) -> bool {
        match fingerprint(&self.path) {
            Some(now) if Some(now) != self.last => {
                self.last = Some(now);
                true
            }
            _ => false,
        }
    }
}

fn fingerprint(path: &Path) -> Option<u64> {
    let bytes = crate::files::read(path, crate::files::CONFIG).ok()?;
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    Some(h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_a_change_of_contents_once() {
        let dir = std::env::temp_dir().join(format!("fleetscaler-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("fleet.toml");
        std::fs::write(&path, "a").unwrap();
        let mut w = FileWatch::new(&path);
        assert!(!w.changed());
        std::fs::write(&path, "b").unwrap();
        assert!(w.changed());
        assert!(!w.changed());
        std::fs::remove_file(&path).unwrap();
        assert!(!w.changed(), "a missing file is not a change");
        std::fs::write(&path, "b").unwrap();
        assert!(!w.changed(), "the same contents back are not a change");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
