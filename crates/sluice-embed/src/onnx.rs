//! A sentence encoder exported to ONNX (all-MiniLM-L6-v2, its dense layers quantized for int8
//! arithmetic, as `scripts/install-embedder --onnx` installs it: the semantic cache's default),
//! run in process by ONNX Runtime through the `ort` crate on one thread a question: its tokens through the encoder, the last hidden
//! states averaged (mean pooling), then scaled to unit length. The runtime is the shared
//! library in the model's folder (`libonnxruntime.so`, from the `onnxruntime` wheel), loaded
//! when the first such model is; nothing is fetched at build or run time. Each question takes
//! a session of a small pool (one per core), so questions on different cores do not wait for
//! each other.

use std::path::Path;
use std::sync::OnceLock;

use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;
use ort::value::Tensor;
use parking_lot::Mutex;
use tokenizers::Tokenizer;

/// The files an ONNX model's folder holds.
pub const FILES: [&str; 3] = ["model.onnx", "tokenizer.json", LIBRARY];

/// ONNX Runtime's shared library, in the model's folder.
pub const LIBRARY: &str = "libonnxruntime.so";

/// The library the process loaded (the first one asked for: a process holds one runtime).
static RUNTIME: OnceLock<Result<String, String>> = OnceLock::new();

/// Whether the model folder `dir` holds an ONNX encoder.
pub fn is_onnx(dir: &Path) -> bool {
    dir.join("model.onnx").is_file()
}

/// A loaded encoder.
pub struct Onnx {
    sessions: Vec<Mutex<Session>>,
    tokenizer: Tokenizer,
    /// Whether the model takes `token_type_ids`.
    types: bool,
    dim: usize,
}

fn runtime(dir: &Path) -> Result<(), String> {
    let lib = dir.join(LIBRARY);
    let loaded = RUNTIME.get_or_init(|| {
        let shown = lib.display().to_string();
        match ort::init_from(&shown).commit() {
            Ok(_) => Ok(shown),
            Err(e) => Err(format!("{shown}: {e}")),
        }
    });
    loaded.as_ref().map(|_| ()).map_err(Clone::clone)
}

impl Onnx {
    /// Loads the encoder in `dir` with `sessions` sessions; the error says what failed.
    pub fn load(dir: &Path, sessions: usize) -> Result<Self, String> {
        runtime(dir)?;
        let tokenizer = crate::bert::tokenizer(dir)?;
        let model = std::fs::read(dir.join("model.onnx")).map_err(|e| e.to_string())?;
        let open = || -> Result<Session, String> {
            Session::builder()
                .and_then(|b| b.with_optimization_level(GraphOptimizationLevel::Level3))
                .and_then(|b| b.with_intra_threads(1))
                .and_then(|b| b.with_inter_threads(1))
                .and_then(|b| b.commit_from_memory(&model))
                .map_err(|e| format!("model.onnx: {e}"))
        };
        let first = open()?;
        let types = first.inputs.iter().any(|i| i.name == "token_type_ids");
        let mut all = vec![Mutex::new(first)];
        for _ in 1..sessions.max(1) {
            all.push(Mutex::new(open()?));
        }
        let mut this = Self {
            sessions: all,
            tokenizer,
            types,
            dim: 0,
        };
        this.dim = this.encode("a")?.len();
        Ok(this)
    }

    /// The vectors' dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// `text`'s mean-pooled vector (not yet scaled).
    pub fn encode(&self, text: &str) -> Result<Vec<f32>, String> {
        let enc = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| e.to_string())?;
        let ids: Vec<i64> = enc.get_ids().iter().map(|&i| i64::from(i)).collect();
        let n = ids.len();
        let tensor = |v: Vec<i64>| Tensor::from_array(([1usize, n], v)).map_err(|e| e.to_string());
        let (ids, mask) = (tensor(ids)?, tensor(vec![1; n])?);
        let mut session = self.session();
        let out = if self.types {
            session.run(ort::inputs![ids, mask, tensor(vec![0; n])?])
        } else {
            session.run(ort::inputs![ids, mask])
        }
        .map_err(|e| e.to_string())?;
        let (shape, hidden) = out[0]
            .try_extract_tensor::<f32>()
            .map_err(|e| e.to_string())?;
        // [1, n, dim]: one sequence, no padding, so the mean is over every token.
        let dim = match **shape {
            [1, t, d] if usize::try_from(t).ok() == Some(n) => {
                usize::try_from(d).map_err(|e| e.to_string())?
            }
            _ => return Err(format!("the model answered a tensor of shape {shape:?}")),
        };
        let mut pooled = vec![0f32; dim];
        for row in hidden.chunks_exact(dim) {
            pooled.iter_mut().zip(row).for_each(|(p, x)| *p += x);
        }
        pooled.iter_mut().for_each(|p| *p /= n as f32);
        Ok(pooled)
    }

    /// A free session, else the first (waited for).
    fn session(&self) -> parking_lot::MutexGuard<'_, Session> {
        self.sessions
            .iter()
            .find_map(Mutex::try_lock)
            .unwrap_or_else(|| self.sessions[0].lock())
    }
}
