//! `sluice serve --config FILE`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use sluice_config::gateway::{self, GatewayConfig, ProcessEnv};
use sluice_gateway::server::{self, Stopped};
use sluice_gateway::{App, GatewayBuilder, Server};

use sluice_ledger::Store;

use crate::ledger_cmd;

/// How often what automatic routers learnt is saved to the store while serving.
const ROUTER_SAVE_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Saves what the routers learnt every [`ROUTER_SAVE_EVERY`]; a failed save is logged and
/// tried again at the next tick (what was learnt stays in memory).
async fn save_routers(gw: std::sync::Arc<sluice_gateway::Gateway>) {
    let mut tick = tokio::time::interval(ROUTER_SAVE_EVERY);
    loop {
        tick.tick().await;
        if let Err(e) = gw.save_routers().await {
            gw.telemetry().metrics().router_save_failures.inc();
            tracing::error!(error = %e, "saving what the routers learnt failed; retrying");
        }
    }
}

/// How batch jobs run, from `[batches]`.
fn batch_settings(
    b: &sluice_config::gateway::BatchesConfig,
) -> sluice_gateway::batches::BatchSettings {
    sluice_gateway::batches::BatchSettings {
        concurrency: b.concurrency,
        lease: b.lease,
        keep: b.keep,
        max_file_bytes: b.max_file_bytes,
        max_queued_items: b.max_queued_items,
        ..Default::default()
    }
}

/// How to reach the cluster's Redis, from `[cluster]`; `None` when instances share nothing.
fn cluster_settings(
    c: &sluice_config::gateway::ClusterConfig,
) -> anyhow::Result<Option<sluice_cluster::Settings>> {
    let Some(var) = &c.redis_url_env else {
        return Ok(None);
    };
    let url = std::env::var(var)
        .with_context(|| format!("[cluster] redis_url_env: ${var} is not set"))?;
    Ok(Some(sluice_cluster::Settings {
        url,
        url_from: var.clone(),
        key_prefix: c.key_prefix.clone(),
        connect_timeout: c.connect_timeout,
        command_timeout: c.command_timeout,
        connections: c.connections,
        budgets: match c.budgets {
            sluice_config::gateway::BudgetFallback::FailClosed => {
                sluice_cluster::BudgetPolicy::FailClosed
            }
            sluice_config::gateway::BudgetFallback::LocalShare => {
                sluice_cluster::BudgetPolicy::LocalShare
            }
        },
        per_instance_share: c.per_instance_share,
        hold_ttl: c.hold_ttl,
        probe_every: c.probe_every,
    }))
}

/// Takes the configuration at `path` anew on each SIGHUP: checked first (a file with errors
/// is refused, its errors logged, and the running configuration kept), then what can change
/// in place is applied and what needs a restart is named.
async fn reload_on_hangup(
    gw: std::sync::Arc<sluice_gateway::Gateway>,
    path: std::path::PathBuf,
    mut running: gateway::GatewayConfig,
    hash: tokio::sync::watch::Sender<String>,
) -> anyhow::Result<()> {
    let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    while hangups.recv().await.is_some() {
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                tracing::error!(config = %path.display(), error = %e, "SIGHUP: the configuration could not be read; the running one is kept");
                continue;
            }
        };
        let checked = gateway::check(&text, &ProcessEnv, &[], gateway::Secrets::Required);
        let Some(mut new) = checked.config else {
            tracing::error!(config = %path.display(), "SIGHUP: the configuration is refused, the running one is kept: {}", checked.errors);
            continue;
        };
        // An address given on the command line stays.
        new.listen = running.listen;
        match sluice_gateway::reconfigure::apply(&gw, &running, &new).await {
            Ok(a) => {
                tracing::info!(
                    tenants = a.tenants,
                    keys_added = a.keys_added,
                    keys_removed = a.keys_removed,
                    "SIGHUP: configuration taken"
                );
                if !a.restart_needed.is_empty() {
                    tracing::warn!(
                        "SIGHUP: {} changed and take effect only at a restart; they run as before",
                        a.restart_needed.join(", ")
                    );
                }
                hash.send_replace(new.shared_hash());
                running = new;
            }
            Err(e) => {
                tracing::error!(error = %e, "SIGHUP: the store could not be read; the running configuration is kept")
            }
        }
    }
    Ok(())
}

/// A gateway built from its configuration, with what serving it needs besides.
struct Built {
    /// The gateway and the work served beside its walk.
    app: App,
    /// The ledger and its writer's task, when a ledger is kept.
    ledger: Option<(sluice_ledger::Ledger, tokio::task::JoinHandle<()>)>,
    /// The cluster this instance shares state with, when `[cluster]` names one.
    cluster: Option<sluice_cluster::Cluster>,
}

/// Builds the gateway `cfg` (read from `config`) describes: its ledger's store opened (keys,
/// tenants, routers' learning and batch jobs read from it), the cluster joined, then the
/// batch jobs and analyses served beside it.
async fn build(cfg: &GatewayConfig, config: &Path) -> anyhow::Result<Built> {
    let mut builder = GatewayBuilder::from_config(cfg, &ProcessEnv)?.semantic_from_config(
        cfg,
        &ProcessEnv,
        &ledger_cmd::config_dir(config),
    )?;
    let mut jobs = None;
    let tables = if cfg.batches.enabled {
        sluice_batch::TABLES
    } else {
        &[]
    };
    let ledger = match ledger_cmd::open(&cfg.ledger, &ledger_cmd::config_dir(config), tables)
        .await?
    {
        Some(store) => {
            // Keys and tenants set through the admin API live in the store.
            builder = builder
                .stored_keys(&store.keys().await?)
                .revoked_keys(&store.revoked_keys().await?)
                .stored_tenants(&store.tenants().await?);
            // So do what automatic routers learnt.
            for (name, _) in &cfg.routers {
                let stored = sluice_gateway::feedback::persist::load(&store, name).await?;
                builder = builder.router_state(name, stored);
            }
            // Batch jobs live in the same database.
            if cfg.batches.enabled {
                jobs = Some(sluice_batch::Jobs::open(store.database()).await?);
            }
            let journal =
                ledger_cmd::journal_path(&cfg.ledger, &ledger_cmd::config_dir(config), cfg.listen);
            let (ledger, store, writer) = ledger_cmd::start(store, &journal)?;
            builder = builder.ledger(ledger.clone(), store);
            Some((ledger, writer))
        }
        None => None,
    };
    let cluster = match cluster_settings(&cfg.cluster)? {
        Some(settings) => {
            let c = sluice_cluster::Cluster::connect(settings).await?;
            tracing::info!(
                instance = c.instance(),
                "sharing limits, budgets and pacing through Redis"
            );
            builder = builder.cluster(c.clone());
            Some(c)
        }
        None => None,
    };
    // The work served beside the walk, calling it as a client would.
    let mut app = App::new(builder.build()?);
    if let Some(jobs) = jobs {
        app = app.batches(
            jobs,
            batch_settings(&cfg.batches),
            cfg.batches.lane.as_deref(),
        );
    }
    let app = app.analysis_from_config(
        cfg,
        &ledger_cmd::config_dir(config),
        sluice_gateway::app::Reviews::ByModel,
    )?;
    Ok(Built {
        app,
        ledger,
        cluster,
    })
}

/// Loads the config, serves until SIGTERM/SIGINT, then drains.
/// The connection limits of `[server]`, the file limit raised first so that the automatic
/// connection count has the room the machine allows.
fn conn_limits(s: &gateway::ServerConfig) -> server::ConnLimits {
    match server::raise_file_limit() {
        Ok(files) => tracing::debug!(files, "open-file limit"),
        Err(e) => tracing::warn!("could not raise the open-file limit: {e}"),
    }
    let limits = server::ConnLimits {
        max_connections: s
            .max_connections
            .unwrap_or_else(server::auto_max_connections),
        header_timeout: s.header_timeout,
        stall_timeout: s.stall_timeout,
        max_header_bytes: usize::try_from(s.max_header_bytes).unwrap_or(usize::MAX),
    };
    tracing::info!(
        max_connections = limits.max_connections,
        header_timeout = ?limits.header_timeout,
        stall_timeout = ?limits.stall_timeout,
        max_header_bytes = limits.max_header_bytes,
        "connection limits"
    );
    limits
}

pub fn run(config: &Path, listen: Option<std::net::SocketAddr>) -> anyhow::Result<ExitCode> {
    let text =
        std::fs::read_to_string(config).with_context(|| format!("reading {}", config.display()))?;
    let checked = gateway::check(&text, &ProcessEnv, &[], gateway::Secrets::Required);
    for w in checked.warnings.iter() {
        tracing::warn!(config = %config.display(), "{w}");
    }
    let mut cfg = checked
        .config
        .ok_or_else(|| anyhow::anyhow!("{}: {}", config.display(), checked.errors))?;
    if let Some(addr) = listen {
        cfg.listen = addr;
    }
    let runtime = sluice_cli::runtime(cfg.server.worker_threads)?;
    runtime.block_on(async {
        let Built {
            app,
            ledger,
            cluster,
        } = build(&cfg, config).await?;
        let gw = app.gateway.clone();
        let (hash_tx, hash_rx) = tokio::sync::watch::channel(cfg.shared_hash());
        if let Some(c) = cluster {
            let (tx, rx) = tokio::sync::watch::channel((0, 0));
            tokio::spawn(c.watch(hash_rx, tx));
            tokio::spawn(sluice_gateway::cluster::follow(gw.clone(), rx));
        }
        // Key and tenant changes reach this instance through the shared store too, whether
        // or not Redis answers.
        tokio::spawn(sluice_gateway::cluster::follow_store(gw.clone()));
        let reloads = tokio::spawn(reload_on_hangup(
            gw.clone(),
            config.to_path_buf(),
            cfg.clone(),
            hash_tx,
        ));
        let restored =
            sluice_gateway::walk::metering::restore_accounts(&gw, std::time::SystemTime::now())
                .await?;
        if restored > 0 {
            tracing::info!(tenants = restored, "accounts restored from the ledger");
        }
        let server = Server::bind(app.clone(), cfg.listen, cfg.server.shutdown_grace)
            .await
            .with_context(|| format!("binding {}", cfg.listen))?
            .notice(cfg.server.shutdown_notice)
            .limits(conn_limits(&cfg.server));
        tracing::info!(addr = %server.local_addr()?, "sluice listening");
        let saver = (!cfg.routers.is_empty()).then(|| tokio::spawn(save_routers(gw.clone())));
        let runner = tokio::spawn(app.run_batches());
        match server.run(server::signal()).await? {
            Stopped::Drained => tracing::info!("drained; bye"),
            Stopped::GraceExpired => {
                tracing::warn!("stopped with requests cut by the grace period")
            }
        }
        // The batch runner stopped claiming when the drain began; items it had not ended
        // are sent again at the next start (or by another gateway once their lease ends).
        runner.abort();
        reloads.abort();
        // Every call that finished is in the access log and the ledger before the process ends,
        // its kept trace sent (for up to the export timeout), and what the routers learnt is in
        // the store.
        gw.sync_access_log();
        let traced = gw.clone();
        let wait = cfg.traces.timeout + std::time::Duration::from_secs(1);
        tokio::task::spawn_blocking(move || traced.close_traces(wait)).await?;
        if let Some(saver) = saver {
            saver.abort();
            gw.save_routers().await?;
        }
        if let Some((ledger, writer)) = ledger {
            ledger.flush().await?;
            let stats = ledger.stats();
            tracing::info!(committed = stats.committed, "ledger flushed");
            drop(ledger);
            writer.abort();
        }
        Ok(ExitCode::SUCCESS)
    })
}
