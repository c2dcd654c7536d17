//! Acceptance of the automatic router, in virtual time through the real gateway stack: the
//! `token-economy` scenario (six task classes, cheap/mid/strong at 1x/3x/10x the price, a
//! simulated judge sending its verdicts to `/v1/feedback`) replayed under four policies in
//! the same test: the router, an oracle task route that knows each class's cheapest good
//! enough model, always the strong model, and the static choice of the cheapest model that
//! passes the floor on average. Then a cheaper model is added, and a model gets worse.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use sluice_core::CallRecord;
use sluice_gateway::GatewayBuilder;
use sluice_routing::rules::{Rule, TaskRoute};
use sluice_sim::harness::{self, Report};
use sluice_sim::scenario::Scenario;

/// Requests of the warm-up, left out of the bills compared.
const WARM_UP: usize = 2_000;
const FLOOR: f64 = 0.8;
const CLASSES: usize = 6;

fn scenario() -> Scenario {
    let mut s = Scenario::builtin("token-economy").unwrap().unwrap();
    // Another seed replays the same test on other traffic and verdicts (the spread in
    // docs/rehearsing.md).
    if let Ok(v) = std::env::var("TOKEN_ECONOMY_SEED") {
        s.meta.seed = v.parse().unwrap();
    }
    s
}

fn sent_to(mut s: Scenario, model: &str) -> Scenario {
    for t in &mut s.traffic {
        t.model = model.to_string();
    }
    s
}

fn quality(s: &Scenario, group: &str, class: usize) -> f64 {
    let (_, up) = s.upstreams.iter().find(|(n, _)| n == group).unwrap();
    up.quality_for(Some(&format!("class-{class}")))
}

fn price(s: &Scenario, group: &str) -> f64 {
    let (_, up) = s.upstreams.iter().find(|(n, _)| n == group).unwrap();
    up.price.unwrap().output
}

/// The groups by price, cheapest first.
fn by_price(s: &Scenario) -> Vec<String> {
    let mut g: Vec<String> = s.models.iter().map(|(n, _)| n.clone()).collect();
    g.sort_by(|a, b| price(s, a).total_cmp(&price(s, b)));
    g
}

/// A task route sending each class to its cheapest good-enough group: what an oracle would.
fn oracle(s: &Scenario) -> TaskRoute {
    let groups = by_price(s);
    let rules = (0..CLASSES)
        .map(|c| {
            let g = groups
                .iter()
                .find(|g| quality(s, g, c) >= FLOOR)
                .unwrap_or(&groups[groups.len() - 1]);
            Rule {
                name: Arc::from(format!("class-{c}").as_str()),
                group: Arc::from(g.as_str()),
                task: vec![format!("class-{c}")],
                ..Rule::default()
            }
        })
        .collect();
    TaskRoute {
        name: Arc::from("oracle"),
        rules,
        default: Arc::from(groups[groups.len() - 1].as_str()),
    }
}

/// The cheapest group whose quality, averaged over the classes, passes the floor.
fn static_choice(s: &Scenario) -> String {
    by_price(s)
        .into_iter()
        .find(|g| (0..CLASSES).map(|c| quality(s, g, c)).sum::<f64>() / CLASSES as f64 >= FLOOR)
        .unwrap()
}

fn index(r: &CallRecord) -> usize {
    let id = r.request_id.as_str();
    id.rsplit('-').next().unwrap().parse().unwrap()
}

#[derive(Debug)]
struct Bill {
    /// USD per request.
    cost: f64,
    /// Share of answers judged good.
    good: f64,
    requests: usize,
}

fn bill(report: &Report, records: &[CallRecord], from: usize) -> Bill {
    let kept: Vec<&CallRecord> = records.iter().filter(|r| index(r) >= from).collect();
    let micros: u64 = kept
        .iter()
        .map(|r| r.cost_micros.unwrap_or(0) + r.extra_cost_micros)
        .sum();
    let judged: Vec<bool> = report
        .verdicts
        .iter()
        .filter(|v| v.index >= from)
        .map(|v| v.good)
        .collect();
    assert_eq!(judged.len(), kept.len(), "every answer was judged");
    assert!(kept.iter().all(|r| r.status == 200));
    Bill {
        cost: micros as f64 / 1e6 / kept.len() as f64,
        good: judged.iter().filter(|g| **g).count() as f64 / judged.len() as f64,
        requests: kept.len(),
    }
}

fn run(s: &Scenario, b: GatewayBuilder) -> (Report, Vec<CallRecord>) {
    harness::run_recorded(s, b).unwrap()
}

/// Of the requests from `from` on, per class, the share `group` answered.
fn shares(records: &[CallRecord], from: usize, group: &str) -> BTreeMap<usize, f64> {
    let mut out = BTreeMap::new();
    for c in 0..CLASSES {
        let of: Vec<&CallRecord> = records
            .iter()
            .filter(|r| index(r) >= from && index(r) % CLASSES == c)
            .collect();
        let n = of
            .iter()
            .filter(|r| r.model_group.as_deref() == Some(group))
            .count();
        out.insert(c, n as f64 / of.len().max(1) as f64);
    }
    out
}

#[test]
fn the_router_costs_near_the_oracle_at_its_quality_and_beats_the_static_routes() {
    let s = scenario();
    let n = s.workload().requests.len();
    assert!((7_800..8_200).contains(&n), "{n}");
    let (auto_report, auto_records) = run(&s, GatewayBuilder::new());
    let auto = bill(&auto_report, &auto_records, WARM_UP);
    let o = sent_to(s.clone(), "oracle");
    let (oracle_report, oracle_records) = run(&o, GatewayBuilder::new().task_route(oracle(&s)));
    let oracle = bill(&oracle_report, &oracle_records, WARM_UP);
    let (strong_report, strong_records) = run(&sent_to(s.clone(), "strong"), GatewayBuilder::new());
    let strong = bill(&strong_report, &strong_records, WARM_UP);
    let fixed = static_choice(&s);
    assert_eq!(fixed, "mid", "the mix's average passes the floor on mid");
    let (static_report, static_records) = run(&sent_to(s.clone(), &fixed), GatewayBuilder::new());
    let fixed_bill = bill(&static_report, &static_records, WARM_UP);
    eprintln!(
        "after {WARM_UP} requests of warm-up, {} requests each, USD/request and good answers:\n  \
         router {:.7} {:.3}\n  oracle {:.7} {:.3}\n  strong {:.7} {:.3}\n  static {fixed} {:.7} {:.3}\n  \
         router/oracle cost {:.3}x, good {:.3}x; router/strong cost {:.3}x; oracle/strong {:.3}x",
        auto.requests,
        auto.cost,
        auto.good,
        oracle.cost,
        oracle.good,
        strong.cost,
        strong.good,
        fixed_bill.cost,
        fixed_bill.good,
        auto.cost / oracle.cost,
        auto.good / oracle.good,
        auto.cost / strong.cost,
        oracle.cost / strong.cost,
    );
    assert!(auto.cost <= 1.15 * oracle.cost, "{auto:?} vs {oracle:?}");
    assert!(auto.good >= 0.98 * oracle.good, "{auto:?} vs {oracle:?}");
    assert!(auto.cost <= 0.4 * strong.cost, "{auto:?} vs {strong:?}");
    // The static route is cheaper than any route that serves the last class well: it buys
    // that with the last class's bad answers. The router beats it on good answers.
    assert!(
        auto.good > fixed_bill.good + 0.03,
        "{auto:?} vs {fixed_bill:?}"
    );
    // Every choice was explained.
    let r = &auto_records[auto_records.len() - 1];
    let choice = r.route.as_ref().unwrap().auto.as_ref().unwrap();
    assert_eq!(choice.candidates.len(), 3);
}

/// The scenario from what a first run learnt, for 1,000 more requests.
fn continued(mut s: Scenario, learnt: &Report) -> (Scenario, GatewayBuilder) {
    s.meta.duration = Duration::from_secs(50);
    s.meta.seed += 1;
    let mut b = GatewayBuilder::new();
    for (name, stored) in &learnt.routers {
        b = b.router_state(name, stored.clone());
    }
    (s, b)
}

#[test]
fn a_cheaper_model_added_later_carries_its_classes_within_a_thousand_requests() {
    let s = scenario();
    let (first, _) = run(&s, GatewayBuilder::new());
    let (mut s, b) = continued(s, &first);
    // A fourth model at half the cheap one's price, as good as mid for classes 0 to 4
    // (capped at 0.93), bad at the last.
    let mut spec = s
        .upstreams
        .iter()
        .find(|(n, _)| n == "mid")
        .unwrap()
        .1
        .clone();
    spec.price = Some(sluice_sim::spec::SimPrice {
        input: 0.05,
        output: 0.2,
        cached_input: None,
    });
    for (task, q) in spec.quality.iter_mut() {
        *q = if task == "class-5" { 0.5 } else { q.min(0.93) };
    }
    s.upstreams.push(("cheaper".into(), spec));
    let mut group = s.models[0].1.clone();
    group.deployments[0].provider = "cheaper".into();
    group.deployments[0].model = "sim-cheaper".into();
    s.models.push(("cheaper".into(), group));
    s.routers[0].1.candidates.push("cheaper".into());
    let n = s.workload().requests.len();
    assert!((900..1_100).contains(&n), "{n}");
    let (_, records) = run(&s, b);
    let late = shares(&records, 800, "cheaper");
    eprintln!("the newcomer's share of each class over requests 800-999: {late:?}");
    // Most of its classes: more than half of each of at least three of the five.
    let carried = (0..5).filter(|c| late[c] > 0.5).count();
    assert!(
        carried >= 3,
        "it carries {carried} of its 5 classes: {late:?}"
    );
    assert!(late[&5] < 0.2, "{late:?}");
}

#[test]
fn a_model_that_got_worse_is_left_within_a_thousand_requests() {
    let s = scenario();
    let (first, first_records) = run(&s, GatewayBuilder::new());
    let before = shares(&first_records, WARM_UP, "cheap");
    assert!(before[&0] > 0.8, "cheap carried class 0: {before:?}");
    let (mut s, b) = continued(s, &first);
    let cheap = &mut s
        .upstreams
        .iter_mut()
        .find(|(n, _)| n == "cheap")
        .unwrap()
        .1;
    cheap.quality.insert("class-0".into(), 0.5);
    let (_, records) = run(&s, b);
    let late = shares(&records, 800, "cheap");
    eprintln!(
        "cheap's share of each class over requests 800-999 after class 0 got worse: {late:?}"
    );
    // Left: no longer chosen for class 0 but by budgeted exploration or revisits (shares of
    // 0.15 and 0.05, seen over some 33 requests here).
    let late0: Vec<&CallRecord> = records
        .iter()
        .filter(|r| index(r) >= 800 && index(r).is_multiple_of(CLASSES))
        .filter(|r| r.model_group.as_deref() == Some("cheap"))
        .collect();
    let exploited = late0
        .iter()
        .filter(|r| !["explore", "revisit"].contains(&r.route.as_ref().unwrap().rule.as_ref()))
        .count();
    assert_eq!(exploited, 0, "{late:?}");
    assert!(late[&0] <= 0.2, "{late:?}");
    assert!(
        late[&1] > 0.8,
        "the classes it still serves well stay: {late:?}"
    );
}
