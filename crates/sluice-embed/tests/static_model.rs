//! The default embedder on the model `scripts/install-embedder` installs (`./scripts/test`
//! installs it and says where in `SLUICE_EMBEDDER_DIR`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use sluice_embed::Embedder;

fn model_dir() -> PathBuf {
    let Ok(dir) = std::env::var("SLUICE_EMBEDDER_DIR") else {
        panic!(
            "SLUICE_EMBEDDER_DIR is not set: run ./scripts/test, which installs the model, or \
             scripts/install-embedder DIR and point it there"
        );
    };
    PathBuf::from(dir)
}

fn cos(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[tokio::test]
async fn paraphrases_are_closer_than_unrelated_questions() {
    let e = Embedder::load(&model_dir()).unwrap();
    assert_eq!(e.dim(), Some(64));
    assert!(e.is_local());
    let one = |t: &str| e.embed_local(t).unwrap().unwrap();
    let a = one("How do I reset my password?");
    let b = one("What is the procedure to change my password?");
    let c = one("The weather in Paris is sunny today.");
    let norm: f32 = a.iter().map(|x| x * x).sum();
    assert!((norm - 1.0).abs() < 1e-4, "{norm}");
    let (close, far) = (cos(&a, &b), cos(&a, &c));
    assert!(close > 0.6 && far < 0.3 && close > far, "{close} {far}");
    // The same text, the same vector.
    assert_eq!(a, one("How do I reset my password?"));
    // Asked the way an upstream is, the same vectors in the same order.
    let both = e
        .embed(
            &[
                "How do I reset my password?",
                "The weather in Paris is sunny today.",
            ],
            "r",
        )
        .await
        .unwrap();
    assert_eq!(both, vec![a.clone(), c.clone()]);
    assert!(e.name().starts_with("static:"));
}
