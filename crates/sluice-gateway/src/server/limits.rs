//! What client connections may take: how many are open at once, how long a client has to
//! send a request's head (and an idle keep-alive connection waits for its next one), and
//! how large that head may be. A connection past the count is closed as it arrives; a slow
//! or idle one is closed at the timeout; a head too large gets 431 from hyper.

use std::time::Duration;

use sluice_config::gateway::{
    DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_HEADER_BYTES, DEFAULT_STALL_TIMEOUT,
};

/// The connection limits a server applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnLimits {
    /// Client connections open at once at most.
    pub max_connections: usize,
    /// How long a client has to send a request's head, and an idle connection is kept.
    pub header_timeout: Duration,
    /// How long a write to the client may wait for it to take bytes before the connection
    /// is closed (a reader that stopped reading).
    pub stall_timeout: Duration,
    /// Largest request head, in bytes.
    pub max_header_bytes: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        Self {
            max_connections: auto_max_connections(),
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            stall_timeout: DEFAULT_STALL_TIMEOUT,
            max_header_bytes: usize::try_from(DEFAULT_MAX_HEADER_BYTES).unwrap_or(usize::MAX),
        }
    }
}

/// Fewest connections the automatic count allows, whatever the descriptor limit says.
const MIN_AUTO: usize = 256;

/// Three quarters of the file descriptors this process may open: each client connection
/// takes one, and the rest are kept for upstream connections, the ledger and files.
pub fn auto_max_connections() -> usize {
    let soft = rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(1024, |(soft, _)| soft);
    usize::try_from(soft.saturating_mul(3) / 4)
        .unwrap_or(usize::MAX)
        .max(MIN_AUTO)
}

/// Raises this process's limit on open files to the most it may have (its hard limit), as
/// a server holding many connections needs; returns the limit now in force.
pub fn raise_file_limit() -> std::io::Result<u64> {
    rlimit::increase_nofile_limit(u64::MAX)
}
