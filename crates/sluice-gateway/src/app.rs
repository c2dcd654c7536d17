//! What one sluice process serves: the walk's gateway, and the work that calls the walk as a
//! client would (batch jobs, document analyses), each holding the walker. The one place
//! that knows all of them: the gateway and its builder know none of the work built on them.

use std::path::Path;
use std::sync::Arc;

use axum::extract::FromRef;
use sluice_analysis::Analyzer;
use sluice_batch::Jobs;
use sluice_config::gateway::GatewayConfig;

use crate::analyses::{self, Analyses, AnalysisSettings};
use crate::batches::{self, BatchSettings, Batches, Documents};
use crate::walk::Walker;
use crate::{BuildError, Gateway};

/// A gateway and the work served beside its walk.
#[derive(Clone, Debug)]
pub struct App {
    /// The walk's shared state.
    pub gateway: Arc<Gateway>,
    /// Batch jobs, when served.
    pub batches: Option<Arc<Batches>>,
    /// Document analyses, when served.
    pub analyses: Option<Arc<Analyses>>,
}

impl From<Arc<Gateway>> for App {
    fn from(gateway: Arc<Gateway>) -> Self {
        Self::new(gateway)
    }
}

impl FromRef<App> for Arc<Gateway> {
    fn from_ref(app: &App) -> Self {
        app.gateway.clone()
    }
}

impl FromRef<App> for batches::Served {
    fn from_ref(app: &App) -> Self {
        batches::Served {
            gw: app.gateway.clone(),
            batches: app.batches.clone(),
            analyses: app.analyses.is_some(),
        }
    }
}

impl FromRef<App> for analyses::Served {
    fn from_ref(app: &App) -> Self {
        analyses::Served {
            gw: app.gateway.clone(),
            analyses: app.analyses.clone(),
            batches: app.batches.clone(),
        }
    }
}

impl App {
    /// `gateway`, serving nothing but its walk and admin.
    pub fn new(gateway: Arc<Gateway>) -> Self {
        Self {
            gateway,
            batches: None,
            analyses: None,
        }
    }

    /// The walker every caller of the walk holds.
    pub fn walker(&self) -> Walker {
        Walker::new(self.gateway.clone())
    }

    /// The index of lane `named` among the gateway's lanes, else `batch`, else the last.
    fn lane(&self, named: Option<&str>) -> usize {
        let lanes = self.gateway.lanes();
        let by_name = |name: &str| lanes.iter().position(|l| &*l.name == name);
        named
            .and_then(by_name)
            .or_else(|| by_name("batch"))
            .unwrap_or(lanes.len().saturating_sub(1))
    }

    /// Serves batch jobs kept in `jobs` (the ledger's database), run as `settings` says;
    /// `lane` names their lane (`None`: `batch`, else the last lane).
    pub fn batches(mut self, jobs: Jobs, mut settings: BatchSettings, lane: Option<&str>) -> Self {
        settings.lane = self.lane(lane);
        self.batches = Some(Batches::new(jobs, settings));
        self.link();
        self
    }

    /// Serves `/v1/analyses` with `analyzer`; a batch of documents' reviews wait in lane
    /// `lane` (`None`: `batch`, else the last lane).
    pub fn analyses(
        mut self,
        analyzer: Analyzer,
        mut settings: AnalysisSettings,
        lane: Option<&str>,
    ) -> Self {
        settings.batch_lane = self.lane(lane);
        self.analyses = Some(Arc::new(Analyses::new(analyzer, settings)));
        self.link();
        self
    }

    /// A batch of documents is a batch job whose items analysis runs.
    fn link(&self) {
        if let (Some(b), Some(a)) = (&self.batches, &self.analyses) {
            let documents: Arc<dyn Documents> = a.clone();
            let _ = b.documents.set(documents);
        }
    }

    /// Document analysis as `cfg`'s `[analysis]` says: its rule file read relative to `base`
    /// (the config file's folder), else the shipped rules; its reviews asking for its model,
    /// else the first `[models.*]`; its reports naming the rule set and the reviewer, as
    /// `reviews` says who that is. Nothing when it is off.
    pub fn analysis_from_config(
        self,
        cfg: &GatewayConfig,
        base: &Path,
        reviews: Reviews,
    ) -> Result<Self, BuildError> {
        let a = &cfg.analysis;
        if !a.enabled {
            return Ok(self);
        }
        let (name, text) = match &a.rules {
            Some(path) => {
                let path = base.join(path);
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| BuildError::Rules(format!("{}: {e}", path.display())))?;
                let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
                (stem.unwrap_or_else(|| "rules".into()), text)
            }
            None => (
                "contract-risks".to_owned(),
                sluice_rules::shipped::CONTRACT_RISKS.to_owned(),
            ),
        };
        let rules = sluice_rules::parse(&text).map_err(|e| BuildError::Rules(e.to_string()))?;
        let rule_set = sluice_analysis::RuleSet::of(&name, &text, rules.len());
        let engine =
            sluice_rules::Engine::compile(rules).map_err(|e| BuildError::Rules(e.to_string()))?;
        let model = a
            .model
            .clone()
            .or_else(|| cfg.models.first().map(|(n, _)| n.clone()))
            .unwrap_or_default();
        let options = sluice_analysis::Options {
            review: a.review && !model.is_empty(),
            merge: a.merge,
            pipeline: a.pipeline,
            threads: a.threads as usize,
            deadline: Some(a.deadline),
            made_by: sluice_analysis::MadeBy {
                reviewer: reviewed_by(cfg, &model, reviews),
                rules: rule_set,
            },
            model,
        };
        let settings = AnalysisSettings {
            batch_lane: 0,
            concurrency: a.concurrency as usize,
            max_documents: a.max_documents as usize,
            max_upload_bytes: a.max_upload_bytes,
        };
        let analyzer = Analyzer::new(Arc::new(engine), options);
        Ok(self.analyses(analyzer, settings, a.lane.as_deref()))
    }

    /// Runs the batch jobs until the gateway drains (nothing to do without them).
    pub async fn run_batches(self) {
        let walker = self.walker();
        if let Some(batches) = self.batches {
            batches::runner::run(walker, batches).await;
        }
    }
}

/// Who reviews an analysis' flagged clauses: the configured models, or sluice's simulated
/// reviewer standing in for them (`sluice analyze` without a configuration).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reviews {
    /// The model group the configuration names.
    ByModel,
    /// The simulated reviewer behind the configuration's only group.
    Simulated,
}

/// The reviewer reports name: model `group` with its deployments (none listed for a route
/// or router name, whose group is chosen per request).
fn reviewed_by(
    cfg: &GatewayConfig,
    group: &str,
    reviews: Reviews,
) -> Option<sluice_analysis::ReviewedBy> {
    let deployments = cfg
        .models
        .iter()
        .find(|(n, _)| n == group)
        .map(|(_, g)| g.deployments.iter().map(|d| d.display_name()).collect())
        .unwrap_or_default();
    Some(sluice_analysis::ReviewedBy {
        simulated: reviews == Reviews::Simulated,
        group: group.to_owned(),
        deployments,
    })
}
