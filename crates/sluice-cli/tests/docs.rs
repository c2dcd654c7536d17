//! The documentation holds together: every relative link of the README and the pages under
//! `docs/` names a file that exists (and, for a page, a heading it has), every page is
//! reachable from the index, every `sluice COMMAND` the pages name is a command the binary
//! has, every TOML block passes `config check`, and every `[section] key` named inline is a
//! key of the configuration.

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

/// What a page's TOML block may refer to without defining it: providers, the model groups
/// the pages use as examples, and their prices. A block's own tables replace these.
const BASE: &str = r#"
[providers.openai]
kind = "openai"
base_url = "http://127.0.0.1:9"

[providers.anthropic]
kind = "anthropic"
base_url = "http://127.0.0.1:9"

[models.chat]
deployments = [{ provider = "openai", model = "m-chat" }]

[models.long-context]
deployments = [{ provider = "openai", model = "m-long" }]

[models.glm]
deployments = [{ provider = "openai", model = "m-glm" }]

[models.cheap]
deployments = [{ provider = "openai", model = "m-cheap" }]

[models.mid]
deployments = [{ provider = "openai", model = "m-mid" }]

[models.strong]
deployments = [{ provider = "openai", model = "m-strong" }]

[prices.m-chat]
input = 1.0
output = 2.0

[prices.m-long]
input = 1.0
output = 2.0

[prices.m-glm]
input = 1.0
output = 2.0

[prices.m-cheap]
input = 0.1
output = 0.2

[prices.m-mid]
input = 1.0
output = 2.0

[prices.m-strong]
input = 5.0
output = 10.0
"#;

/// `sluice config check FILE`: whether it passed, and what it printed (stdout, stderr).
fn config_check(file: &Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["config", "check"])
        .arg(file)
        .env_remove("SLUICE_LEDGER_URL")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

/// The fenced TOML blocks of `text`, with the line each starts at.
fn toml_blocks(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        match &mut open {
            None if line.trim_start() == "```toml" => open = Some((n + 1, String::new())),
            Some(_) if line.trim_start().starts_with("```") => out.extend(open.take()),
            Some((_, block)) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    out
}

/// `BASE` without the tables `block` makes itself.
fn base_for(block: &str) -> String {
    let own: BTreeSet<&str> = block
        .lines()
        .filter(|l| l.starts_with('['))
        .map(str::trim)
        .collect();
    let mut out = String::new();
    for table in BASE.split("\n\n") {
        let header = table.trim().lines().next().unwrap_or("");
        if !own.contains(header) {
            out.push_str(table);
            out.push_str("\n\n");
        }
    }
    out
}

#[test]
fn every_toml_block_of_the_pages_passes_config_check() {
    let dir = tempfile::tempdir().unwrap();
    let mut failed = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (line, block) in toml_blocks(&text) {
            let file = dir.path().join(format!("block-{checked}.toml"));
            std::fs::write(&file, format!("{}{block}", base_for(&block))).unwrap();
            let (ok, said) = config_check(&file);
            checked += 1;
            if !ok {
                failed.push(format!("{}:{line}:\n{block}{said}", page.display()));
            }
        }
    }
    assert!(checked >= 3, "only {checked} TOML blocks found");
    assert!(
        failed.is_empty(),
        "blocks `sluice config check` refuses:\n{}",
        failed.join("\n")
    );
}

/// The `[section] key` references of `text`'s inline code (`[models.G] hedge`,
/// `[diagnose] keep = 0`): the section and the key.
fn key_references(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for span in text.split('`').skip(1).step_by(2) {
        let Some(rest) = span.strip_prefix('[') else {
            continue;
        };
        let Some((section, after)) = rest.split_once("] ") else {
            continue;
        };
        let key: String = after
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        let plain = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
        if !key.is_empty() && section.chars().all(plain) {
            out.push((section.to_owned(), key));
        }
    }
    out
}

/// A configuration with `key` set to a value of the wrong kind in `section` (a placeholder
/// name such as `G` or `NAME` made a real one): `config check` then names the key as unknown
/// only if the configuration has no such section or key.
fn probe(section: &str, key: &str) -> String {
    let parts: Vec<&str> = section.split('.').collect();
    let named = |i: usize, name: &str| -> String {
        let mut p: Vec<&str> = parts.clone();
        if p.len() > i && p[i].chars().all(|c| c.is_ascii_uppercase()) {
            p[i] = name;
        }
        p.join(".")
    };
    let probe = "\"__probe__\"";
    match parts.first().copied() {
        Some("models") => {
            let header = named(1, "chat");
            let own = format!(
                "[{header}]\ndeployments = [{{ provider = \"openai\", model = \"m-chat\" }}]\n\
                 {key} = {probe}\n"
            );
            format!("{}{own}", base_for(&own))
        }
        Some("tenants") => format!("{BASE}\n[{}]\n{key} = {probe}\n", named(1, "acme")),
        _ => {
            let header = named(parts.len() - 1, "chat");
            format!("{BASE}\n[{header}]\n{key} = {probe}\n")
        }
    }
}

/// Whether `config check` knows `key` in `section`, with what it said.
fn knows(dir: &Path, section: &str, key: &str) -> (bool, String) {
    let file = dir.join(format!("key-{}-{key}.toml", section.replace('.', "-")));
    std::fs::write(&file, probe(section, key)).unwrap();
    let (_, said) = config_check(&file);
    let unknown = ["unknown key", "unknown section", "unknown field"];
    (!unknown.iter().any(|u| said.contains(u)), said)
}

#[test]
fn every_section_and_key_the_pages_name_inline_exists() {
    let dir = tempfile::tempdir().unwrap();
    let mut unknown = Vec::new();
    let mut checked = BTreeSet::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (section, key) in key_references(&text) {
            if !checked.insert((section.clone(), key.clone())) {
                continue;
            }
            let (known, said) = knows(dir.path(), &section, &key);
            if !known {
                unknown.push(format!("{}: [{section}] {key}\n{said}", page.display()));
            }
        }
    }
    assert!(
        checked.len() >= 20,
        "only {} references found",
        checked.len()
    );
    assert!(
        unknown.is_empty(),
        "keys the configuration does not have:\n{}",
        unknown.join("\n")
    );
}

#[test]
fn a_key_the_configuration_lacks_is_found() {
    let refs = key_references("set `[models.G] hedgeing` or `[diagnose] keep = 0` and `[x]`");
    assert_eq!(
        refs,
        vec![
            ("models.G".to_owned(), "hedgeing".to_owned()),
            ("diagnose".to_owned(), "keep".to_owned())
        ]
    );
    let dir = tempfile::tempdir().unwrap();
    assert!(!knows(dir.path(), "models.G", "hedgeing").0);
    assert!(!knows(dir.path(), "diagnoses", "keep").0);
    assert!(knows(dir.path(), "models.G", "hedge").0);
    assert!(knows(dir.path(), "tenants.NAME", "lane").0);
}
