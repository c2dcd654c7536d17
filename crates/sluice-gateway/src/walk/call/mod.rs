//! The life of one call record: opened when a request arrives, settled exactly once when the
//! answer ends, fails, or the client goes away.

use std::sync::Arc;

use bytes::Bytes;

use sluice_cache::semantic::Pending;
use sluice_cache::{Key, Stored};
use sluice_core::record::CLIENT_CLOSED;
use sluice_core::{Attempt, AttemptKind, AttemptOutcome, CallRecord, ErrorKind, Marks, RequestId};
use sluice_economy::{Micros, Reservation};
use sluice_ingress::Dialect;
use sluice_routing::Deployment;
use sluice_telemetry::InflightGuard;
use tokio::sync::watch;
use tokio::time::Instant;

use super::billing::{self, Priced};
use crate::Gateway;

mod described;
mod notes;

pub use notes::{Chosen, Identified, NotRouted, Routed, Shaping};

/// An open call. Dropping it without [`Call::finish`] settles it as abandoned by the client.
pub struct Call {
    gw: Arc<Gateway>,
    record: CallRecord,
    /// What the call holds of its tenant's credits and quotas until it settles.
    reservation: Option<Reservation>,
    /// What each attempt's deployment charges (its model and price), as the walk held them;
    /// in the order of the record's attempts.
    priced: Vec<Priced>,
    /// The attempt whose answer the client got, once one had a first byte.
    answered: Option<usize>,
    /// Bytes of answer the upstream produced (sent to the client, or read on after it left):
    /// what an answer that reports no usage is settled by (a token for every four bytes, its
    /// JSON included: an estimate on the high side).
    sent_bytes: u64,
    /// Where its complete answer goes in the answer cache, when it is to be stored.
    cache_key: Option<Key>,
    /// The flight it leads (identical requests wait for its answer), ended when it settles.
    flight: Option<(Key, watch::Sender<()>)>,
    /// The question its complete answer is stored under in the semantic cache (or verifies
    /// an entry's answer against), when it is to be.
    question: Option<Pending>,
    settled: bool,
    /// The API the client spoke: how its answer and errors are written.
    dialect: Dialect,
    /// Whether its ledger row goes back to its caller instead of the ledger's writer (a
    /// known caller's, which bills it with its own work: a batch item's end, say).
    hands_back: bool,
    /// The row handed back, once settled.
    handed: Option<sluice_ledger::Entry>,
    /// Cancelled when its caller withdraws it (see [`Call::withdrawn`]).
    withdrawn: Option<tokio_util::sync::CancellationToken>,
    /// The upstream's queue it waits in, and since when (see [`Call::queues_at`]).
    queued: Option<(Arc<sluice_routing::limiter::Limiter>, Instant)>,
    _inflight: InflightGuard,
}

impl Call {
    /// Opens the record of a request that arrived `now`.
    pub fn open(gw: Arc<Gateway>, id: RequestId, now: Instant, dialect: Dialect) -> Self {
        let inflight = gw.observers.telemetry.inflight();
        Self {
            gw,
            record: CallRecord::new(id, now),
            reservation: None,
            priced: Vec::new(),
            answered: None,
            sent_bytes: 0,
            cache_key: None,
            flight: None,
            question: None,
            settled: false,
            dialect,
            hands_back: false,
            withdrawn: None,
            queued: None,
            handed: None,
            _inflight: inflight,
        }
    }

    /// Notes, for a traced call, that the step `which` picks ended now (the first time).
    pub fn mark(&mut self, which: impl FnOnce(&mut Marks) -> &mut Option<Instant>) {
        if self.record.trace.is_some() {
            which(&mut self.record.timings.marks).get_or_insert_with(Instant::now);
        }
    }

    /// Hands the call's ledger row back to its caller when it settles (see
    /// [`Call::finish`]), instead of to the ledger's writer.
    pub fn hand_back(&mut self) {
        self.hands_back = true;
    }

    /// Whether its ledger row goes back to its caller (see [`Call::hand_back`]).
    pub fn hands_back(&self) -> bool {
        self.hands_back
    }

    /// Its caller may withdraw it by cancelling `token`.
    pub fn withdrawable(&mut self, token: tokio_util::sync::CancellationToken) {
        self.withdrawn = Some(token);
    }

    /// What withdraws it while nothing of it was sent: `None` once an attempt began (an
    /// attempt sent finishes), or when its caller cannot withdraw it.
    pub fn withdrawn(&self) -> Option<tokio_util::sync::CancellationToken> {
        self.withdrawn
            .clone()
            .filter(|_| self.record.attempts.is_empty())
    }

    /// The API the client spoke.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Counts `bytes` of answer the upstream produced (sent to the client, or read on after
    /// it left).
    pub fn sent(&mut self, bytes: usize) {
        self.sent_bytes += bytes as u64;
    }

    /// Holds `reservation` until the call settles.
    pub fn hold(&mut self, reservation: Option<Reservation>) {
        self.reservation = reservation;
    }

    /// Gives back what the call holds of its tenant's credits and quotas, unspent: the group
    /// it was reserved at did not answer, and a fallback reserves at its own price.
    pub fn release_hold(&mut self) {
        if let Some(held) = self.reservation.take() {
            self.gw.tenants.accounts.settle(
                held,
                Instant::now(),
                std::time::SystemTime::now(),
                0,
                Micros::ZERO,
            );
        }
    }

    /// Stores the call's complete answer under `key` in the answer cache when it succeeds.
    pub fn store_answer_under(&mut self, key: Key) {
        self.cache_key = Some(key);
    }

    /// Stores the call's answer under `key`, and has identical requests that arrive before
    /// it settles wait for it (`tx` is dropped when it does).
    pub fn lead(&mut self, key: Key, tx: watch::Sender<()>) {
        self.cache_key = Some(key);
        self.flight = Some((key, tx));
    }

    /// Stores the call's complete answer in the semantic cache under its question when it
    /// succeeds (or, verifying, compares it with the entry's).
    pub fn store_by_meaning(&mut self, by_meaning: Pending) {
        self.question = Some(by_meaning);
    }

    /// Whether the call's answer is to be stored in the answer cache or the semantic one.
    pub fn stores_answer(&self) -> bool {
        self.cache_key.is_some() || self.question.is_some()
    }

    /// Puts `body`, the complete answer just received, in the answer cache if the call is to
    /// store it and it is worth keeping (never an error or an empty answer), priced at what it cost (what every hit on it will save); the question it is
    /// to be stored under by meaning, with that cost, is the caller's to land.
    pub fn store_answer(&mut self, body: &Bytes, now: Instant) -> Option<(Pending, u64)> {
        if self.cache_key.is_none() && self.question.is_none() {
            return None;
        }
        if let Err(why) = sluice_cache::keep::worth_keeping(body) {
            // Passed to its client as it came; no later asker gets it from a cache.
            tracing::debug!(
                request_id = self.record.request_id.as_str(),
                %why,
                "an answer not stored in the caches"
            );
            self.cache_key = None;
            self.question = None;
            return None;
        }
        let cost = billing::costs(
            &self.record,
            self.record.usage.as_ref(),
            &self.priced,
            self.answered,
        )
        .answer
        .unwrap_or(0);
        if let (Some(key), Some(cache)) = (self.cache_key.take(), &self.gw.caches.exact) {
            cache.put(
                key,
                Stored {
                    body: body.clone(),
                    cost_micros: cost,
                    stored_at: now,
                },
            );
        }
        self.question.take().map(|q| (q, cost))
    }

    /// The gateway the call is in.
    pub fn gateway(&self) -> &Arc<Gateway> {
        &self.gw
    }

    /// The record so far.
    pub fn record(&self) -> &CallRecord {
        &self.record
    }

    /// Starts an attempt at deployment `d`; returns its index.
    pub fn begin_attempt(&mut self, d: &Deployment, now: Instant, kind: AttemptKind) -> usize {
        let upstream = d.name.clone();
        self.priced.push(Priced {
            model: d.model.clone(),
            price: d.price,
        });
        if self.record.timings.dispatched.is_none() {
            self.record.timings.dispatched = Some(now);
        }
        // The chosen upstream until one answers; the winner replaces it at its first byte.
        self.record.upstream.get_or_insert_with(|| upstream.clone());
        let mut attempt = Attempt::start(upstream, now);
        attempt.kind = kind;
        self.record.attempts.push(attempt);
        self.record.attempts.len() - 1
    }

    /// Notes the first byte of attempt `i`, and of the call when it is the winner.
    pub fn first_byte(&mut self, i: usize, at: Instant) {
        if let Some(a) = self.record.attempts.get_mut(i) {
            a.first_byte.get_or_insert(at);
            self.record.upstream = Some(a.upstream.clone());
            self.answered = Some(i);
        }
        self.record.timings.first_byte.get_or_insert(at);
    }

    /// Ends attempt `i` with `outcome`.
    pub fn end_attempt(&mut self, i: usize, outcome: AttemptOutcome, at: Instant) {
        if let Some(a) = self.record.attempts.get_mut(i) {
            a.ended = Some(at);
            a.outcome = outcome;
        }
    }

    /// Settles the call with the status the client got; its ledger row when it is handed
    /// back to its caller.
    pub fn finish(mut self, status: u16, error: Option<ErrorKind>) -> Option<sluice_ledger::Entry> {
        self.settle(status, error);
        self.handed.take()
    }

    fn settle(&mut self, status: u16, error: Option<ErrorKind>) {
        if self.settled {
            return;
        }
        self.settled = true;
        // Whatever its answer was stored as (or not), those waiting for it may look now.
        if let Some((key, tx)) = self.flight.take() {
            if let Some(cache) = &self.gw.caches.exact {
                cache.land(&key);
            }
            drop(tx);
        }
        let now = Instant::now();
        let r = &mut self.record;
        r.status = status;
        r.error = error;
        r.timings.done = Some(now);
        for a in &mut r.attempts {
            if a.outcome == AttemptOutcome::Pending {
                a.outcome = if status == CLIENT_CLOSED {
                    AttemptOutcome::Cancelled
                } else {
                    error.map_or(AttemptOutcome::Ok, AttemptOutcome::Failed)
                };
                a.ended = Some(now);
            }
        }
        let s = billing::settlement(
            &self.record,
            status,
            &self.priced,
            self.answered,
            self.sent_bytes,
        );
        let r = &mut self.record;
        r.usage = s.usage;
        r.usage_estimated |= s.estimated;
        r.unpriced = s.costs.unpriced;
        if let Some((saved, premium)) = s.prompt_cache {
            r.prompt_cache_saved_micros = saved;
            r.prompt_cache_premium_micros = premium;
        }
        r.cost_micros = s.costs.total();
        r.extra_cost_micros = s.costs.extra;
        let (mut settled_in_ledger, mut hold) = (false, None);
        if let Some(held) = self.reservation.take() {
            settled_in_ledger = held.is_in_ledger();
            hold = self.gw.tenants.accounts.hold_name(&held);
            let (tokens, cost) = s.reservation;
            self.gw.tenants.accounts.settle(
                held,
                now,
                std::time::SystemTime::now(),
                tokens,
                Micros(cost),
            );
        }
        let answered = self.answered.or((!self.priced.is_empty()).then_some(0));
        let priced = answered.and_then(|i| self.priced.get(i));
        let mut entry = self
            .gw
            .ledger
            .is_some()
            .then(|| billing::entry(&self.record, priced))
            .map(|mut e| {
                e.settled_in_ledger = settled_in_ledger;
                e.hold = hold;
                e
            });
        if self.hands_back {
            // A call dropped unfinished loses it with its caller (a runner shutting down):
            // the item stays claimed and is sent again, billed once.
            self.handed = entry.take();
        }
        self.gw.settle(&self.record, entry);
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        // Not finished: the client left (its connection closed and axum dropped us).
        self.settle(CLIENT_CLOSED, None);
    }
}
