use futures::FutureExt;
use futures::future::BoxFuture;
use sluice_providers::{UpstreamCall, UpstreamResponse};

use super::*;

struct Nothing;
impl Provider for Nothing {
    fn call(&self, _: UpstreamCall) -> BoxFuture<'static, Result<UpstreamResponse, GatewayError>> {
        futures::future::ready(Err(GatewayError::new(ErrorKind::Internal, "unused"))).boxed()
    }
}

fn dep(name: &str, weight: u32) -> Deployment {
    Deployment {
        name: Arc::from(name),
        provider: Arc::new(Nothing),
        model: Arc::from("m"),
        weight,
        price: None,
        info: None,
        limiter: None,
        breaker: None,
        hints: None,
    }
}

#[test]
fn traffic_follows_weights() {
    let routes = Routes::new(
        vec![ModelGroup::new(
            "chat",
            vec![dep("a", 3), dep("b", 1)],
            None,
        )],
        7,
    );
    let g = routes.group("chat").unwrap();
    let mut a = 0;
    for i in 0..10_000 {
        let id = RequestId::from_client_or_generate(Some(&format!("req-{i}")));
        if &*routes.pick(g, &id).unwrap().name == "a" {
            a += 1;
        }
    }
    assert!(
        (7_200..7_800).contains(&a),
        "{a} of 10000 went to the weight-3 deployment"
    );
}

#[test]
fn hedges_go_to_another_deployment_by_weight() {
    let group = ModelGroup::new("chat", vec![dep("a", 1), dep("b", 3), dep("c", 1)], None);
    let routes = Routes::new(Vec::new(), 5);
    let a = &group.deployments[0];
    let mut b = 0;
    let id = |i: u32| RequestId::from_client_or_generate(Some(&format!("r{i}")));
    for i in 0..4_000 {
        let d = routes.pick_other(&group, a, &id(i), |_| true).unwrap();
        assert_ne!(&*d.name, "a");
        if &*d.name == "b" {
            b += 1;
        }
    }
    assert!(
        (2_800..3_200).contains(&b),
        "{b} of 4000 to the weight-3 deployment"
    );
    let single = ModelGroup::new("one", vec![dep("only", 1)], None);
    let only = routes.pick_other(&single, &single.deployments[0], &id(0), |_| true);
    assert_eq!(&*only.unwrap().name, "only");
    let not_b = |d: &Deployment| &*d.name != "b";
    for i in 0..100 {
        assert_eq!(
            &*routes.pick_other(&group, a, &id(i), not_b).unwrap().name,
            "c"
        );
    }
    // Nothing else available: the same deployment again, unless it is unavailable too.
    let only_a = |d: &Deployment| &*d.name == "a";
    assert_eq!(
        &*routes.pick_other(&group, a, &id(0), only_a).unwrap().name,
        "a"
    );
    assert!(routes.pick_other(&group, a, &id(0), |_| false).is_none());
}

#[test]
fn a_request_goes_to_the_same_deployment_whatever_came_before() {
    let routes = Routes::new(
        vec![ModelGroup::new(
            "chat",
            vec![dep("a", 1), dep("b", 1)],
            None,
        )],
        9,
    );
    let g = routes.group("chat").unwrap();
    let id = RequestId::from_client_or_generate(Some("doc-17"));
    let first = routes.pick(g, &id).unwrap().name.clone();
    for i in 0..50 {
        let other = RequestId::from_client_or_generate(Some(&format!("x{i}")));
        let _ = routes.pick(g, &other);
        assert_eq!(routes.pick(g, &id).unwrap().name, first);
    }
}

#[test]
fn unknown_models_are_404_and_list_the_known_ones() {
    let routes = Routes::new(vec![ModelGroup::new("chat", vec![dep("a", 1)], None)], 1);
    let e = routes.group("gpt-9").unwrap_err();
    assert_eq!(e.kind, ErrorKind::ModelNotFound);
    assert!(e.message.contains("chat"));
}

/// A caller restricted to some models learns only their names from a 404.
#[test]
fn a_404_names_only_the_models_the_caller_may_use() {
    let routes = Routes::new(
        vec![
            ModelGroup::new("chat", vec![dep("a", 1)], None),
            ModelGroup::new("secret-finetune", vec![dep("b", 1)], None),
        ],
        1,
    );
    let e = routes.group_among("gpt-9", |g| g == "chat").unwrap_err();
    assert_eq!(e.kind, ErrorKind::ModelNotFound);
    assert!(
        e.message.ends_with("models you may use: chat"),
        "{}",
        e.message
    );
    let e = routes.group_among("gpt-9", |_| false).unwrap_err();
    assert_eq!(e.message, "model `gpt-9` does not exist");
    assert!(
        routes
            .group("gpt-9")
            .unwrap_err()
            .message
            .contains("secret-finetune")
    );
}

#[test]
fn affinity_prefers_where_a_prefix_went_and_spills_when_it_is_sick() {
    use sluice_tail::BreakerPolicy;

    let mut deps = vec![dep("a", 1), dep("b", 1), dep("c", 1)];
    for d in &mut deps {
        d.breaker = Some(Arc::new(Mutex::new(Breaker::new(
            BreakerPolicy {
                consecutive_failures: 1,
                ..BreakerPolicy::default()
            },
            Instant::now(),
        ))));
    }
    let routes = Routes::new(
        vec![ModelGroup::new("chat", deps, None).with_affinity(Some(AffinityPolicy::default()))],
        3,
    );
    let g = routes.group("chat").unwrap();
    let ask = Ask {
        lane: 0,
        tenant: Arc::from(""),
        tokens: 1,
        deadline: None,
    };
    let request = |q: u32| {
        let doc = "d".repeat(8192);
        ChatRequest::parse(
            format!(r#"{{"model":"chat","messages":[{{"role":"user","content":"{doc} q{q}"}}]}}"#)
                .as_bytes(),
        )
        .unwrap()
    };
    let id = |q: u32| RequestId::from_client_or_generate(Some(&format!("q{q}")));
    let p0 = g.prefixes(&request(0)).unwrap();
    let (first, by_prefix) = routes.pick_available(g, &id(0), &ask, Some(&p0)).unwrap();
    assert!(!by_prefix, "nothing remembered yet: by weight");
    let first = first.name.clone();
    for q in 1..20 {
        let p = g.prefixes(&request(q)).unwrap();
        let (d, by_prefix) = routes.pick_available(g, &id(q), &ask, Some(&p)).unwrap();
        assert_eq!(d.name, first, "question {q}");
        assert!(by_prefix);
    }
    // Its breaker opens: the prefix goes elsewhere, and stays there.
    let sick = g.deployments.iter().find(|d| d.name == first).unwrap();
    let failed = Verdict {
        ok: false,
        took: Duration::from_millis(5),
    };
    sick.record_health(Instant::now(), Some(failed));
    assert!(!sick.healthy(Instant::now()));
    let p = g.prefixes(&request(20)).unwrap();
    let (moved, by_prefix) = routes.pick_available(g, &id(20), &ask, Some(&p)).unwrap();
    assert_ne!(moved.name, first);
    assert!(
        !by_prefix,
        "the remembered deployment is sick: it did not decide"
    );
    let p = g.prefixes(&request(21)).unwrap();
    let (again, by_prefix) = routes.pick_available(g, &id(21), &ask, Some(&p)).unwrap();
    assert_eq!((&again.name, by_prefix), (&moved.name, true));
}
