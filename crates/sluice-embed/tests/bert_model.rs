//! The BERT embedder on all-MiniLM-L6-v2 as `scripts/install-embedder --minilm` installs it
//! (`./scripts/test` installs it and says where in `SLUICE_MINILM_DIR`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use sluice_embed::Embedder;

fn model_dir() -> PathBuf {
    let Ok(dir) = std::env::var("SLUICE_MINILM_DIR") else {
        panic!(
            "SLUICE_MINILM_DIR is not set: run ./scripts/test, which installs the model, or \
             scripts/install-embedder --minilm DIR and point it there"
        );
    };
    PathBuf::from(dir)
}

fn cos(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[tokio::test]
async fn a_bert_folder_loads_as_an_encoder_that_tells_paraphrases_from_other_questions() {
    let e = Embedder::load(&model_dir()).unwrap();
    assert!(e.name().starts_with("bert:"), "{}", e.name());
    assert_eq!(e.dim(), Some(384));
    assert!(e.is_local());
    let one = |t: &str| e.embed_local(t).unwrap().unwrap();
    let a = one("How do I reset my password?");
    let b = one("I forgot my password, what do I do?");
    let c = one("What is the capital of Australia?");
    let norm: f32 = a.iter().map(|x| x * x).sum();
    assert!((norm - 1.0).abs() < 1e-4, "{norm}");
    let (close, far) = (cos(&a, &b), cos(&a, &c));
    assert!(close > 0.6 && far < 0.2, "{close} {far}");
    assert_eq!(a, one("How do I reset my password?"));
    // Asked the way an upstream is, the same vectors in the same order.
    let both = e
        .embed(
            &[
                "What is the capital of Australia?",
                "How do I reset my password?",
            ],
            "r",
        )
        .await
        .unwrap();
    assert_eq!(both.len(), 2);
    assert!(cos(&both[0], &c) > 0.9999 && cos(&both[1], &a) > 0.9999);
    // A text longer than the model's window is cut, not refused.
    let long = "clause ".repeat(2000);
    assert_eq!(one(&long).len(), 384);
}
