//! The commands the documentation shows, read out of its shell blocks: what a user would copy
//! into a terminal, one command per entry, continuation lines joined, comments and pipes cut.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

/// One command of the docs, where it is written and its words as a shell would split them.
#[derive(Debug, Clone)]
pub struct DocCommand {
    pub file: String,
    pub line: usize,
    pub text: String,
    pub words: Vec<String>,
}

impl DocCommand {
    pub fn place(&self) -> String {
        format!("{}:{}: {}", self.file, self.line, self.text)
    }

    /// The program: the first word after any `NAME=value` assignments.
    pub fn program(&self) -> &str {
        self.words.first().map(String::as_str).unwrap_or("")
    }
}

/// The programs whose commands are collected.
const PROGRAMS: [&str; 4] = ["fleetscaler", "curl", "kubectl", "cargo"];

/// The README and every page of docs/, in that order (the README's dump comes first).
pub fn doc_commands(root: &Path) -> Vec<DocCommand> {
    let mut files = vec![root.join("README.md")];
    let mut pages: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    files.extend(pages);
    files
        .iter()
        .flat_map(|f| {
            let name = f.strip_prefix(root).unwrap().display().to_string();
            commands_in(&name, &std::fs::read_to_string(f).unwrap())
        })
        .collect()
}

/// Commands in the fenced blocks of one page: every line of a shell block (`sh`, `bash`,
/// `console`), and in an untyped block only lines after a `$ ` prompt (the rest is output).
pub fn commands_in(file: &str, text: &str) -> Vec<DocCommand> {
    let mut out = Vec::new();
    let mut block: Option<bool> = None; // Some(is_shell) inside a fence
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let trimmed = raw.trim();
        if let Some(lang) = trimmed.strip_prefix("```") {
            block = match block {
                Some(_) => None,
                None => Some(matches!(lang, "sh" | "bash" | "console" | "shell")),
            };
            continue;
        }
        let Some(shell) = block else { continue };
        let (start, mut line) = match pending.take() {
            Some((start, before)) => (start, format!("{before} {trimmed}")),
            None => {
                let Some(line) = command_line(trimmed, shell) else {
                    continue;
                };
                (i + 1, line.to_string())
            }
        };
        if let Some(joined) = line.strip_suffix('\\') {
            line = joined.trim_end().to_string();
            pending = Some((start, line));
            continue;
        }
        if let Some(cmd) = parse(file, start, &line) {
            out.push(cmd);
        }
    }
    out
}

fn command_line(line: &str, shell: bool) -> Option<&str> {
    match line.strip_prefix("$ ") {
        Some(rest) => Some(rest),
        None if shell => Some(line),
        None => None,
    }
}

fn parse(file: &str, line: usize, text: &str) -> Option<DocCommand> {
    let mut words = split_words(text);
    // `VAR=value cmd ...`: the assignments are the user's environment, not the command.
    let assignments = words.iter().take_while(|w| is_assignment(w)).count();
    words.drain(..assignments);
    PROGRAMS
        .contains(&words.first()?.as_str())
        .then(|| DocCommand {
            file: file.to_string(),
            line,
            text: text.to_string(),
            words,
        })
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
    })
}

/// Words as a POSIX shell splits them, quotes removed, `$(...)` kept whole; the words stop at
/// a comment, a pipe, a redirection or a trailing `&`.
pub fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                word.extend(chars.by_ref().take_while(|&c| c != '\''));
            }
            '"' => {
                in_word = true;
                word.extend(chars.by_ref().take_while(|&c| c != '"'));
            }
            '$' if chars.peek() == Some(&'(') => {
                in_word = true;
                word.push('$');
                let mut depth = 0;
                for c in chars.by_ref() {
                    word.push(c);
                    depth += match c {
                        '(' => 1,
                        ')' => -1,
                        _ => 0,
                    };
                    if depth == 0 {
                        break;
                    }
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '#' | '|' | '>' | '&' if !in_word => break,
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

#[test]
fn words_are_split_as_a_shell_splits_them() {
    assert_eq!(
        split_words(r#"curl -X PUT http://a/b -d '{"x": 1}' | jq ."#),
        ["curl", "-X", "PUT", "http://a/b", "-d", r#"{"x": 1}"#]
    );
    assert_eq!(
        split_words("T=$(kubectl create token v) fleetscaler status   # a comment"),
        ["T=$(kubectl create token v)", "fleetscaler", "status"]
    );
    assert_eq!(
        split_words("kubectl port-forward svc/x 8080:8080 &"),
        ["kubectl", "port-forward", "svc/x", "8080:8080"]
    );
}

#[test]
fn commands_are_read_from_shell_blocks_and_prompts_only() {
    let page = "```sh\nfleetscaler plan \\\n    -s dump.yaml   # offline\nls\n```\n\
                ```\n$ fleetscaler status\nfleetscaler healthy\n```\n";
    let found = commands_in("p.md", page);
    let texts: Vec<_> = found.iter().map(|c| c.words.join(" ")).collect();
    assert_eq!(
        texts,
        ["fleetscaler plan -s dump.yaml", "fleetscaler status"]
    );
    assert_eq!((found[0].line, found[1].line), (2, 7));
}
