//! Items' claims: taken under a lease for an owner, renewed, given back, queued again after
//! a restart, and ended under the epoch they were claimed at.

use super::*;

impl Jobs {
    /// Claims up to `n` items of `kind` for `owner` until `now_ms + lease_ms`: queued ones,
    /// and running ones whose lease ran out (their owner is gone), of jobs whose window is
    /// open, earliest job first and, within a job, those sharing a prefix together.
    pub async fn claim(
        &self,
        kind: Kind,
        owner: &str,
        n: u32,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<Vec<Claimed>, BatchError> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let lock = match self.pool {
            Pool::Sqlite(_) => "",
            Pool::Postgres(_) => "FOR UPDATE SKIP LOCKED",
        };
        let member = match kind {
            Kind::Calls => "NOT IN",
            Kind::Documents => "IN",
        };
        let text = sql::CLAIM.replace("{lock}", lock).replace("{kind}", member);
        let mut claimed = on!(self, p => sqlx::query(sqlx::AssertSqlSafe(text))
            .bind(owner)
            .bind(now_ms + lease_ms)
            .bind(now_ms)
            .bind(i64::from(n))
            .bind(Endpoint::Analyses.path())
            .fetch_all(p)
            .await?
            .iter()
            .map(|r| -> Result<Claimed, sqlx::Error> {
                Ok(Claimed {
                    batch_id: r.try_get(0)?,
                    line: r.try_get::<i64, _>(1)?.max(0) as u64,
                    custom_id: r.try_get(2)?,
                    body: r.try_get(3)?,
                    epoch: r.try_get(4)?,
                    tries: r.try_get::<i64, _>(5)?.max(0) as u64,
                })
            })
            .collect::<Result<Vec<_>, _>>())?;
        claimed.sort_by(|a, b| (&a.batch_id, a.line).cmp(&(&b.batch_id, b.line)));
        Ok(claimed)
    }

    /// Extends the lease of every item `owner` runs to `now_ms + lease_ms`; how many.
    pub async fn renew(&self, owner: &str, now_ms: i64, lease_ms: i64) -> Result<u64, BatchError> {
        Ok(on!(self, p => sqlx::query(sql::RENEW)
            .bind(owner)
            .bind(now_ms + lease_ms)
            .execute(p)
            .await?
            .rows_affected()))
    }

    /// Puts a claimed item back in the queue unsent (it was refused before reaching an
    /// upstream), its claim not counted; whether the claim still held.
    pub async fn release(&self, c: &Claimed) -> Result<bool, BatchError> {
        let n = on!(self, p => sqlx::query(sql::RELEASE)
            .bind(&c.batch_id)
            .bind(int(c.line))
            .bind(c.epoch)
            .execute(p)
            .await?
            .rows_affected());
        Ok(n > 0)
    }

    /// Puts back every item in flight (for an embedded store at start: the process that
    /// claimed them is gone); how many.
    pub async fn requeue_running(&self) -> Result<u64, BatchError> {
        Ok(on!(self, p => sqlx::query(sql::REQUEUE_RUNNING)
            .execute(p)
            .await?
            .rows_affected()))
    }

    /// Ends a claimed item as `ending` says, at `now_ms`, if the claim still holds: whether
    /// it did (`false`: another claim took the item, and ends it).
    pub async fn end_item(
        &self,
        c: &Claimed,
        ending: &Ending,
        now_ms: i64,
    ) -> Result<bool, BatchError> {
        let (state, status, body, code, message, request_id, tokens) = match ending {
            Ending::Answered {
                status,
                body,
                request_id,
                prompt_tokens,
                cached_tokens,
                completion_tokens,
            } => (
                if (200..300).contains(status) {
                    "done"
                } else {
                    "failed"
                },
                Some(i64::from(*status)),
                Some(body.as_str()),
                None,
                None,
                Some(request_id.as_str()),
                [
                    int(*prompt_tokens),
                    int(*cached_tokens),
                    int(*completion_tokens),
                ],
            ),
            Ending::Failed { code, message } => (
                "failed",
                None,
                None,
                Some(code.as_str()),
                Some(message.as_str()),
                None,
                [0; 3],
            ),
            Ending::Cancelled => ("cancelled", None, None, None, None, None, [0; 3]),
        };
        let n = on!(self, p => sqlx::query(sql::END_ITEM)
            .bind(state)
            .bind(status)
            .bind(body)
            .bind(code)
            .bind(message)
            .bind(request_id)
            .bind(now_ms)
            .bind(tokens[0])
            .bind(tokens[1])
            .bind(tokens[2])
            .bind(&c.batch_id)
            .bind(int(c.line))
            .bind(c.epoch)
            .execute(p)
            .await?
            .rows_affected());
        Ok(n > 0)
    }
}
