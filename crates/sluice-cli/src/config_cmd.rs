//! `sluice config check FILE` and `sluice keys new`: configuration files and the entries they hold.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use sluice_config::gateway::{self, ProcessEnv, Secrets};

/// Checks `file`; prints every error and warning, then a one-line summary. Unset secret
/// variables are warnings unless `strict`.
pub fn check(file: &Path, strict: bool) -> anyhow::Result<ExitCode> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let secrets = if strict {
        Secrets::Required
    } else {
        Secrets::Warn
    };
    let mut checked = gateway::check(&text, &ProcessEnv, &[], secrets);
    if !checked.warnings.is_empty() {
        println!("{}: {}", file.display(), warnings(&checked.warnings));
    }
    // What `serve` reads beside the file: the semantic cache's embedding model.
    if let Some(cfg) = &checked.config
        && let Some(problem) = embedder_problem(cfg, &crate::ledger_cmd::config_dir(file))
    {
        checked.errors.0.push(problem);
        checked.config = None;
    }
    // What `serve` would leave unpriced: a deployment's model priced in a currency with no rate.
    if let Some(cfg) = &checked.config
        && let Ok(catalog) = sluice_gateway::assemble::catalog::from_config(cfg)
    {
        for (group, model, c) in sluice_gateway::assemble::catalog::unconverted(cfg, &catalog) {
            println!(
                "{}: warning: models.{group}: `{model}` is priced in {c}, and [billing] has no rate \
                 from {c} to {billing}: it is left unpriced (tenants with credits are refused on it); \
                 set [billing] rates = {{ {c} = N }}",
                file.display(),
                billing = catalog.billing()
            );
        }
    }
    match checked.config {
        Some(cfg) => {
            println!(
                "{}: ok ({} providers, {} model groups, listening on {})",
                file.display(),
                cfg.providers.len(),
                cfg.models.len(),
                cfg.listen
            );
            Ok(ExitCode::SUCCESS)
        }
        None => {
            println!("{}: {}", file.display(), checked.errors);
            Ok(ExitCode::FAILURE)
        }
    }
}

/// Why `serve` would refuse the semantic cache's local embedding model (missing or not
/// loadable, with the command that installs it), if it would.
fn embedder_problem(
    cfg: &gateway::GatewayConfig,
    base: &Path,
) -> Option<sluice_config::Diagnostic> {
    let s = &cfg.cache.semantic;
    if !s.enabled || s.embeddings.is_some() {
        return None;
    }
    let err = sluice_embed::Embedder::load(&base.join(&s.model)).err()?;
    Some(sluice_config::Diagnostic {
        path: "cache.semantic.model".into(),
        line: None,
        column: None,
        message: err.to_string(),
    })
}

/// Warnings, written like errors but named as what they are.
pub fn warnings(w: &sluice_config::Diagnostics) -> String {
    let mut out = if w.len() == 1 {
        "1 warning:".to_string()
    } else {
        format!("{} warnings:", w.len())
    };
    for d in w.iter() {
        out.push_str("\n  ");
        out.push_str(&d.to_string());
    }
    out
}

/// `sluice models`: the catalog, with `config`'s `[billing]`, `[catalog]` and `[prices]`
/// applied.
pub fn models(config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let catalog = match config {
        None => sluice_economy::Catalog::with_defaults(),
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
            let checked = gateway::check(&text, &ProcessEnv, &[], Secrets::Warn);
            let cfg = checked
                .config
                .ok_or_else(|| anyhow::anyhow!("{}: {}", file.display(), checked.errors))?;
            sluice_gateway::assemble::catalog::from_config(&cfg)
                .with_context(|| file.display().to_string())?
        }
    };
    print!("{}", models_table(&catalog));
    Ok(ExitCode::SUCCESS)
}

/// The catalog as a table: one row a model, prices per million tokens as published (in
/// their currency) and as billed (in the billing currency).
fn models_table(catalog: &sluice_economy::Catalog) -> String {
    use std::fmt::Write as _;
    let units = |m: sluice_economy::Micros| format!("{:.3}", m.0 as f64 / 1e6);
    let billing = catalog.billing();
    let mut out = format!(
        "{:<24} {:>9} {:>8}  {:<27} {:>3} {:>8} {:>8} {:>8} {:>10} {:>10}\n",
        "model",
        "context",
        "output",
        "can",
        "cur",
        "input",
        "cached",
        "output",
        "billed in",
        "billed out"
    );
    for (name, price, info) in catalog.models() {
        let (window, output, can) = match info {
            Some(i) => {
                let can: Vec<&str> = [
                    (i.tools, "tools"),
                    (i.vision, "vision"),
                    (i.json, "json"),
                    (i.reasoning, "reasoning"),
                ]
                .iter()
                .filter(|(on, _)| *on)
                .map(|(_, w)| *w)
                .collect();
                (
                    i.context_window.to_string(),
                    i.max_output.to_string(),
                    can.join(","),
                )
            }
            None => ("-".into(), "-".into(), "-".into()),
        };
        let (cur, input, cached, out_price) = match catalog.published(name) {
            Some((c, p)) => (
                c.to_string(),
                units(p.input),
                units(p.cached_input),
                units(p.output),
            ),
            None => ("-".into(), "-".into(), "-".into(), "-".into()),
        };
        let (billed_in, billed_out) = match price {
            Some(p) => (units(p.input), units(p.output)),
            None if cur != "-" => ("no rate".into(), "no rate".into()),
            None => ("-".into(), "-".into()),
        };
        let _ = writeln!(
            out,
            "{name:<24} {window:>9} {output:>8}  {can:<27} {cur:>3} {input:>8} {cached:>8} {out_price:>8} {billed_in:>10} {billed_out:>10}"
        );
    }
    let _ = write!(
        out,
        "\nprices per million tokens: input, cached input and output in the currency each provider \
         bills in; billed in {billing}, converted at [billing] rates (no rate: left unpriced); - : not known\n"
    );
    out
}

/// Prints a fresh API key and the configuration entry that holds its hash.
pub fn new_key(name: &str, tenant: &str, lane: Option<&str>, models: &[String]) {
    let secret = sluice_economy::keys::generate();
    println!("key (shown once; sluice keeps only its hash): {secret}");
    println!();
    println!("[keys.{name}]");
    println!("tenant = {}", toml_string(tenant));
    println!("sha256 = \"{}\"", sluice_economy::keys::hash_hex(&secret));
    if let Some(lane) = lane {
        println!("lane = {}", toml_string(lane));
    }
    let models: Vec<String> = models
        .iter()
        .map(|m| m.trim())
        .filter(|m| !m.is_empty())
        .map(toml_string)
        .collect();
    if !models.is_empty() {
        println!("models = [{}]", models.join(", "));
    }
}

/// `s` as a TOML string, quotes and backslashes escaped.
fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}
