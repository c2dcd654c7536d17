//! The documentation holds together: every relative link of the README and the pages under
//! `docs/` names a file that exists (and, for a page, a heading it has), every page is
//! reachable from the index, and every `sluice COMMAND` the pages name is a command the
//! binary has.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The README and every Markdown page under `docs/`.
fn pages() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md")];
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The anchors of `page`'s headings, as GitHub makes them.
fn anchors(page: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(page).unwrap();
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        if fenced {
            continue;
        }
        if let Some(title) = line.trim_start_matches('#').strip_prefix(' ')
            && line.starts_with('#')
        {
            let anchor: String = title
                .trim()
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
                .map(|c| if c == ' ' { '-' } else { c })
                .collect();
            out.insert(anchor);
        }
    }
    out
}

/// The targets of `text`'s Markdown links: `](target)`.
fn links(text: &str) -> Vec<&str> {
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split_once(')').map(|(t, _)| t))
        .filter(|t| !t.contains(' '))
        .collect()
}

#[test]
fn every_relative_link_names_a_file_and_a_heading_that_exist() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let dir = page.parent().unwrap();
        for target in links(&text) {
            if target.starts_with("http") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
            let path = if file.is_empty() {
                page.clone()
            } else {
                dir.join(file)
            };
            if !path.exists() {
                broken.push(format!("{}: {target} (no such file)", page.display()));
            } else if !anchor.is_empty()
                && path.extension().is_some_and(|x| x == "md")
                && !anchors(&path).contains(anchor)
            {
                broken.push(format!("{}: {target} (no such heading)", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_page_is_reachable_from_the_index() {
    let index = std::fs::read_to_string(root().join("docs/index.md")).unwrap();
    let named: BTreeSet<&str> = links(&index).into_iter().collect();
    for page in pages() {
        let name = page.file_name().unwrap().to_str().unwrap();
        if name == "index.md" || page.parent() == Some(root().as_path()) {
            continue;
        }
        assert!(
            named.contains(name) || index.contains(&format!("`{name}`")),
            "docs/{name} is not in docs/index.md"
        );
    }
}

#[test]
fn every_sluice_command_the_pages_name_exists() {
    let help = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let commands: BTreeSet<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(commands.contains("serve"), "{help}");
    let mut unknown = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for named in text.split("`sluice ").skip(1) {
            let word: String = named
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                .collect();
            if !word.is_empty() && !commands.contains(word.as_str()) {
                unknown.push(format!("{}: sluice {word}", page.display()));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "commands sluice does not have:\n{}",
        unknown.join("\n")
    );
}
