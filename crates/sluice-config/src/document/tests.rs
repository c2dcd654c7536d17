use serde::Deserialize;

use super::*;

#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
struct Server {
    port: u16,
    name: String,
}

#[derive(Debug, Deserialize, PartialEq)]
struct Item {
    url: String,
    #[serde(default)]
    list: Vec<Sub>,
}

#[derive(Debug, Deserialize, PartialEq)]
struct Sub {
    w: u32,
}

#[test]
fn reads_sections_and_defaults() {
    let doc = Document::parse("[server]\nport = 8080\n").unwrap();
    let mut diags = Vec::new();
    let s: Server = doc.section("server", &mut diags).unwrap();
    assert_eq!(s.port, 8080);
    let missing: Server = doc.section("other", &mut diags).unwrap();
    assert_eq!(missing, Server::default());
    assert!(diags.is_empty());
}

#[test]
fn reports_every_error_with_path_and_line() {
    let text = "[server]\nport = \"x\"\nbogus = 1\nalso = 2\n\n[items.a]\nurl = 5\n\n[items.b]\nurl = \"ok\"\nlist = [{ w = 1 }, { w = -1 }]\n\n[items.c]\nurl = \"fine\"\n";
    let doc = Document::parse(text).unwrap();
    let mut diags = Vec::new();
    // Each table comes back read past its errors (stand-ins where values were wrong), so the
    // checks after it still run; the diagnostics say what was wrong.
    let s: Option<Server> = doc.section("server", &mut diags);
    assert!(s.is_some());
    let items: Vec<(String, Item)> = doc.map_section("items", &mut diags);
    let names: Vec<&str> = items.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(items[2].1.url, "fine");
    let shown: Vec<String> = diags.iter().map(ToString::to_string).collect();
    let find = |needle: &str| {
        diags
            .iter()
            .find(|d| d.path == needle)
            .unwrap_or_else(|| panic!("no error for {needle}: {shown:?}"))
    };
    assert_eq!(find("server.bogus").line, Some(3));
    assert_eq!(find("server.also").line, Some(4));
    assert_eq!(find("server.port").line, Some(2));
    assert_eq!(find("items.a.url").line, Some(7));
    assert_eq!(find("items.b.list[1].w").line, Some(11));
    assert_eq!(diags.len(), 5, "{shown:?}");
}

#[test]
fn list_sections_read_each_element() {
    let text = "[[items]]\nurl = \"a\"\n[[items]]\nurl = 1\n[[items]]\nurl = \"c\"\n";
    let doc = Document::parse(text).unwrap();
    let mut diags = Vec::new();
    let items: Vec<Item> = doc.list_section("items", &mut diags);
    assert_eq!(items.len(), 3);
    assert_eq!((items[0].url.as_str(), items[2].url.as_str()), ("a", "c"));
    assert_eq!(diags.len(), 1);
    assert_eq!(diags[0].path, "items[1].url");
    assert_eq!(diags[0].line, Some(4));
}

#[test]
fn syntax_errors_carry_lines() {
    let err = Document::parse("a = 1\nb = = 2\n").err().unwrap();
    assert!(!err.is_empty());
    assert_eq!(err.0[0].line, Some(2));
}

#[test]
fn unknown_sections_are_rejected() {
    let doc = Document::parse("[server]\n[sever]\n").unwrap();
    let mut diags = Vec::new();
    doc.reject_unknown_top_level(&["server"], &mut diags);
    assert_eq!(diags.len(), 1);
    assert_eq!(diags[0].path, "sever");
    assert_eq!(diags[0].line, Some(2));
}

// Its other fields are only ever deserialised.
#[allow(dead_code)]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Strict {
    kind: Kind,
    url: String,
    count: u64,
    #[serde(default)]
    on: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Openai,
    Anthropic,
}

#[test]
fn every_error_in_one_table_is_reported_in_one_pass() {
    // A misspelt word, a wrong type, a negative count, a misspelt key and a missing
    // required key: five errors, one pass, each at its own key and in the user's words.
    let text = "[t.a]\nkind = \"opnai\"\non = \"yes\"\ncount = -5\nurk = 1\n";
    let doc = Document::parse(text).unwrap();
    let mut diags = Vec::new();
    let t: Vec<(String, Strict)> = doc.map_section("t", &mut diags);
    let shown: Vec<String> = diags.iter().map(ToString::to_string).collect();
    let at = |path: &str| {
        diags
            .iter()
            .find(|d| d.path == path)
            .unwrap_or_else(|| panic!("no error for {path}: {shown:?}"))
    };
    assert!(
        at("t.a.kind").message.contains("did you mean `openai`?"),
        "{shown:?}"
    );
    assert_eq!(at("t.a.kind").line, Some(2));
    assert_eq!(
        at("t.a.on").message,
        "expected true or false, found \"yes\""
    );
    assert_eq!(
        at("t.a.count").message,
        "expected a whole number >= 0, found -5"
    );
    assert!(
        at("t.a.urk").message.starts_with("unknown key `urk`"),
        "{shown:?}"
    );
    assert_eq!(at("t.a.url").message, "is required");
    assert_eq!(diags.len(), 5, "{shown:?}");
    // Read past every error, with the nearest word standing in for the misspelt one.
    assert!(matches!(
        t.as_slice(),
        [(
            _,
            Strict {
                kind: Kind::Openai,
                ..
            }
        )]
    ));
    let _ = Kind::Anthropic;
}
