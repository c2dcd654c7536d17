//! The connections to Redis: a few multiplexed, self-reconnecting connections (reconnects
//! back off exponentially with jitter, so a fleet coming back does not storm the server),
//! every command bounded by the command timeout.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{FromRedisValue, Script, ScriptInvocation};

use crate::Settings;

/// What went wrong with the cluster's Redis.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The URL does not parse.
    #[error("[cluster] the Redis URL in ${from} does not parse: {cause}")]
    Url {
        /// The environment variable it came from.
        from: String,
        /// What is wrong with it.
        cause: String,
    },
    /// Redis did not answer at start.
    #[error("[cluster] Redis at {at} cannot be reached: {cause}")]
    Unreachable {
        /// Host and port (no password).
        at: String,
        /// Why.
        cause: String,
    },
    /// A command failed.
    #[error("Redis: {0}")]
    Command(#[from] redis::RedisError),
    /// A command took longer than the command timeout.
    #[error("Redis took longer than {0:?}")]
    Timeout(Duration),
    /// An answer of a shape sluice does not read (never taken as zero).
    #[error("Redis answered {what} in a shape sluice does not read: {got}")]
    Malformed {
        /// What was asked.
        what: &'static str,
        /// What came back.
        got: String,
    },
}

/// The cluster's connections.
pub(crate) struct Redis {
    conns: Vec<ConnectionManager>,
    next: AtomicUsize,
    prefix: String,
    timeout: Duration,
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redis")
            .field("connections", &self.conns.len())
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl Redis {
    /// Opens `settings.connections` connections.
    pub(crate) async fn connect(settings: &Settings) -> Result<Self, ClusterError> {
        let client = redis::Client::open(settings.url.as_str()).map_err(|e| ClusterError::Url {
            from: settings.url_from.clone(),
            cause: e.to_string(),
        })?;
        let info = client.get_connection_info();
        let at = info.addr().to_string();
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.connect_timeout))
            .set_response_timeout(Some(settings.command_timeout))
            .set_min_delay(Duration::from_millis(100))
            .set_max_delay(Duration::from_secs(5))
            .set_number_of_retries(3);
        let mut conns = Vec::with_capacity(settings.connections.max(1));
        for _ in 0..settings.connections.max(1) {
            let c = tokio::time::timeout(
                settings.connect_timeout,
                ConnectionManager::new_with_config(client.clone(), config.clone()),
            )
            .await
            .map_err(|_| ClusterError::Unreachable {
                at: at.clone(),
                cause: format!("no answer within {:?}", settings.connect_timeout),
            })?
            .map_err(|e| ClusterError::Unreachable {
                at: at.clone(),
                cause: e.to_string(),
            })?;
            conns.push(c);
        }
        Ok(Self {
            conns,
            next: AtomicUsize::new(0),
            prefix: settings.key_prefix.clone(),
            timeout: settings.command_timeout,
        })
    }

    /// The key `name` under the cluster's prefix.
    pub(crate) fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    fn conn(&self) -> ConnectionManager {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.conns.len();
        self.conns[i].clone()
    }

    async fn bounded<T>(
        &self,
        f: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, ClusterError> {
        match tokio::time::timeout(self.timeout, f).await {
            Ok(r) => r.map_err(ClusterError::from),
            Err(_) => Err(ClusterError::Timeout(self.timeout)),
        }
    }

    /// Runs `script` with the keys and arguments `fill` gives it.
    pub(crate) async fn eval<T: FromRedisValue>(
        &self,
        script: &Script,
        fill: impl FnOnce(&mut ScriptInvocation<'_>),
    ) -> Result<T, ClusterError> {
        let mut inv = script.prepare_invoke();
        fill(&mut inv);
        let mut c = self.conn();
        self.bounded(inv.invoke_async(&mut c)).await
    }

    /// Runs `cmd`.
    pub(crate) async fn query<T: FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
    ) -> Result<T, ClusterError> {
        let mut c = self.conn();
        self.bounded(cmd.query_async(&mut c)).await
    }

    /// Runs `pipe` (one round trip).
    pub(crate) async fn pipeline<T: FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> Result<T, ClusterError> {
        let mut c = self.conn();
        self.bounded(pipe.query_async(&mut c)).await
    }

    /// Adds one to `key`.
    pub(crate) async fn incr(&self, key: &str) -> Result<u64, ClusterError> {
        self.query(redis::cmd("INCR").arg(key)).await
    }

    /// `keys` as numbers (0 for one not set), in one round trip.
    pub(crate) async fn get_u64s<const N: usize>(
        &self,
        keys: &[String; N],
    ) -> Result<[u64; N], ClusterError> {
        let v: Vec<Option<u64>> = self.query(redis::cmd("MGET").arg(&keys[..])).await?;
        let mut out = [0; N];
        for (o, v) in out.iter_mut().zip(v) {
            *o = v.unwrap_or(0);
        }
        Ok(out)
    }
}
