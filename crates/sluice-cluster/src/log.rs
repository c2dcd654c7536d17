//! Logs every instance appends to and every instance follows, one Redis stream per topic: how
//! state read on every request but written seldom (the semantic cache's entries, prefix
//! affinity, breaker hints, routers' observations) is shared without a round trip on a
//! request's path. Each instance keeps a replica and applies what the others append, within
//! [`FOLLOW_EVERY`]; its own records it applied when it wrote them.
//!
//! Appends are queued and sent in one pipeline per tick; a stream keeps its newest
//! `keep` records (trimmed approximately), so an instance that starts late replays what is
//! still kept. While Redis cannot answer, appends are dropped (counted) and nothing is
//! followed: each instance's replica is its own until Redis is back.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use redis::Value;
use tokio::sync::mpsc;

use crate::health::{Health, Kind};
use crate::store::Redis;

/// How often the streams are read.
pub const FOLLOW_EVERY: Duration = Duration::from_millis(100);
/// Records read from all streams at most per read.
const READ_AT_MOST: usize = 1_000;
/// Records sent at most per pipeline.
const SEND_AT_MOST: usize = 256;

/// A record queued for topic `.0`.
type Append = (usize, Vec<u8>);
/// A record's origin instance and data, unless it could not be read.
type Body = Option<(String, Vec<u8>)>;

/// What a follower does with another instance's record.
pub type Apply = Arc<dyn Fn(&[u8]) + Send + Sync>;

/// Where a topic's follower starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// Every record still kept (state that a newcomer needs: entries, hints).
    Kept,
    /// Records appended from now on (observations already counted elsewhere).
    Now,
}

struct Topic {
    stream: String,
    keep: usize,
    kind: Kind,
    start: Start,
    /// The last id read; empty until resolved.
    last: String,
    apply: Apply,
}

/// The logs of one instance.
pub struct Logs {
    redis: Arc<Redis>,
    health: Arc<Health>,
    instance: Arc<str>,
    topics: Mutex<Vec<Topic>>,
    send: mpsc::UnboundedSender<Append>,
    queue: Mutex<Option<mpsc::UnboundedReceiver<Append>>>,
    /// Records dropped because Redis could not take them.
    pub dropped: AtomicU64,
    /// Records applied from other instances.
    pub applied: AtomicU64,
    /// Records skipped because they could not be read.
    pub unreadable: AtomicU64,
}

impl std::fmt::Debug for Logs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Logs")
            .field("topics", &self.topics.lock().len())
            .finish_non_exhaustive()
    }
}

/// A handle to append to one topic.
#[derive(Clone)]
pub struct Writer {
    logs: Arc<Logs>,
    topic: usize,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("topic", &self.topic)
            .finish()
    }
}

impl Writer {
    /// Appends `record` (sent with the next pipeline; dropped while Redis cannot answer).
    pub fn append(&self, record: Vec<u8>) {
        if self.logs.health.is_down() {
            self.logs.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if self.logs.send.send((self.topic, record)).is_err() {
            self.logs.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Logs {
    pub(crate) fn new(redis: Arc<Redis>, health: Arc<Health>, instance: Arc<str>) -> Arc<Self> {
        let (send, queue) = mpsc::unbounded_channel();
        Arc::new(Self {
            redis,
            health,
            instance,
            topics: Mutex::new(Vec::new()),
            send,
            queue: Mutex::new(Some(queue)),
            dropped: AtomicU64::new(0),
            applied: AtomicU64::new(0),
            unreadable: AtomicU64::new(0),
        })
    }

    /// Follows topic `name` (state of `kind`), keeping its newest `keep` records, from
    /// `start`, applying the other instances' records with `apply`; returns the handle that
    /// appends to it.
    pub fn topic(
        self: &Arc<Self>,
        name: &str,
        kind: Kind,
        keep: usize,
        start: Start,
        apply: Apply,
    ) -> Writer {
        let mut topics = self.topics.lock();
        topics.push(Topic {
            stream: self.redis.key(&format!("log:{name}")),
            keep,
            kind,
            start,
            last: String::new(),
            apply,
        });
        Writer {
            logs: self.clone(),
            topic: topics.len() - 1,
        }
    }

    /// Sends what is appended and reads what the others appended, until dropped.
    pub(crate) async fn run(self: Arc<Self>) {
        let Some(mut queue) = self.queue.lock().take() else {
            return;
        };
        let mut tick = tokio::time::interval(FOLLOW_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                first = queue.recv() => {
                    let Some(first) = first else { return };
                    let mut batch = vec![first];
                    while batch.len() < SEND_AT_MOST {
                        match queue.try_recv() {
                            Ok(r) => batch.push(r),
                            Err(_) => break,
                        }
                    }
                    self.send_batch(batch).await;
                }
                _ = tick.tick() => {
                    if !self.health.is_down() {
                        self.follow().await;
                    }
                }
            }
        }
    }

    async fn send_batch(&self, batch: Vec<Append>) {
        let mut pipe = redis::pipe();
        let mut kind = Kind::Hints;
        {
            let topics = self.topics.lock();
            for (t, record) in &batch {
                let Some(topic) = topics.get(*t) else {
                    continue;
                };
                kind = topic.kind;
                pipe.cmd("XADD")
                    .arg(&topic.stream)
                    .arg("MAXLEN")
                    .arg("~")
                    .arg(topic.keep)
                    .arg("*")
                    .arg("o")
                    .arg(&*self.instance)
                    .arg("d")
                    .arg(record.as_slice())
                    .ignore();
            }
        }
        if let Err(e) = self.redis.pipeline::<()>(&pipe).await {
            self.dropped
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            self.health.failed(kind, &e);
        }
    }

    /// Reads every topic once from where it stopped.
    async fn follow(&self) {
        let unresolved: Vec<(usize, String, Start)> = self
            .topics
            .lock()
            .iter()
            .enumerate()
            .filter(|(_, t)| t.last.is_empty())
            .map(|(i, t)| (i, t.stream.clone(), t.start))
            .collect();
        for (i, stream, start) in unresolved {
            let last = match start {
                Start::Kept => Ok("0-0".to_string()),
                Start::Now => self.last_id(&stream).await,
            };
            match last {
                Ok(id) => {
                    if let Some(t) = self.topics.lock().get_mut(i) {
                        t.last = id;
                    }
                }
                Err(e) => {
                    let kind = self.topics.lock().get(i).map_or(Kind::Hints, |t| t.kind);
                    self.health.failed(kind, &e);
                    return;
                }
            }
        }
        let (streams, ids): (Vec<String>, Vec<String>) = self
            .topics
            .lock()
            .iter()
            .map(|t| (t.stream.clone(), t.last.clone()))
            .unzip();
        if streams.is_empty() {
            return;
        }
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT").arg(READ_AT_MOST).arg("STREAMS");
        cmd.arg(&streams).arg(&ids);
        let read: Value = match self.redis.query(&cmd).await {
            Ok(v) => v,
            Err(e) => {
                self.health.failed(Kind::Hints, &e);
                return;
            }
        };
        for (stream, records) in parse_read(read) {
            let Some((i, apply)) = self
                .topics
                .lock()
                .iter()
                .enumerate()
                .find(|(_, t)| t.stream == stream)
                .map(|(i, t)| (i, t.apply.clone()))
            else {
                continue;
            };
            let mut last = None;
            for (id, body) in records {
                match body {
                    Some((origin, data)) if origin != *self.instance => {
                        apply(&data);
                        self.applied.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(_) => {}
                    None => {
                        self.unreadable.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(%stream, %id, "a record of the cluster's log could not be read; skipped");
                    }
                }
                last = Some(id);
            }
            if let Some(id) = last
                && let Some(t) = self.topics.lock().get_mut(i)
            {
                t.last = id;
            }
        }
    }

    /// The id of `stream`'s newest record ("0-0" for an empty stream).
    async fn last_id(&self, stream: &str) -> Result<String, crate::ClusterError> {
        let v: Value = self
            .redis
            .query(
                redis::cmd("XREVRANGE")
                    .arg(stream)
                    .arg("+")
                    .arg("-")
                    .arg("COUNT")
                    .arg(1),
            )
            .await?;
        let newest = match v {
            Value::Array(items) => items.into_iter().next().and_then(|e| match e {
                Value::Array(mut parts) if !parts.is_empty() => text(parts.swap_remove(0)),
                _ => None,
            }),
            _ => None,
        };
        Ok(newest.unwrap_or_else(|| "0-0".to_string()))
    }
}

fn text(v: Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b).ok(),
        Value::SimpleString(s) => Some(s),
        _ => None,
    }
}

/// One stream's records as read: (id, (origin instance, data) unless unreadable).
type Records = Vec<(String, Body)>;

/// An XREAD answer as (stream, records); anything not shaped like one is skipped.
fn parse_read(v: Value) -> Vec<(String, Records)> {
    let streams = match v {
        Value::Array(s) => s
            .into_iter()
            .filter_map(|s| match s {
                Value::Array(mut kv) if kv.len() == 2 => {
                    let entries = kv.pop()?;
                    Some((kv.pop()?, entries))
                }
                _ => None,
            })
            .collect::<Vec<_>>(),
        Value::Map(m) => m,
        _ => Vec::new(),
    };
    streams
        .into_iter()
        .filter_map(|(name, entries)| {
            let name = text(name)?;
            let Value::Array(entries) = entries else {
                return None;
            };
            let records = entries.into_iter().filter_map(record).collect();
            Some((name, records))
        })
        .collect()
}

/// One stream entry `[id, [field, value, ...]]` as (id, (origin, data)); an entry without
/// an id is skipped, one without its fields keeps its id (so it is read past, once).
fn record(e: Value) -> Option<(String, Body)> {
    let Value::Array(mut parts) = e else {
        return None;
    };
    let fields = if parts.len() == 2 { parts.pop() } else { None };
    let id = text(parts.into_iter().next()?)?;
    let Some(Value::Array(fields)) = fields else {
        return Some((id, None));
    };
    let (mut origin, mut data) = (None, None);
    let mut it = fields.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        match text(k).as_deref() {
            Some("o") => origin = text(v),
            Some("d") => {
                if let Value::BulkString(b) = v {
                    data = Some(b);
                }
            }
            _ => {}
        }
    }
    Some((id, origin.zip(data)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn an_xread_answer_reads_as_records_by_stream() {
        let entry = |id: &str, o: &str, d: &str| {
            Value::Array(vec![
                bulk(id),
                Value::Array(vec![bulk("o"), bulk(o), bulk("d"), bulk(d)]),
            ])
        };
        let v = Value::Array(vec![Value::Array(vec![
            bulk("p:log:a"),
            Value::Array(vec![entry("1-0", "x", "one"), entry("2-0", "y", "two")]),
        ])]);
        let got = parse_read(v);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, "p:log:a");
        assert_eq!(
            got[0].1,
            vec![
                ("1-0".to_string(), Some(("x".to_string(), b"one".to_vec()))),
                ("2-0".to_string(), Some(("y".to_string(), b"two".to_vec())))
            ]
        );
        // A record missing its data is read past, never applied half-read.
        let broken = Value::Array(vec![Value::Array(vec![
            bulk("p:log:a"),
            Value::Array(vec![Value::Array(vec![
                bulk("3-0"),
                Value::Array(vec![bulk("o"), bulk("x")]),
            ])]),
        ])]);
        assert_eq!(parse_read(broken)[0].1, vec![("3-0".to_string(), None)]);
        assert!(parse_read(Value::Nil).is_empty());
    }
}
