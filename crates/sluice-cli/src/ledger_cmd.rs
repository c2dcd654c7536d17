//! The usage ledger from the command line: opening the store a configuration names (for
//! `sluice serve`), and `sluice usage`, which totals it as a table, JSON or CSV.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use sluice_config::gateway::{self, LedgerConfig, LedgerDurability, LedgerStoreKind, ProcessEnv};
use sluice_ledger::report::{self, Format};
use sluice_ledger::{AnyStore, Durability, PgStore, SqliteStore, Store, UsageQuery};

/// `sluice usage` arguments.
#[derive(Debug, clap::Args)]
pub struct UsageArgs {
    /// The configuration whose `[ledger]` to read.
    #[arg(long, short, default_value = "sluice.toml")]
    config: PathBuf,
    /// Only this tenant's calls.
    #[arg(long)]
    tenant: Option<String>,
    /// From this time on (YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ or Unix milliseconds).
    #[arg(long)]
    from: Option<String>,
    /// Before this time.
    #[arg(long)]
    to: Option<String>,
    /// Columns to total by, comma-separated: tenant, key, group, model, upstream, day.
    #[arg(long, default_value = "tenant,model")]
    group_by: String,
    /// table, json or csv.
    #[arg(long, default_value = "table")]
    format: String,
}

/// Opens the ledger store `cfg` names; `None` when the ledger is off. A relative SQLite
/// path is taken from `config_dir`; `tables` makes the tables other parts keep in an
/// embedded store's file before it prepares its own statements.
pub async fn open(
    cfg: &LedgerConfig,
    config_dir: &Path,
    tables: &[&str],
) -> anyhow::Result<Option<AnyStore>> {
    Ok(match cfg.store {
        LedgerStoreKind::Off => None,
        LedgerStoreKind::Sqlite => {
            let path = config_dir.join(&cfg.path);
            let durability = match cfg.durability {
                LedgerDurability::Disk => Durability::Disk,
                LedgerDurability::Process => Durability::Process,
            };
            let store = SqliteStore::open_with(&path, durability, tables)
                .await
                .with_context(|| format!("opening the ledger {}", path.display()))?;
            Some(AnyStore::Sqlite(store))
        }
        LedgerStoreKind::Postgres => {
            let var = cfg
                .url_env
                .as_deref()
                .context("a `postgres` ledger needs `[ledger] url_env`")?;
            let url = std::env::var(var)
                .ok()
                .filter(|v| !v.is_empty())
                .with_context(|| {
                    format!("the ledger's URL: environment variable `{var}` is not set")
                })?;
            let store = PgStore::connect(&url)
                .await
                .context("connecting to the PostgreSQL ledger")?;
            Some(AnyStore::Postgres(store))
        }
    })
}

/// The folder a configuration file's relative paths are taken from.
pub fn config_dir(config: &Path) -> PathBuf {
    config
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// `sluice usage`.
pub fn usage(a: &UsageArgs) -> anyhow::Result<ExitCode> {
    let q = UsageQuery::parse(
        a.tenant.as_deref(),
        a.from.as_deref(),
        a.to.as_deref(),
        Some(&a.group_by),
    )?;
    let format = Format::parse(&a.format)
        .with_context(|| format!("--format {}: use table, json or csv", a.format))?;
    let text = std::fs::read_to_string(&a.config)
        .with_context(|| format!("reading {}", a.config.display()))?;
    // Reading the ledger needs neither the admin token nor any provider's key.
    let checked = gateway::check(&text, &ProcessEnv, &[], gateway::Secrets::Warn);
    let cfg = checked
        .config
        .ok_or_else(|| anyhow::anyhow!("{}: {}", a.config.display(), checked.errors))?;
    let runtime = tokio::runtime::Runtime::new().context("starting the runtime")?;
    let rows = runtime.block_on(async {
        let Some(store) = open(&cfg.ledger, &config_dir(&a.config), &[]).await? else {
            anyhow::bail!("{}: the ledger is off ([ledger] store)", a.config.display());
        };
        Ok(store.usage(&q).await?)
    })?;
    let out = match format {
        Format::Table => report::table(&q, &rows),
        Format::Csv => report::csv(&q, &rows),
        Format::Json => format!("{:#}\n", report::json(&q, &rows)),
    };
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

/// Starts the writer for `store`: on PostgreSQL, rows wait in the journal `journal` (a
/// local file) while the database cannot answer.
pub fn start(
    store: AnyStore,
    journal: &Path,
) -> anyhow::Result<(
    sluice_ledger::Ledger,
    Arc<AnyStore>,
    tokio::task::JoinHandle<()>,
)> {
    let store = Arc::new(store);
    let (ledger, task) = match &*store {
        AnyStore::Postgres(_) => sluice_ledger::Ledger::start_with_journal(store.clone(), journal)
            .with_context(|| format!("opening the ledger's journal {}", journal.display()))?,
        AnyStore::Sqlite(_) => sluice_ledger::Ledger::start(store.clone()),
    };
    Ok((ledger, store, task))
}

/// The journal of the instance listening on `listen`: beside `[ledger] path`, one per port
/// (instances of one file on one host each keep their own).
pub fn journal_path(
    cfg: &LedgerConfig,
    config_dir: &Path,
    listen: std::net::SocketAddr,
) -> std::path::PathBuf {
    let path = config_dir.join(&cfg.path);
    let stem = path.file_stem().map_or_else(
        || "sluice-ledger".into(),
        |s| s.to_string_lossy().into_owned(),
    );
    path.with_file_name(format!("{stem}-{}.journal", listen.port()))
}
