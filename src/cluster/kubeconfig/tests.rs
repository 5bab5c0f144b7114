use super::*;
use crate::cluster::client::TEST_KUBECONFIG as ONE;

/// A directory of its own for each test (they run in parallel and share the store).
fn dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fleetscaler-kc-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `ONE`, then `second`, as the files `one` and `two` of `dir`.
fn two_files(dir: &Path, second: &str) -> [PathBuf; 2] {
    let files = [dir.join("one"), dir.join("two")];
    std::fs::write(&files[0], ONE).unwrap();
    std::fs::write(&files[1], second).unwrap();
    files
}

/// A kubeconfig file is read as kube's own reader reads it (relative paths follow the
/// file), and bounded like every other file: a device is refused before it is read.
#[test]
fn a_kubeconfig_file_is_bounded_and_its_relative_paths_follow_it() {
    let dir = dir("relative");
    let path = dir.join("config");
    let text = ONE
        .replace(
            "{server: \"https://127.0.0.1:1\"}",
            "{server: \"https://127.0.0.1:1\", certificate-authority: ca.crt}",
        )
        .replace(
            "{token: secret}",
            "{client-certificate: certs/me.crt, client-key: /abs/me.key}",
        );
    std::fs::write(&path, text).unwrap();
    let kc = read_kubeconfig(&path).unwrap();
    let cluster = kc.clusters[0].cluster.as_ref().unwrap();
    let user = kc.auth_infos[0].auth_info.as_ref().unwrap();
    let at = |f: &str| Some(dir.join(f).display().to_string());
    assert_eq!(cluster.certificate_authority, at("ca.crt"));
    assert_eq!(user.client_certificate, at("certs/me.crt"));
    assert_eq!(user.client_key.as_deref(), Some("/abs/me.key"));
    std::fs::remove_dir_all(&dir).unwrap();
    let err = read_kubeconfig(Path::new("/dev/zero"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("/dev/zero") && err.contains("not a regular file"),
        "{err}"
    );
}

#[test]
fn an_unreadable_file_is_named() {
    for err in [
        load_kubeconfig(Some(Path::new("/nonexistent/kc")), &[]).unwrap_err(),
        load_context(Some(Path::new("/nonexistent/kc")), &[], "east").unwrap_err(),
    ] {
        let err = err.to_string();
        assert!(err.contains("/nonexistent/kc"), "{err}");
    }
}

#[test]
fn hub_files_are_merged_in_order() {
    let dir = dir("merged");
    let files = two_files(&dir, &ONE.replace("east", "west"));
    let kc = load_kubeconfig(None, &files).unwrap();
    let names: Vec<_> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["east", "west"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two files: the second's context `west` names the cluster and user `a`, which the first
/// file defines too (its server `:1`) and the second redefines (`:2`). As the merge does, the
/// first definition of each name wins, and the context comes alone with what it names.
#[test]
fn a_context_comes_alone_with_its_cluster_and_user_as_the_merge_takes_them() {
    let dir = dir("narrowed");
    let other = ONE
        .replace("east", "west")
        .replace("127.0.0.1:1", "127.0.0.1:2")
        .replace("secret", "other");
    let files = two_files(&dir, &other);
    let kc = load_context(None, &files, "west").unwrap();
    let names: Vec<_> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["west"]);
    assert_eq!(kc.current_context.as_deref(), Some("west"));
    assert_eq!(kc.clusters.len(), 1);
    assert_eq!(kc.auth_infos.len(), 1);
    assert_eq!(
        server_of(&kc, "west"),
        server_of(&load_kubeconfig(None, &files).unwrap(), "west")
    );
    assert_eq!(
        server_of(&kc, "west").as_deref(),
        Some("https://127.0.0.1:1")
    );
    let err = load_context(None, &files, "north").unwrap_err().to_string();
    assert!(err.contains("(its contexts: east, west)"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Parsed once while the file is unchanged; a file rewritten is read again, and a file
/// that went away is an error (not the copy kept).
#[test]
fn a_file_is_parsed_once_until_it_changes() {
    let dir = dir("kept");
    let path = dir.join("config");
    std::fs::write(&path, ONE).unwrap();
    let once = parsed(&path).unwrap();
    assert!(Arc::ptr_eq(&once, &parsed(&path).unwrap()));
    std::fs::write(&path, ONE.replace("127.0.0.1:1", "127.0.0.1:1234")).unwrap();
    let kc = load_context(Some(&path), &[], "east").unwrap();
    assert_eq!(
        server_of(&kc, "east").as_deref(),
        Some("https://127.0.0.1:1234")
    );
    assert!(!Arc::ptr_eq(&once, &parsed(&path).unwrap()));
    std::fs::remove_file(&path).unwrap();
    let err = load_context(Some(&path), &[], "east")
        .unwrap_err()
        .to_string();
    assert!(err.contains("config"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn files_of_different_kinds_are_refused_as_the_merge_refuses_them() {
    let dir = dir("kinds");
    let files = two_files(&dir, &ONE.replace("kind: Config", "kind: Other"));
    let err = load_context(None, &files, "east").unwrap_err();
    assert!(
        matches!(&err, ClientError::ReadKubeconfig { path, source: KubeconfigError::KindMismatch } if *path == files[1]),
        "{err}"
    );
    assert!(load_kubeconfig(None, &files).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}
