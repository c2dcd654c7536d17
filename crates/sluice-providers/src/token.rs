//! A bearer token kept in a file that something else rotates (a workload identity's Entra ID
//! token for Azure, an OAuth access token for Vertex AI): read at start, looked at again at most once every [`RECHECK`], and re-read when
//! its modification time or length changed. A file that cannot be read later keeps the last
//! token (logged): the upstream's 401 then says the token expired.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use sluice_core::{ErrorKind, GatewayError};
use tokio::time::Instant;

/// The longest token file read (an Entra ID token is a few kilobytes).
const LONGEST: u64 = 64 * 1024;

/// How often the file is looked at again.
pub const RECHECK: Duration = Duration::from_secs(1);

/// A file's modification time and length: what says it changed.
type Stamp = (SystemTime, u64);

/// What was last read, and when the file was last looked at.
#[derive(Debug)]
struct Read {
    header: Arc<str>,
    stamp: Option<Stamp>,
    checked: Instant,
}

/// A token file.
#[derive(Debug)]
pub struct TokenFile {
    path: PathBuf,
    read: Mutex<Read>,
}

impl TokenFile {
    /// Reads the token in `path` now: a file that cannot be read or holds no token is a
    /// configuration error.
    pub fn open(path: &Path, now: Instant) -> Result<Self, GatewayError> {
        let (header, stamp) = load(path).map_err(|e| {
            GatewayError::new(
                ErrorKind::Internal,
                format!("token_file `{}`: {e}", path.display()),
            )
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            read: Mutex::new(Read {
                header,
                stamp,
                checked: now,
            }),
        })
    }

    /// `Bearer TOKEN` as of `now`: the file looked at again when [`RECHECK`] has passed.
    pub fn bearer(&self, now: Instant) -> Arc<str> {
        let mut r = self.read.lock();
        if now.saturating_duration_since(r.checked) < RECHECK {
            return r.header.clone();
        }
        r.checked = now;
        let stamp = stamp_of(&self.path);
        if stamp.is_some() && stamp == r.stamp {
            return r.header.clone();
        }
        match load(&self.path) {
            Ok((header, stamp)) => {
                r.header = header;
                r.stamp = stamp;
            }
            Err(e) => tracing::warn!(
                file = %self.path.display(),
                "the token file could not be read again ({e}); the last token is sent"
            ),
        }
        r.header.clone()
    }
}

/// Whether `path` holds a token now (what `config check` asks), or why not.
pub fn check(path: &Path) -> Result<(), String> {
    load(path).map(|_| ())
}

fn stamp_of(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

fn load(path: &Path) -> Result<(Arc<str>, Option<Stamp>), String> {
    use std::io::Read as _;
    let stamp = stamp_of(path);
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    if !file.metadata().map_err(|e| e.to_string())?.is_file() {
        return Err("it is not a regular file".into());
    }
    let mut text = String::new();
    file.take(LONGEST + 1)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    if text.len() as u64 > LONGEST {
        return Err(format!("it is longer than {LONGEST} bytes"));
    }
    let token = text.trim();
    if token.is_empty() {
        return Err("it holds no token".into());
    }
    if !token.bytes().all(|b| (0x21..0x7f).contains(&b)) {
        return Err("the token is not one line of visible ASCII".into());
    }
    Ok((Arc::from(format!("Bearer {token}")), stamp))
}
