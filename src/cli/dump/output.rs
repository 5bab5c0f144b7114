//! Where the dump goes: stdout, or a file that appears only once the dump is whole. It is
//! written under a temporary name beside it and renamed at the end, so that a dump that
//! failed half-way never stands where a good one is expected; and it is readable by its
//! owner alone, as it may hold what pods carry in their environment.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// A writer that counts what went through it (a dump larger than `plan` reads is said so).
pub(super) struct Counting<W> {
    inner: W,
    pub bytes: u64,
}

impl<W: Write> Counting<W> {
    pub(super) fn new(inner: W) -> Self {
        Counting { inner, bytes: 0 }
    }
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A dump file being written: its final path and the temporary one.
pub(super) struct Pending {
    pub path: PathBuf,
    temporary: PathBuf,
}

impl Pending {
    /// Creates the temporary file beside `path` (the rename stays within one file system).
    pub(super) fn create(path: &Path) -> io::Result<(Pending, BufWriter<File>)> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| io::Error::other("not a file name"))?;
        let temporary = path.with_file_name(format!(".{name}.{}.partial", std::process::id()));
        let file = owner_only(&temporary)?;
        let pending = Pending {
            path: path.to_path_buf(),
            temporary,
        };
        Ok((pending, BufWriter::new(file)))
    }

    /// The dump is whole: it takes its name.
    pub(super) fn commit(self) -> io::Result<()> {
        std::fs::rename(&self.temporary, &self.path)
    }

    /// The dump failed: the temporary file goes.
    pub(super) fn abandon(self) {
        let _ = std::fs::remove_file(&self.temporary);
    }
}

#[cfg(unix)]
fn owner_only(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn owner_only(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_appears_only_when_committed() {
        let dir = std::env::temp_dir().join(format!("fleetscaler-dump-out-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("dump.yaml");
        let (pending, mut w) = Pending::create(&path).unwrap();
        w.write_all(b"kind: List\n").unwrap();
        drop(w);
        assert!(!path.exists());
        pending.abandon();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        let (pending, mut w) = Pending::create(&path).unwrap();
        let mut counted = Counting::new(&mut w);
        counted.write_all(b"kind: List\n").unwrap();
        assert_eq!(counted.bytes, 11);
        w.flush().unwrap();
        drop(w);
        pending.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "kind: List\n");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
