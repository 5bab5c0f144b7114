#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Issue 25, point 9: shell completions and the manual page, from the CLI's own definition.

use std::process::Command;

fn fleetscaler(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_fleetscaler"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// bash itself loads the script and completes the subcommands and a subcommand's options.
#[test]
fn bash_completes_subcommands_and_options() {
    let dir = std::env::temp_dir().join(format!("fleetscaler-completions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("fleetscaler.bash");
    std::fs::write(&script, fleetscaler(&["completions", "bash"])).unwrap();
    // Completing `fleetscaler che` and `fleetscaler plan --se`, as bash does on Tab.
    let probe = format!(
        "source {}; \
         COMP_WORDS=(fleetscaler che); COMP_CWORD=1; _fleetscaler fleetscaler che fleetscaler; echo \"${{COMPREPLY[*]}}\"; \
         COMP_WORDS=(fleetscaler plan --se); COMP_CWORD=2; _fleetscaler fleetscaler --se plan; echo \"${{COMPREPLY[*]}}\"",
        script.display()
    );
    let out = Command::new("bash").args(["-c", &probe]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.first().copied(), Some("check-config"), "{said}");
    assert!(
        lines
            .get(1)
            .is_some_and(|l| l.split(' ').any(|w| w == "--seed")),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn zsh_and_fish_scripts_name_every_subcommand() {
    let zsh = fleetscaler(&["completions", "zsh"]);
    assert!(zsh.starts_with("#compdef fleetscaler"), "{}", &zsh[..80]);
    let fish = fleetscaler(&["completions", "fish"]);
    for sub in [
        "plan",
        "check-config",
        "run",
        "demo",
        "what-if",
        "status",
        "dump",
        "explain",
        "sim",
        "man",
    ] {
        assert!(zsh.contains(&format!("'{sub}:")), "zsh lacks {sub}");
        assert!(fish.contains(&format!("-a \"{sub}\"")), "fish lacks {sub}");
    }
}

#[test]
fn the_manual_page_is_roff_with_every_subcommand() {
    let man = fleetscaler(&["man"]);
    assert!(man.contains(".TH fleetscaler 1"), "{}", &man[..200]);
    assert!(man.contains(".SH NAME") && man.contains(".SH SYNOPSIS"));
    for sub in ["plan", "check\\-config", "what\\-if", "completions"] {
        assert!(man.contains(sub), "the page lacks {sub}");
    }
}
