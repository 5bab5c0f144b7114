//! Kubeconfig files: read as kubectl reads them, and parsed once for every cluster they name.
//!
//! A hub of a thousand clusters reads one kubeconfig of a thousand contexts (some 1 MB of
//! YAML, 30-50 ms to parse). Each cluster's runner reads its context whenever it connects,
//! so a parse per connection cost the hub a minute of CPU at start-up (1,000 parses), during
//! which the runners' first requests timed out and every restart parsed the file again.
//! Each file is now parsed once and kept while it stays unchanged (the same size, time of
//! change and inode: a mounted Secret is swapped by a symlink, a file rewritten in place
//! changes its time), and a cluster takes only its own context, cluster and user from it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::SystemTime;

use kube::config::{Kubeconfig, KubeconfigError};

use super::client::ClientError;

/// Contexts named in an unknown-context error, at most: a kubeconfig of a thousand clusters
/// must not make a thousand-name log line.
const CONTEXTS_NAMED: usize = 20;

/// Files kept parsed, at most. Only files fleet.toml names are read here, so this bounds
/// only a hub whose configuration named many files over its life; past it, the store starts
/// afresh.
const FILES_KEPT: usize = 256;

/// The context fleet.toml names is in the kubeconfig read from `place` (said in the error:
/// the file, the hub's files, the default kubeconfig), or an error that lists its contexts.
pub fn require_context(
    kubeconfig: &Kubeconfig,
    context: &str,
    place: impl FnOnce() -> String,
) -> Result<(), ClientError> {
    if kubeconfig.contexts.iter().any(|c| c.name == context) {
        return Ok(());
    }
    let names = kubeconfig.contexts.iter().map(|c| c.name.as_str());
    Err(unknown_context(names, context, place()))
}

fn unknown_context<'a>(
    names: impl Iterator<Item = &'a str>,
    context: &str,
    place: String,
) -> ClientError {
    let names: Vec<&str> = names.collect();
    let mut known = names
        .iter()
        .take(CONTEXTS_NAMED)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if names.is_empty() {
        known = "none".into();
    } else if names.len() > CONTEXTS_NAMED {
        known.push_str(&format!(", and {} more", names.len() - CONTEXTS_NAMED));
    }
    ClientError::UnknownContext {
        context: context.to_string(),
        place,
        known,
    }
}

/// The server URL of `context`'s cluster, when the kubeconfig says it.
pub fn server_of(kubeconfig: &Kubeconfig, context: &str) -> Option<String> {
    let ctx = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context)?
        .context
        .as_ref()?;
    kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == ctx.cluster)?
        .cluster
        .as_ref()?
        .server
        .clone()
}

/// Where a cluster's kubeconfig comes from, as its errors name it.
pub fn kubeconfig_place(cluster_file: Option<&Path>, hub_files: &[PathBuf]) -> String {
    match cluster_file {
        Some(path) => path.display().to_string(),
        None if hub_files.is_empty() => "the default kubeconfig".to_string(),
        None => hub_files
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The kubeconfig a cluster reads: its own file if fleet.toml names one, else the hub's
/// files merged in order (the first file wins for a name defined twice, as with KUBECONFIG),
/// else the default (`KUBECONFIG`, `~/.kube/config`). Read afresh: for one-off commands.
pub fn load_kubeconfig(
    cluster_file: Option<&Path>,
    hub_files: &[PathBuf],
) -> Result<Kubeconfig, ClientError> {
    if let Some(path) = cluster_file {
        return read_kubeconfig(path);
    }
    let mut merged: Option<Kubeconfig> = None;
    for path in hub_files {
        let next = read_kubeconfig(path)?;
        merged = Some(match merged {
            None => next,
            Some(m) => m
                .merge(next)
                .map_err(|source| ClientError::ReadKubeconfig {
                    path: path.clone(),
                    source,
                })?,
        });
    }
    match merged {
        Some(kc) => Ok(kc),
        None => Kubeconfig::read().map_err(|source| ClientError::DefaultKubeconfig { source }),
    }
}

/// `context` alone, out of the kubeconfig [`load_kubeconfig`] would read: the context, its
/// cluster and its user, each the first of its name in the files' order (as the merge takes
/// them). The files are parsed once while they stay unchanged (see the module's doc), so a
/// thousand clusters connecting read their shared file once. An error names what
/// `load_kubeconfig` and [`require_context`] would name.
pub fn load_context(
    cluster_file: Option<&Path>,
    hub_files: &[PathBuf],
    context: &str,
) -> Result<Kubeconfig, ClientError> {
    let files: Vec<Arc<Kubeconfig>> = match cluster_file {
        Some(path) => vec![parsed(path)?],
        None if hub_files.is_empty() => {
            vec![Arc::new(Kubeconfig::read().map_err(|source| {
                ClientError::DefaultKubeconfig { source }
            })?)]
        }
        None => hub_files
            .iter()
            .map(|p| parsed(p))
            .collect::<Result<_, _>>()?,
    };
    if cluster_file.is_none() {
        mergeable(&files, hub_files)?;
    }
    narrowed(&files, context).ok_or_else(|| {
        let mut seen = std::collections::HashSet::new();
        let names = files
            .iter()
            .flat_map(|k| &k.contexts)
            .map(|c| c.name.as_str())
            .filter(|n| seen.insert(*n));
        unknown_context(names, context, kubeconfig_place(cluster_file, hub_files))
    })
}

/// What `Kubeconfig::merge` refuses: files of another kind or API version than the first.
fn mergeable(files: &[Arc<Kubeconfig>], paths: &[PathBuf]) -> Result<(), ClientError> {
    let (mut kind, mut version) = (None, None);
    for (k, path) in files.iter().zip(paths) {
        let refused = if kind.is_some() && k.kind.is_some() && kind != k.kind.as_ref() {
            Some(KubeconfigError::KindMismatch)
        } else if version.is_some() && k.api_version.is_some() && version != k.api_version.as_ref()
        {
            Some(KubeconfigError::ApiVersionMismatch)
        } else {
            None
        };
        if let Some(source) = refused {
            return Err(ClientError::ReadKubeconfig {
                path: path.clone(),
                source,
            });
        }
        kind = kind.or(k.kind.as_ref());
        version = version.or(k.api_version.as_ref());
    }
    Ok(())
}

/// A kubeconfig of `context` alone (`None` when no file defines it).
fn narrowed(files: &[Arc<Kubeconfig>], context: &str) -> Option<Kubeconfig> {
    let named = files
        .iter()
        .flat_map(|k| &k.contexts)
        .find(|c| c.name == context)?
        .clone();
    let (cluster, user) = named.context.as_ref().map_or((None, None), |c| {
        (Some(c.cluster.as_str()), c.user.as_deref())
    });
    let clusters = files
        .iter()
        .flat_map(|k| &k.clusters)
        .find(|c| Some(c.name.as_str()) == cluster)
        .cloned();
    let users = files
        .iter()
        .flat_map(|k| &k.auth_infos)
        .find(|a| Some(a.name.as_str()) == user)
        .cloned();
    let first = |f: fn(&Kubeconfig) -> Option<&String>| files.iter().find_map(|k| f(k)).cloned();
    Some(Kubeconfig {
        preferences: files.iter().find_map(|k| k.preferences.clone()),
        clusters: clusters.into_iter().collect(),
        auth_infos: users.into_iter().collect(),
        contexts: vec![named],
        current_context: Some(context.to_string()),
        extensions: None,
        kind: first(|k| k.kind.as_ref()),
        api_version: first(|k| k.api_version.as_ref()),
        other: Default::default(),
    })
}

/// What a file looked like when it was parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        let meta = std::fs::metadata(path).ok()?;
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&meta);
        #[cfg(not(unix))]
        let inode = 0;
        Some(Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode,
        })
    }
}

/// Each file kept parsed, with what it looked like then.
type Store = HashMap<PathBuf, (Stamp, Arc<Kubeconfig>)>;

static PARSED: LazyLock<Mutex<Store>> = LazyLock::new(Default::default);

/// `path` parsed, from the store while the file is unchanged. The store's lock is held while
/// a file is parsed, so clusters connecting together wait for the one parse rather than
/// each making its own. A file that cannot be read or parsed is not kept: its error is
/// reported again on the next attempt, and a fixed file is read then.
fn parsed(path: &Path) -> Result<Arc<Kubeconfig>, ClientError> {
    let mut store = PARSED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let stamp = Stamp::of(path);
    if let (Some(stamp), Some((kept, kubeconfig))) = (&stamp, store.get(path))
        && kept == stamp
    {
        return Ok(kubeconfig.clone());
    }
    store.remove(path);
    let kubeconfig = Arc::new(read_kubeconfig(path)?);
    if let Some(stamp) = stamp {
        if store.len() >= FILES_KEPT {
            store.clear();
        }
        store.insert(path.to_path_buf(), (stamp, kubeconfig.clone()));
    }
    Ok(kubeconfig)
}

/// A kubeconfig file, bounded like every file the hub reads (`files::KUBECONFIG`), its
/// relative certificate, key and token paths taken from its directory, as kubectl takes them.
fn read_kubeconfig(path: &Path) -> Result<Kubeconfig, ClientError> {
    let text = crate::files::read_text(path, crate::files::KUBECONFIG)
        .map_err(ClientError::KubeconfigFile)?;
    let mut kubeconfig =
        Kubeconfig::from_yaml(&text).map_err(|source| ClientError::ReadKubeconfig {
            path: path.to_path_buf(),
            source,
        })?;
    if let Some(dir) = path.parent() {
        absolute_paths(&mut kubeconfig, dir);
    }
    Ok(kubeconfig)
}

fn absolute_paths(kubeconfig: &mut Kubeconfig, dir: &Path) {
    let absolute = |file: &mut Option<String>| {
        if let Some(f) = file
            .as_mut()
            .filter(|f| Path::new(f.as_str()).is_relative())
            && let Some(joined) = dir.join(f.as_str()).to_str()
        {
            *f = joined.to_string();
        }
    };
    for cluster in kubeconfig
        .clusters
        .iter_mut()
        .filter_map(|c| c.cluster.as_mut())
    {
        absolute(&mut cluster.certificate_authority);
    }
    for user in kubeconfig
        .auth_infos
        .iter_mut()
        .filter_map(|a| a.auth_info.as_mut())
    {
        absolute(&mut user.client_certificate);
        absolute(&mut user.client_key);
        absolute(&mut user.token_file);
    }
}

#[cfg(test)]
mod tests;
