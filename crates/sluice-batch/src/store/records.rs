//! What the job store keeps and hands back: files, jobs, their items' counts, claims and
//! endings.

use crate::input::Endpoint;
use crate::state::Status;

/// A file to keep.
#[derive(Clone, Debug)]
pub struct NewFile {
    /// Its id (`file-...`).
    pub id: String,
    /// Whose it is (`""` for requests with no tenant).
    pub tenant: String,
    /// Its name as uploaded.
    pub filename: String,
    /// What it is for (`batch`).
    pub purpose: String,
    /// Its text.
    pub content: String,
    /// When it was uploaded, in Unix milliseconds.
    pub created_ms: i64,
    /// When it is deleted, in Unix milliseconds.
    pub expires_ms: i64,
}

/// A kept file, without its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredFile {
    /// Its id.
    pub id: String,
    /// Whose it is.
    pub tenant: String,
    /// Its name as uploaded.
    pub filename: String,
    /// What it is for.
    pub purpose: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// When it was uploaded, in Unix milliseconds.
    pub created_ms: i64,
    /// When it is deleted, in Unix milliseconds.
    pub expires_ms: i64,
}

/// A job to keep, with its items.
#[derive(Clone, Debug)]
pub struct NewBatch {
    /// Its id (`batch_...`).
    pub id: String,
    /// Whose it is.
    pub tenant: String,
    /// The API key it was submitted with (its items run as that key), if any.
    pub api_key: Option<String>,
    /// That key's SHA-256 then: a key revoked or replaced since no longer runs its items.
    pub key_sha256: Option<String>,
    /// The API its lines call.
    pub endpoint: Endpoint,
    /// The file its lines came from.
    pub input_file_id: String,
    /// When it was made, in Unix milliseconds.
    pub created_ms: i64,
    /// When its window closes, in Unix milliseconds.
    pub expires_ms: i64,
    /// The client's metadata, as JSON text.
    pub metadata: Option<String>,
}

/// A kept job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredBatch {
    /// Its id.
    pub id: String,
    /// Whose it is.
    pub tenant: String,
    /// The key its items run as.
    pub api_key: Option<String>,
    /// That key's SHA-256 when it was submitted.
    pub key_sha256: Option<String>,
    /// The API its lines call.
    pub endpoint: Endpoint,
    /// The file its lines came from.
    pub input_file_id: String,
    /// When it was made, in Unix milliseconds.
    pub created_ms: i64,
    /// When its window closes, in Unix milliseconds.
    pub expires_ms: i64,
    /// The client's metadata, as JSON text.
    pub metadata: Option<String>,
    /// Its items in all.
    pub total: u64,
    /// When the client asked to cancel it.
    pub cancel_ms: Option<i64>,
    /// How and when it ended, once it has.
    pub ended: Option<(Status, i64)>,
}

/// An item claimed to be sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claimed {
    /// Its job.
    pub batch_id: String,
    /// Its line in the job's file.
    pub line: u64,
    /// The client's id for it.
    pub custom_id: String,
    /// Its request body.
    pub body: String,
    /// The epoch of this claim: every write of it names it.
    pub epoch: i64,
    /// How many times it has been claimed, this claim included.
    pub tries: u64,
}

impl Claimed {
    /// The ledger's key for the item (`BATCH_ID/LINE`): one row per item at most.
    pub fn ledger_key(&self) -> String {
        format!("{}/{}", self.batch_id, self.line)
    }
}

/// How an item ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    /// An HTTP answer (2xx: done; any other: failed), its body as the client would have got.
    Answered {
        /// Its status.
        status: u16,
        /// Its body (JSON).
        body: String,
        /// The call's request id.
        request_id: String,
        /// Prompt tokens.
        prompt_tokens: u64,
        /// Of which cached.
        cached_tokens: u64,
        /// Completion tokens.
        completion_tokens: u64,
    },
    /// No HTTP answer: the item could not be sent (`code` says why).
    Failed {
        /// OpenAI's error code for the line.
        code: String,
        /// What happened.
        message: String,
    },
    /// Its job was cancelled before it was sent: never sent, never billed.
    Cancelled,
}

/// One ended item, as the output or error file writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ItemResult {
    /// Its line in the job's file.
    pub line: u64,
    /// The client's id for it.
    pub custom_id: String,
    /// Its state: `done`, `failed`, `cancelled` or `expired`.
    pub state: String,
    /// Its HTTP status, when it was answered.
    pub status_code: Option<u16>,
    /// Its answer's body, when it was answered.
    pub response: Option<String>,
    /// Its error code, when it was not.
    pub error_code: Option<String>,
    /// What happened, when it was not answered.
    pub error_message: Option<String>,
    /// The call's request id.
    pub request_id: Option<String>,
}
