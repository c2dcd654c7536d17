//! The analyser with a scripted reviewer in virtual time: merging, the deadline, unreadable
//! and failed reviews, a batch with a broken file, the prompt's stable prefix.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use parking_lot::Mutex;

use super::*;

/// A reviewer that answers each call after `delay` (a clause containing "stall" after 60 s),
/// with a verdict quoting the clause's first words, or with `odd` when the clause holds
/// "gibberish", or fails when it holds "refuse"; it keeps every call.
struct Scripted {
    delay: Duration,
    calls: Mutex<Vec<ReviewCall>>,
}

impl Scripted {
    fn new(delay_ms: u64) -> Arc<Self> {
        Arc::new(Self {
            delay: Duration::from_millis(delay_ms),
            calls: Mutex::new(Vec::new()),
        })
    }
}

impl Reviewer for Scripted {
    fn review(&self, call: ReviewCall) -> BoxFuture<'static, Result<Reviewed, ReviewFailed>> {
        let user = call.body["messages"][1]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        self.calls.lock().push(call);
        let delay = if user.contains("stall") {
            Duration::from_secs(60)
        } else {
            self.delay
        };
        async move {
            tokio::time::sleep(delay).await;
            if user.contains("refuse") {
                return Err(ReviewFailed("429 from the upstream".into()));
            }
            let content = if user.contains("gibberish") {
                "I think this clause is fine.".to_string()
            } else {
                let clause = user.lines().nth(1).unwrap_or_default();
                let quote: String = clause.split_whitespace().take(4).collect::<Vec<_>>().join(" ");
                format!("```json\n{{\"risk\": \"high\", \"quote\": \"{quote}\", \"reason\": \"one-sided\"}}\n```")
            };
            Ok(Reviewed { content, prompt_tokens: 900, cached_tokens: 800, completion_tokens: 40 })
        }
        .boxed()
    }
}

fn analyzer(options: Options) -> Analyzer {
    let engine = Engine::compile(sluice_rules::shipped::contract_risks().unwrap()).unwrap();
    Analyzer::new(Arc::new(engine), options)
}

const CONTRACT: &str = "MASTER SERVICES AGREEMENT\n\n\
1. Term\n\nThis Agreement shall automatically renew for successive periods of one year.\n\n\
2. Liability\n\nIn no event shall the Supplier be liable for any indirect damages or loss of profits.\n\n\
3. Payment\n\nLate payments bear interest at 2% per month.\n\n\
4. Renewal\n\nTHIS AGREEMENT SHALL AUTOMATICALLY RENEW FOR SUCCESSIVE PERIODS OF ONE YEAR.\n\n\
5. Lunch\n\nThe parties may meet for lunch.\n";

#[tokio::test(start_paused = true)]
async fn flagged_clauses_are_reviewed_and_near_identical_ones_merged() {
    let a = analyzer(Options::default());
    let scripted = Scripted::new(800);
    let reviewer: Arc<dyn Reviewer> = scripted.clone();
    let merger = Merger::default();
    let r = a
        .analyze("msa.txt", CONTRACT.as_bytes(), &reviewer, &merger)
        .await
        .unwrap();
    let flagged: Vec<_> = r
        .findings
        .iter()
        .map(|f| f.number.as_deref().unwrap_or(""))
        .collect();
    assert_eq!(flagged, ["1", "2", "3", "4"], "{:#?}", r.findings);
    assert_eq!(r.calls.sent, 3, "the two renewal clauses share a review");
    assert_eq!(r.calls.merged, 1);
    assert_eq!(scripted.calls.lock().len(), 3);
    assert!(
        matches!(&r.findings[3].review, Review::Reviewed { merged: true, verdict } if verdict.risk == "high")
    );
    assert!(r.findings[0].rules.iter().any(|x| x.id == "renew-auto"));
    assert_eq!(r.calls.answered, 4);
    assert_eq!(
        r.calls.prompt_tokens,
        3 * 900,
        "a merged review costs nothing"
    );
    assert!(r.on_time);
    // Virtual time: the reviews ran side by side, so the document took one review's time.
    assert!((r.timings.total_ms - 800.0).abs() < 1.0, "{:?}", r.timings);
    assert!((r.timings.waiting_ms - 800.0).abs() < 1.0);
    // The same clause in another document of the batch is merged too.
    let again = a
        .analyze("copy.txt", CONTRACT.as_bytes(), &reviewer, &merger)
        .await
        .unwrap();
    assert_eq!(again.calls.sent, 0);
    assert_eq!(again.calls.merged, 4);
    assert_eq!(merger.merged(), 5);
}

#[tokio::test(start_paused = true)]
async fn numbers_keep_clauses_apart() {
    let a = analyzer(Options::default());
    let reviewer: Arc<dyn Reviewer> = Scripted::new(10);
    let text = "1. Either party may terminate this Agreement for convenience on 30 days' notice.\n\n\
                2. Either party may terminate this Agreement for convenience on 90 days' notice.\n";
    let r = a
        .analyze("t.txt", text.as_bytes(), &reviewer, &Merger::default())
        .await
        .unwrap();
    assert_eq!(r.findings.len(), 2);
    assert_eq!((r.calls.sent, r.calls.merged), (2, 0));
}

#[tokio::test(start_paused = true)]
async fn clauses_of_one_kind_in_a_document_share_a_review_unless_their_turning_words_differ() {
    let a = analyzer(Options::default());
    let scripted = Scripted::new(10);
    let reviewer: Arc<dyn Reviewer> = scripted.clone();
    // Three clauses the open-source rule flags on the same words, two of them with the same
    // turning words ("may"), worded differently; the third "must not".
    let text = "1. You may convey the Corresponding Source of the work in object code form.\n\n\
                2. You may charge a fee for each copy of the Corresponding Source you convey.\n\n\
                3. You must not withhold the Corresponding Source from any recipient.\n";
    let merger = Merger::default();
    let r = a
        .analyze("gpl.txt", text.as_bytes(), &reviewer, &merger)
        .await
        .unwrap();
    assert_eq!(r.findings.len(), 3, "{:#?}", r.findings);
    assert_eq!((r.calls.sent, r.calls.merged), (2, 1), "{:#?}", r.findings);
    // A clause of another document is not of gpl.txt's kind: across documents only
    // near-identical clauses merge.
    let other = "1. You may convey the Corresponding Source in another form entirely.\n";
    let r = a
        .analyze("other.txt", other.as_bytes(), &reviewer, &merger)
        .await
        .unwrap();
    assert_eq!((r.calls.sent, r.calls.merged), (1, 0));
    let kind = |t: &str| merge::Kind::of("d", sluice_documents::ClauseKind::Clause, "x", t);
    assert_eq!(kind("You shall not assign.").turns, ["not", "shall"]);
    assert_eq!(kind("Notwithstanding anything.").turns, Vec::<&str>::new());
    assert_eq!(kind("双方应当合理协商。").turns, ["应当", "双方", "合理"]);
}

#[tokio::test(start_paused = true)]
async fn the_deadline_cuts_slow_reviews_and_the_report_comes_on_time() {
    let a = analyzer(Options {
        deadline: Some(Duration::from_secs(10)),
        ..Options::default()
    });
    let scripted = Scripted::new(500);
    let reviewer: Arc<dyn Reviewer> = scripted.clone();
    let text = "1. This Agreement shall automatically renew each year.\n\n\
                2. In no event shall the Supplier be liable for lost profits (stall).\n";
    let r = a
        .analyze("t.txt", text.as_bytes(), &reviewer, &Merger::default())
        .await
        .unwrap();
    assert!(matches!(r.findings[0].review, Review::Reviewed { .. }));
    assert_eq!(r.findings[1].review, Review::TimedOut);
    assert_eq!(r.calls.timed_out, 1);
    assert!(!r.on_time);
    assert!(
        (r.timings.total_ms - 10_000.0).abs() < 1.0,
        "{:?}",
        r.timings
    );
    let timeout = scripted.calls.lock()[1].timeout.unwrap();
    assert_eq!(
        timeout,
        Duration::from_secs(10),
        "the time left goes with the call"
    );
}

#[tokio::test(start_paused = true)]
async fn unreadable_and_failed_reviews_are_reported_not_dropped() {
    let a = analyzer(Options::default());
    let reviewer: Arc<dyn Reviewer> = Scripted::new(100);
    let text = "1. This Agreement shall automatically renew (gibberish).\n\n\
                2. In no event shall the Supplier be liable for lost profits (refuse).\n";
    let r = a
        .analyze("t.txt", text.as_bytes(), &reviewer, &Merger::default())
        .await
        .unwrap();
    match &r.findings[0].review {
        Review::Unparseable { why, answer } => {
            assert_eq!(why, "the answer holds no JSON object");
            assert_eq!(answer, "I think this clause is fine.");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        r.findings[1].review,
        Review::Failed {
            why: "429 from the upstream".into()
        }
    );
    assert_eq!(
        (r.calls.unparseable, r.calls.failed, r.calls.answered),
        (1, 1, 0)
    );
    let md = r.markdown();
    assert!(
        md.contains("| unreadable | the answer holds no JSON object |"),
        "{md}"
    );
    assert!(md.contains("| failed | 429 from the upstream |"), "{md}");
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["findings"][0]["review"]["status"], "unparseable");
    assert_eq!(json["findings"][1]["rules"][0]["severity"], "medium");
    // A report kept as JSON (a batch's output line) reads back as it was.
    let back: Report = serde_json::from_value(json).unwrap();
    assert_eq!(back, r);
}

#[tokio::test(start_paused = true)]
async fn a_batch_goes_on_past_a_broken_file_and_sums_up() {
    let a = analyzer(Options::default());
    let reviewer: Arc<dyn Reviewer> = Scripted::new(200);
    let mut docs: Vec<(String, Vec<u8>)> = (0..5)
        .map(|i| (format!("c{i}.txt"), CONTRACT.as_bytes().to_vec()))
        .collect();
    docs.insert(2, ("broken.pdf".into(), b"%PDF-1.7 nothing".to_vec()));
    docs.push((
        "zh.txt".into(),
        include_bytes!("../../sluice-documents/fixtures/contract-zh.txt").to_vec(),
    ));
    let progress = Progress::default();
    let (reports, summary) = a.analyze_batch(docs, &reviewer, 2, &progress).await;
    assert_eq!(reports.len(), 6);
    assert_eq!(summary.refused.len(), 1);
    assert!(
        summary.refused[0]
            .error
            .starts_with("broken.pdf: not a readable PDF file")
    );
    assert_eq!(progress.line(), "queued 0/7, running 0, done 7/7");
    let zh = reports.iter().find(|r| r.document == "zh.txt").unwrap();
    let rules: Vec<_> = zh
        .findings
        .iter()
        .flat_map(|f| f.rules.iter().map(|r| r.id.as_str()))
        .collect();
    for id in [
        "zh-renew-auto",
        "zh-data-crossborder",
        "zh-term-convenience",
        "zh-law-court",
    ] {
        assert!(rules.contains(&id), "{id}: {rules:?}");
    }
    assert_eq!(
        summary.calls.sent,
        3 + zh.calls.sent,
        "the English contract reviewed once for the batch"
    );
    assert_eq!(summary.calls.merged, 1 + 4 * 4);
    assert!(summary.markdown().contains("refused: broken.pdf"));
}

#[test]
fn the_prefix_is_the_same_for_every_clause() {
    let a = analyzer(Options::default());
    let rules = a.engine().rules();
    let one = a.prompt().request("a#1@0", "text one", &[&rules[0]]);
    let two = a
        .prompt()
        .request("b#2@9", "text two", &[&rules[5], &rules[9]]);
    assert_eq!(one["messages"][0], two["messages"][0]);
    assert!(a.prompt().catalogued(), "210 rules fit in the prefix");
    assert!(
        one["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("renew-auto")
    );
    let big = Prompt::new(&sluice_rules::shipped::generated(2_000).unwrap(), "m");
    assert!(!big.catalogued());
    let r = big.request("a", "t", &[&rules[0]]);
    assert!(
        r["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains(&rules[0].explanation)
    );
}

#[test]
fn verdicts_are_read_or_refused_with_why() {
    let v = review::verdict("{\"risk\":\"low\",\"quote\":\"q\",\"reason\":\"r\"}").unwrap();
    assert_eq!(v.risk, "low");
    assert!(
        review::verdict("{\"risk\":\"maybe\",\"quote\":\"q\",\"reason\":\"r\"}")
            .unwrap_err()
            .contains("maybe")
    );
    assert!(
        review::verdict("{\"risk\":\"low\"}")
            .unwrap_err()
            .contains("missing field")
    );
}
