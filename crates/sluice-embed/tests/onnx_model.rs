//! The ONNX embedder on all-MiniLM-L6-v2 quantized as `scripts/install-embedder --onnx`
//! installs it (`./scripts/test` installs it and says where in `SLUICE_ONNX_DIR`), against
//! the same encoder run by candle in f32 (`SLUICE_MINILM_DIR`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use sluice_embed::Embedder;

fn dir(var: &str, flag: &str) -> PathBuf {
    let Ok(dir) = std::env::var(var) else {
        panic!(
            "{var} is not set: run ./scripts/test, which installs the model, or \
             scripts/install-embedder {flag} DIR and point it there"
        );
    };
    PathBuf::from(dir)
}

fn cos(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[tokio::test]
async fn the_onnx_encoder_agrees_with_the_f32_one_and_tells_paraphrases_apart() {
    let onnx = Embedder::load(&dir("SLUICE_ONNX_DIR", "--onnx")).unwrap();
    assert!(onnx.name().starts_with("onnx:"), "{}", onnx.name());
    assert_eq!(onnx.dim(), Some(384));
    assert!(onnx.is_local());
    let f32s = Embedder::load(&dir("SLUICE_MINILM_DIR", "--minilm")).unwrap();
    let texts = [
        "How do I reset my password?",
        "I forgot my password, what do I do?",
        "What is the capital of Australia?",
        "Can the supplier end this agreement without giving a reason?",
        "退款政策是什么？",
        "clause ",
    ];
    let one = |e: &Embedder, t: &str| e.embed_local(t).unwrap().unwrap();
    // The dense layers compute in int8: each vector within 0.98 of the f32 one, 0.99 on
    // average.
    let mut sum = 0.0;
    for t in texts {
        let (a, b) = (one(&onnx, t), one(&f32s, t));
        let norm: f32 = a.iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
        assert!(cos(&a, &b) > 0.98, "{t}: {}", cos(&a, &b));
        sum += cos(&a, &b);
    }
    assert!(
        sum / texts.len() as f32 > 0.99,
        "{}",
        sum / texts.len() as f32
    );
    let a = one(&onnx, texts[0]);
    let (close, far) = (
        cos(&a, &one(&onnx, texts[1])),
        cos(&a, &one(&onnx, texts[2])),
    );
    assert!(close > 0.6 && far < 0.2, "{close} {far}");
    let both = onnx.embed(&[texts[2], texts[0]], "r").await.unwrap();
    assert!(cos(&both[1], &a) > 0.9999);
    let long = "clause ".repeat(2000);
    assert_eq!(
        one(&onnx, &long).len(),
        384,
        "cut to the window, not refused"
    );
}

#[test]
fn a_folder_without_the_runtime_names_the_missing_file() {
    let tmp = std::env::temp_dir().join(format!("sluice-onnx-missing-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(tmp.join("model.onnx"), b"not a model").unwrap();
    let err = Embedder::load(&tmp).unwrap_err().to_string();
    assert!(
        err.contains("tokenizer.json") && err.contains("--onnx"),
        "{err}"
    );
}
